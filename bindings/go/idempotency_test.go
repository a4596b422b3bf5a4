package idempotency_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	idempotency "github.com/sqlite-idempotency/sqlite-idempotency/bindings/go"
)

var ctx = context.Background()

func open(t *testing.T) (*sql.DB, *idempotency.Ledger) {
	t.Helper()
	if err := idempotency.Auto(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "agent.db")+"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := idempotency.Open(ctx, db, "ledger", map[string]int64{"lease_seconds": 60})
	if err != nil {
		t.Fatal(err)
	}
	return db, l
}

// The words are the Node package's, byte for byte.
func TestWordsAreTheNodePackages(t *testing.T) {
	a, err := os.ReadFile("words.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../node/words.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("bindings/go/words.json differs from bindings/node/words.json: copy it (cp bindings/node/words.json bindings/go/)")
	}
}

// Every C file of ext/ is compiled into the package, and nothing else.
func TestEveryExtensionSource(t *testing.T) {
	ext, _ := filepath.Glob("../../ext/*.c")
	mine, _ := filepath.Glob("ext_*.c")
	if len(ext) != len(mine) || len(ext) == 0 {
		t.Fatalf("ext/ has %d C files, bindings/go has %d ext_*.c", len(ext), len(mine))
	}
	for _, f := range ext {
		name := filepath.Base(f)
		b, err := os.ReadFile("ext_" + name)
		if err != nil || !strings.Contains(string(b), `#include "../../ext/`+name+`"`) {
			t.Fatalf("ext_%s does not include ../../ext/%s", name, name)
		}
	}
}

