/* The extension's guard_schema.c, compiled into the Go package by cgo (cgo builds
** only the C files of the package's own directory). */
#include "../../ext/guard_schema.c"
