/* The extension's shortest.c, compiled into the Go package by cgo (cgo builds
** only the C files of the package's own directory). */
#include "../../ext/shortest.c"