// A call runs once; the identical call replays it, with the replay's words.
func TestCallReplays(t *testing.T) {
	_, l := open(t)
	runs := 0
	send := func(ctx context.Context, a idempotency.Attempt) (any, error) {
		runs++
		return map[string]any{"queued": runs, "key": a.Headers["Idempotency-Key"]}, nil
	}
	args := map[string]any{"to": "ann@example.com", "subject": "Report"}
	first, err := l.Call(ctx, "user-42", "chat-7", "send_email", args, send, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Call(ctx, "user-42", "chat-7", "send_email", map[string]any{"subject": "Report", "to": "ann@example.com"}, send, nil)
	if err != nil {
		t.Fatal(err)
	}
	row, _ := l.Row(ctx, "user-42", first.Key)
	want := idempotency.Say("replay", map[string]any{"tool": "send_email", "key": first.Key, "attempt": 1, "at": row["updated_at"]})
	if runs != 1 || first.Idempotent || !second.Idempotent || string(second.Result) != string(first.Result) || second.Text != want ||
		!strings.HasPrefix(second.Text, "send_email was not run again: this request is identical to a call that already ran at ") ||
		!strings.Contains(string(first.Result), `"key":"\"`+first.Key+`\""`) {
		t.Fatalf("runs %d; first %+v; second %+v (text %q, want %q)", runs, first, second, second.Text, want)
	}
}

// An action that fails after it may have sent leaves the call unknown: the
// identical call is refused, never run again, with the unknown words.
func TestUnknownIsNeverRetried(t *testing.T) {
	_, l := open(t)
	runs := 0
	send := func(ctx context.Context, a idempotency.Attempt) (any, error) {
		runs++
		return nil, errors.New("read timeout")
	}
	o := &idempotency.ClaimOptions{Targets: []string{"mailto:bob@example.com/invoice-42"}}
	_, err1 := l.Call(ctx, "u", "c", "send_email", map[string]any{"to": "bob@example.com"}, send, o)
	_, err2 := l.Call(ctx, "u", "c", "send_email", map[string]any{"to": "bob@example.com"}, send, o)
	var r1, r2 *idempotency.Refusal
	if !errors.As(err1, &r1) || !errors.As(err2, &r2) || runs != 1 || r1.Decision != "unknown" || r2.Decision != "unknown" || !errors.Is(err2, idempotency.ErrRefused) {
		t.Fatalf("runs %d; %v; %v", runs, err1, err2)
	}
	want1 := "send_email did not finish (key " + r1.Key + ": read timeout): that request may have reached the target system, the outcome is theirs to report, and nothing is retried here. Do not call send_email again for this or for mailto:bob@example.com/invoice-42, however its arguments are worded; tell the user it may or may not have happened and that it must be checked in the target system."
	want2 := idempotency.Say("unknown", map[string]any{"tool": "send_email", "key": r1.Key, "attempt": 1, "targets": o.Targets})
	if r1.Error() != want1 || r2.Error() != want2 {
		t.Fatalf("read %q and %q; want %q and %q", r1.Error(), r2.Error(), want1, want2)
	}
	// a reworded call that names the same target is a conflict, and not run
	_, err3 := l.Call(ctx, "u", "c", "send_email", map[string]any{"to": "bob@example.com", "body": "again"}, send, o)
	var r3 *idempotency.Refusal
	if !errors.As(err3, &r3) || r3.Decision != "conflict" || runs != 1 ||
		!strings.HasPrefix(r3.Text, "send_email was not run: a different call (send_email, key "+r1.Key+") already touched mailto:bob@example.com/invoice-42") {
		t.Fatalf("runs %d; %v", runs, err3)
	}
}

// A known failure is recorded and replayed; a call known not sent runs again.
func TestFailedAndNotSent(t *testing.T) {
	_, l := open(t)
	decline := func(ctx context.Context, a idempotency.Attempt) (any, error) {
		return nil, &idempotency.ToolFailed{Detail: map[string]any{"code": "card_declined"}}
	}
	a, err := l.Call(ctx, "u", "c", "charge", map[string]any{"amount": 5}, decline, nil)
	b, err2 := l.Call(ctx, "u", "c", "charge", map[string]any{"amount": 5}, decline, nil)
	if err != nil || err2 != nil || a.Status != "failed" || string(a.Error) != `{"code":"card_declined"}` || !b.Idempotent || b.Status != "failed" ||
		a.Text != "charge failed (key "+a.Key+"). The failure is recorded: an identical call gives it again without running. Do not call charge again with these arguments. The failure:" {
		t.Fatalf("%+v %v / %+v %v", a, err, b, err2)
	}
	runs := 0
	refused := func(ctx context.Context, a idempotency.Attempt) (any, error) {
		runs++
		if runs == 1 {
			return nil, &idempotency.NotSent{Reason: "connection refused"}
		}
		return "sent", nil
	}
	_, err = l.Call(ctx, "u", "c", "notify", map[string]any{"n": 1}, refused, nil)
	out, err2 := l.Call(ctx, "u", "c", "notify", map[string]any{"n": 1}, refused, nil)
	var r *idempotency.Refusal
	if !errors.As(err, &r) || r.Decision != "not_sent" || err2 != nil || out.Idempotent || string(out.Result) != `"sent"` || runs != 2 {
		t.Fatalf("%v / %+v %v (runs %d)", err, out, err2, runs)
	}
}

// A call another caller holds is in progress: not run, with its words.
func TestInProgress(t *testing.T) {
	_, l := open(t)
	held, err := l.Claim(ctx, "u", "c", "send_email", map[string]any{"to": "x"}, nil)
	if err != nil || held.Decision != "admitted" {
		t.Fatal(held, err)
	}
	ran := false
	_, err = l.Call(ctx, "u", "c", "send_email", map[string]any{"to": "x"}, func(ctx context.Context, a idempotency.Attempt) (any, error) {
		ran = true
		return nil, nil
	}, nil)
	var r *idempotency.Refusal
	if !errors.As(err, &r) || r.Decision != "in_progress" || ran ||
		!strings.HasPrefix(r.Text, "send_email was not run: another caller holds an identical call (key "+held.Key+", attempt 1) and renewed it ") {
		t.Fatalf("ran %v; %v", ran, err)
	}
	if _, err := l.Settle(ctx, held.Token, "succeeded", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(ctx, held.Token, "failed", nil); err == nil || !strings.Contains(err.Error(), "illegal transition succeeded -> failed") {
		t.Fatalf("a second settle: %v", err)
	}
}

// A guarded local write and its claim in one BEGIN IMMEDIATE transaction.
func TestGuardedWriteInOneTransaction(t *testing.T) {
	db, l := open(t)
	for _, q := range []string{"CREATE TABLE orders(tenant, op_key, claim_token, item)", "SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token')"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn, _ := db.Conn(ctx)
	defer conn.Close()
	write := func() *idempotency.Decision {
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		d, err := l.On(conn).Claim(ctx, "u", "c", "place_order", map[string]any{"item": "book"}, &idempotency.ClaimOptions{Effect: "local"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Decision == "admitted" {
			if _, err := conn.ExecContext(ctx, "INSERT INTO orders VALUES (?, ?, ?, 'book')", "u", d.Key, d.Token); err != nil {
				t.Fatal(err)
			}
			if _, err := l.On(conn).Settle(ctx, d.Token, "succeeded", map[string]any{"order": 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := write(), write()
	var n int
	_ = db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
	_, err := db.ExecContext(ctx, "INSERT INTO orders VALUES ('u', 'order-9', NULL, 'unclaimed')")
	if a.Decision != "admitted" || b.Decision != "replay" || n != 1 || err == nil ||
		err.Error() != `idem_guard: insert into "orders" refused: key "order-9" needs a live claim of ledger ledger; there is no claim for it` {
		t.Fatalf("%s then %s; %d orders; an unclaimed insert: %v", a.Decision, b.Decision, n, err)
	}
}

// Bad input: a clear error naming the value, nothing written.
func TestRefusals(t *testing.T) {
	_, l := open(t)
	_, err := l.Claim(ctx, "", "c", "t", map[string]any{}, nil)
	_, err2 := idempotency.Open(ctx, l.Q, "other", map[string]int64{"Lease": 1})
	_, err3 := l.Claim(ctx, "u", "c", "t", map[string]any{"f": func() {}}, nil)
	if err == nil || !strings.Contains(err.Error(), "tenant") || err2 == nil || err2.Error() != `idempotency.Open: option name "Lease" is not a word of a-z and _` ||
		err3 == nil || !strings.HasPrefix(err3.Error(), "sqlite-idempotency: args cannot be written as JSON: json: unsupported type: func()") {
		t.Fatalf("%v / %v / %v", err, err2, err3)
	}
}
