// The node: one dqlite node of a cluster (go-dqlite's app package, which
// joins, promotes voters and hands leadership over), in a process that
// registers the idempotency extension for every SQLite connection before
// the node opens its first one.
//
//	idemdq node -dir DIR -address HOST:PORT (loopback or private) [-join ADDR,ADDR] -ext build/idempotency.so
//
// Prints "ready id=N address=A" once the node is part of the cluster,
// then serves until SIGTERM or SIGINT (hand over leadership, close).
package main

/*
#cgo LDFLAGS: -lsqlite3 -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <sqlite3.h>

// register_extension: dlopen the extension and register its entry point
// with sqlite3_auto_extension, so every connection this process opens
// afterwards (the dqlite leader's connections included) has it. Returns
// NULL, or a message that the caller must not free.
static const char *register_extension(const char *path) {
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL) return dlerror();
	void *entry = dlsym(handle, "sqlite3_idempotency_init");
	if (entry == NULL) return dlerror();
	if (sqlite3_auto_extension((void (*)(void))entry) != SQLITE_OK)
		return "sqlite3_auto_extension failed";
	return NULL;
}

// probe_extension: open an in-memory connection and read idem_version(),
// proving the registration took. Returns a sqlite3_malloc'd text (the
// version, or "error: ...") that the caller frees with sqlite3_free.
static char *probe_extension(void) {
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *out = NULL;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
		out = sqlite3_mprintf("error: open: %s", db ? sqlite3_errmsg(db) : "out of memory");
	} else if (sqlite3_prepare_v2(db, "SELECT idem_version()", -1, &st, NULL) != SQLITE_OK ||
		   sqlite3_step(st) != SQLITE_ROW) {
		out = sqlite3_mprintf("error: %s", sqlite3_errmsg(db));
	} else {
		out = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}
*/
import "C"

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/canonical/go-dqlite/app"
	"github.com/canonical/go-dqlite/client"
)

// registerExtension registers the extension at path for every connection
// of this process and checks that a new connection sees it.
func registerExtension(path string) (string, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if msg := C.register_extension(cpath); msg != nil {
		return "", fmt.Errorf("register %s: %s", path, C.GoString(msg))
	}
	out := C.probe_extension()
	defer C.sqlite3_free(unsafe.Pointer(out))
	v := C.GoString(out)
	if strings.HasPrefix(v, "error: ") {
		return "", fmt.Errorf("the extension is registered but a new connection lacks it: %s", v)
	}
	return v, nil
}

func runNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	dir := fs.String("dir", "", "data directory")
	address := fs.String("address", "", "host:port to bind (loopback)")
	join := fs.String("join", "", "comma-separated addresses of existing nodes")
	ext := fs.String("ext", "", "path of the built extension")
	verbose := fs.Bool("v", false, "log dqlite's debug messages")
	fs.Parse(args)
	if *dir == "" || *address == "" || *ext == "" {
		return fmt.Errorf("node: -dir, -address and -ext are required")
	}
	if host, _, err := net.SplitHostPort(*address); err != nil {
		return fmt.Errorf("node: address %q: %v", *address, err)
	} else if ip := net.ParseIP(host); ip == nil || !(ip.IsLoopback() || ip.IsPrivate()) {
		return fmt.Errorf("node: address %q is neither loopback nor private; this program binds test networks only", *address)
	}
	version, err := registerExtension(*ext)
	if err != nil {
		return fmt.Errorf("node: %v", err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("node: %v", err)
	}
	logf := func(l client.LogLevel, format string, a ...interface{}) {
		if l >= client.LogWarn || *verbose {
			fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05.000"), l, fmt.Sprintf(format, a...))
		}
	}
	opts := []app.Option{app.WithAddress(*address), app.WithLogFunc(logf),
		app.WithRolesAdjustmentFrequency(2 * time.Second)}
	if *join != "" {
		opts = append(opts, app.WithCluster(strings.Split(*join, ",")))
	}
	node, err := app.New(*dir, opts...)
	if err != nil {
		return fmt.Errorf("node: start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := node.Ready(ctx); err != nil {
		node.Close()
		return fmt.Errorf("node: not ready: %v", err)
	}
	fmt.Printf("ready id=%d address=%s idempotency=%s sqlite=%s\n", node.ID(), node.Address(), version,
		C.GoString(C.sqlite3_libversion()))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	node.Handover(hctx)
	return node.Close()
}
