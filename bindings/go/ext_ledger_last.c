/* The extension's ledger_last.c, compiled into the Go package by cgo (cgo builds
** only the C files of the package's own directory). */
#include "../../ext/ledger_last.c"
