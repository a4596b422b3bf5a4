/* The extension's canonical.c, compiled into the Go package by cgo (cgo builds
** only the C files of the package's own directory). */
#include "../../ext/canonical.c"
