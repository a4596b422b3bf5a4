// The Go runner of tests/conformance/ (its README.md is the format), through
// the Go package (bindings/go) on mattn/go-sqlite3:
//
//	conformance --clock build/testclock.so --dir DIR FILE...
//
// Every step goes through the package as a user calls it: idempotency.Open
// (WAL, synchronous=FULL; busy_timeout 0 here), Claim with the arguments as
// Go values (the package writes their JSON), Settle, Resolve, Renew, Row.
// What the package does not offer (idem_purge, key derivation, plain SQL
// such as a guard or a guarded insert) runs as SQL on the same connection.
// Connection 0 and 1 are each one pinned *sql.Conn of their own *sql.DB.
//
// CLOCK is the test clock (tests/c/testclock.c), loaded before any database
// is opened (its VFS is then the default). Prints PASS conformance.go:FILE
// per file, or FAIL conformance.go:FILE: step N (OP): FIELD: expected E, got
// G at the first step that differs; exit 1 on a failure. Values compare as
// JSON texts: numbers by their digits (1.0 is not 1), member order aside.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"
	idempotency "github.com/sqlite-idempotency/sqlite-idempotency/bindings/go"
)

const prefix = "conformance.go"

var ctx = context.Background()

// norm is v as a JSON value whose numbers are json.Number (their text).
func norm(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	_ = dec.Decode(&out)
	return out
}

func text(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func same(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return text(a) == text(b)
}

// compare: "" when got has every member expect names, equal; else why.
func compare(expect, got any) string {
	if e, ok := expect.(map[string]any); ok {
		g, _ := got.(map[string]any)
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s: expected %s, got (absent)", k, text(e[k]))
			}
			if !same(e[k], w) {
				return fmt.Sprintf("%s: expected %s, got %s", k, text(e[k]), text(w))
			}
		}
		return ""
	}
	if !same(expect, got) {
		return fmt.Sprintf("the answer: expected %s, got %s", text(expect), text(got))
	}
	return ""
}

type sequence struct {
	path    string
	spec    map[string]any
	helper  *sql.Conn
	dbs     [2]*sql.DB
	conns   [2]*sql.Conn
	ledgers [2]*idempotency.Ledger
	saved   map[string]string
	now     int64
}

func num(v any) int64 {
	n, _ := v.(json.Number).Int64()
	return n
}

func (s *sequence) setClock(ms int64) error {
	s.now = ms
	_, err := s.helper.ExecContext(ctx, "SELECT testclock_set(?)", ms)
	return err
}

func (s *sequence) ledger(i int) (*idempotency.Ledger, error) {
	if s.ledgers[i] != nil {
		return s.ledgers[i], nil
	}
	db, err := sql.Open("sqlite3", "file:"+s.path+"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=0")
	if err != nil {
		return nil, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.dbs[i], s.conns[i] = db, c
	if i == 0 {
		opts := map[string]int64{}
		if m, ok := s.spec["ledger"].(map[string]any); ok {
			for k, v := range m {
				opts[k] = num(v)
			}
		}
		s.ledgers[0], err = idempotency.Open(ctx, c, "ledger", opts)
	} else {
		s.ledgers[i] = &idempotency.Ledger{Q: c, Name: "ledger"}
	}
	return s.ledgers[i], err
}

func (s *sequence) close() {
	for i := range s.conns {
		if s.conns[i] != nil {
			s.conns[i].Close()
			s.dbs[i].Close()
		}
	}
}

type failed struct{ why string }

func (f failed) Error() string { return f.why }

func (s *sequence) token(step map[string]any) (string, error) {
	if name, ok := step["token"].(string); ok {
		t, ok := s.saved[name]
		if !ok {
			return "", failed{fmt.Sprintf("cannot run the step: no earlier claim saved a token as %q", name)}
		}
		return t, nil
	}
	if t, ok := step["token_text"].(string); ok {
		return t, nil
	}
	return "", failed{"cannot run the step: the step names no token"}
}

func str(step map[string]any, k string) string {
	v, _ := step[k].(string)
	return v
}

// run is the step's answer (a JSON value), or the error of the step.
func (s *sequence) run(step map[string]any) (any, error) {
	conn := 0
	if c, ok := step["conn"]; ok {
		conn = int(num(c))
	}
	l, err := s.ledger(conn)
	if err != nil {
		return nil, err
	}
	switch op := str(step, "step"); op {
	case "clock":
		if v, ok := step["set"]; ok {
			return nil, s.setClock(num(v))
		}
		return nil, s.setClock(s.now + num(step["advance"]))
	case "claim":
		o := &idempotency.ClaimOptions{Effect: str(step, "effect"), OperationID: str(step, "operation_id"), AllowedBy: str(step, "allowed_by")}
		if t, ok := step["targets"].([]any); ok {
			o.Targets = []string{}
			for _, x := range t {
				o.Targets = append(o.Targets, x.(string))
			}
		}
		if w, ok := step["target_window_seconds"]; ok {
			n := num(w)
			o.TargetWindowSeconds = &n
		}
		d, err := l.Claim(ctx, str(step, "tenant"), str(step, "conversation"), str(step, "tool"), step["args"], o)
		if err != nil {
			return nil, err
		}
		if as, ok := step["as"].(string); ok && d.Token != "" {
			s.saved[as] = d.Token
		}
		return d.Raw, nil
	case "settle", "renew":
		t, err := s.token(step)
		if err != nil {
			return nil, err
		}
		if op == "settle" {
			return l.Settle(ctx, t, str(step, "status"), step["detail"])
		}
		var secs *int64
		if v, ok := step["seconds"]; ok {
			n := num(v)
			secs = &n
		}
		until, err := l.Renew(ctx, t, secs)
		return map[string]any{"lease_until": until}, err
	case "resolve":
		return l.Resolve(ctx, str(step, "tenant"), str(step, "key"), str(step, "status"), step["detail"])
	case "purge":
		var n int64
		err := s.conns[conn].QueryRowContext(ctx, "SELECT idem_purge('ledger', ?)", num(step["older_than"])).Scan(&n)
		return map[string]any{"purged": n}, err
	case "row":
		r, err := l.Row(ctx, str(step, "tenant"), str(step, "key"))
		if r == nil || err != nil {
			return nil, err
		}
		return r, nil
	case "sql":
		var binds []any
		if b, ok := step["bind"].([]any); ok {
			for _, x := range b {
				if m, ok := x.(map[string]any); ok {
					binds = append(binds, s.saved[m["token"].(string)])
				} else if n, ok := x.(json.Number); ok {
					if i, err := n.Int64(); err == nil {
						binds = append(binds, i)
					} else {
						f, _ := n.Float64()
						binds = append(binds, f)
					}
				} else {
					binds = append(binds, x)
				}
			}
		}
		rows, err := s.conns[conn].QueryContext(ctx, str(step, "sql"), binds...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		out := []any{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[i] = string(b)
				}
			}
			out = append(out, vals)
		}
		return map[string]any{"rows": out}, rows.Err()
	default:
		return nil, failed{fmt.Sprintf("cannot run the step: unknown step %q", op)}
	}
}

// check: "" when the step's answer is the expected one, else why.
func check(step map[string]any, s *sequence) string {
	got, err := s.run(step)
	if f, ok := err.(failed); ok {
		return f.why
	}
	if err != nil {
		want, ok := step["error"]
		if !ok {
			return fmt.Sprintf("expected an answer, got the error %q", err.Error())
		}
		parts, isList := want.([]any)
		if !isList {
			parts = []any{want}
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p.(string)) {
				return fmt.Sprintf("expected an error containing %s, got %q", text(p), err.Error())
			}
		}
		return ""
	}
	if e, ok := step["error"]; ok {
		return fmt.Sprintf("expected the error %s, got the answer %s", text(e), text(got))
	}
	got = norm(got)
	why := ""
	if e, ok := step["expect"]; ok {
		why = compare(e, got)
	}
	if a, ok := step["absent"].([]any); ok && why == "" {
		g, _ := got.(map[string]any)
		for _, n := range a {
			if v, ok := g[n.(string)]; ok {
				why = fmt.Sprintf("%s: expected it absent, got %s", n, text(v))
				break
			}
		}
	}
	return why
}

func readJSON(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(into)
}

func runSequence(helper *sql.Conn, name string, spec map[string]any, path string) bool {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
	s := &sequence{path: path, spec: spec, helper: helper, saved: map[string]string{}}
	defer s.close()
	steps, _ := spec["steps"].([]any)
	fail := func(i int, op, why string) bool {
		fmt.Printf("FAIL %s:%s: step %d (%s): %s\n", prefix, name, i, op, why)
		return false
	}
	if err := s.setClock(num(spec["clock"])); err != nil {
		return fail(0, "clock", err.Error())
	}
	l, err := s.ledger(0)
	if err != nil {
		return fail(0, "open", err.Error())
	}
	_ = l
	if setup, ok := spec["setup"].([]any); ok {
		for _, q := range setup {
			if _, err := s.conns[0].ExecContext(ctx, q.(string)); err != nil {
				return fail(0, "setup", err.Error())
			}
		}
	}
	for i, st := range steps {
		step := st.(map[string]any)
		if why := check(step, s); why != "" {
			return fail(i+1, str(step, "step"), why)
		}
	}
	fmt.Printf("PASS %s:%s (%d steps)\n", prefix, name, len(steps))
	return true
}

func runKeys(db *sql.DB, name string, spec map[string]any) bool {
	var fails []string
	type vec struct {
		where string
		i     int
		v     map[string]any
	}
	var vectors []vec
	if f, ok := spec["vectors_file"].(string); ok {
		where := filepath.Join(filepath.Dir(name), f)
		var list []any
		if err := readJSON(where, &list); err != nil {
			fails = append(fails, err.Error())
		}
		for i, v := range list {
			vectors = append(vectors, vec{where, i + 1, v.(map[string]any)})
		}
	}
	if list, ok := spec["vectors"].([]any); ok {
		for i, v := range list {
			vectors = append(vectors, vec{`"vectors"`, i + 1, v.(map[string]any)})
		}
	}
	arg := func(v any) any {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return i
			}
			f, _ := n.Float64()
			return f
		}
		return v
	}
	for _, x := range vectors {
		var can, key string
		err := db.QueryRowContext(ctx, "SELECT idem_canonical(?4), idem_key(?1, ?2, ?3, ?4)",
			arg(x.v["tenant"]), arg(x.v["conversation"]), arg(x.v["tool"]), arg(x.v["args"])).Scan(&can, &key)
		switch {
		case err != nil:
			fails = append(fails, fmt.Sprintf("vector %d of %s: refused: %v", x.i, x.where, err))
		case can != x.v["canonical"]:
			fails = append(fails, fmt.Sprintf("vector %d of %s: canonical: expected %v, got %s", x.i, x.where, x.v["canonical"], can))
		case key != x.v["key"]:
			fails = append(fails, fmt.Sprintf("vector %d of %s: key: expected %v, got %s", x.i, x.where, x.v["key"], key))
		}
	}
	refusals, _ := spec["refusals"].([]any)
	for _, r := range refusals {
		m := r.(map[string]any)
		var key string
		err := db.QueryRowContext(ctx, "SELECT idem_key(?, ?, ?, ?)", arg(m["tenant"]), arg(m["conversation"]), arg(m["tool"]), arg(m["args"])).Scan(&key)
		if err == nil {
			fails = append(fails, fmt.Sprintf("refusal %v: expected the error %q, got the key %s", m["name"], m["error"], key))
		} else if !strings.Contains(err.Error(), m["error"].(string)) {
			fails = append(fails, fmt.Sprintf("refusal %v: expected an error containing %q, got %q", m["name"], m["error"], err.Error()))
		}
	}
	for _, f := range fails {
		fmt.Printf("FAIL %s:%s: %s\n", prefix, name, f)
	}
	if len(fails) == 0 {
		fmt.Printf("PASS %s:%s (%d vectors, %d refusals)\n", prefix, name, len(vectors), len(refusals))
	}
	return len(fails) == 0
}

func main() {
	var clock, dir string
	var files []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		if (args[i] == "--clock" || args[i] == "--dir") && i+1 < len(args) {
			if args[i] == "--clock" {
				clock = args[i+1]
			} else {
				dir = args[i+1]
			}
			i++
		} else {
			files = append(files, args[i])
		}
	}
	if clock == "" || dir == "" || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "usage: conformance --clock CLOCK --dir DIR FILE...")
		os.Exit(2)
	}
	if err := idempotency.Auto(); err != nil {
		fmt.Println("FAIL", prefix+":auto:", err)
		os.Exit(1)
	}
	abs, _ := filepath.Abs(clock)
	entry := "sqlite3_" + strings.TrimSuffix(filepath.Base(abs), ".so") + "_init"
	sql.Register("sqlite3_clock", &sqlite3.SQLiteDriver{Extensions: []string{}, ConnectHook: func(c *sqlite3.SQLiteConn) error {
		return c.LoadExtension(abs, entry) // the clock VFS is the default from here on
	}})
	hdb, err := sql.Open("sqlite3_clock", ":memory:")
	if err == nil {
		hdb.SetMaxOpenConns(1)
	}
	var helper *sql.Conn
	if err == nil {
		helper, err = hdb.Conn(ctx)
	}
	if err != nil {
		fmt.Println("FAIL", prefix+":clock:", err)
		os.Exit(1)
	}
	kdb, _ := sql.Open("sqlite3", ":memory:")
	ok := true
	for n, name := range files {
		var spec map[string]any
		if err := readJSON(name, &spec); err != nil {
			fmt.Printf("FAIL %s:%s: cannot read the file: %v\n", prefix, name, err)
			ok = false
			continue
		}
		switch spec["kind"] {
		case "sequence":
			ok = runSequence(helper, name, spec, filepath.Join(dir, fmt.Sprintf("conformance-go-%d.db", n+1))) && ok
		case "keys":
			ok = runKeys(kdb, name, spec) && ok
		default:
			fmt.Printf("FAIL %s:%s: \"kind\" is neither \"sequence\" nor \"keys\"\n", prefix, name)
			ok = false
		}
	}
	if !ok {
		os.Exit(1)
	}
}
