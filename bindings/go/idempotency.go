// Package idempotency is sqlite-idempotency for Go: the extension's C
// sources compiled in with cgo and registered with sqlite3_auto_extension,
// so that every connection a program opens afterwards through the system
// SQLite (mattn/go-sqlite3 as Debian builds it, or built with the
// libsqlite3 tag) has the idem_* functions and the idempotency module; and
// a small typed claim API over database/sql: Claim, Settle, Resolve, Renew,
// Row and Call, with the decisions and the words of the Python and Node
// packages (docs/ledger.md, docs/integrations.md).
//
//	idempotency.Auto()
//	db, _ := sql.Open("sqlite3", "file:agent.db?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000")
//	ledger, _ := idempotency.Open(ctx, db, "ledger", nil)
//	out, err := ledger.Call(ctx, "user-42", "chat-7", "send_email", args,
//	    func(ctx context.Context, a idempotency.Attempt) (any, error) {
//	        return send(ctx, args, a.Headers) // Idempotency-Key: the call's key
//	    })
package idempotency

/*
#cgo CFLAGS: -DSQLITE_CORE -O2 -I${SRCDIR}/../../include -I${SRCDIR}/../../ext
#cgo LDFLAGS: -lsqlite3 -lm
#include <sqlite3.h>
#include "idempotency.h"

static int idem_go_auto(void) {
  return sqlite3_auto_extension((void (*)(void))sqlite3_idempotency_init);
}
static const char *idem_go_version(void) { return sqlite3_libversion(); }
*/
import "C"

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

var (
	autoOnce sync.Once
	autoErr  error
)

// Auto registers the extension with sqlite3_auto_extension: every
// connection the process opens afterwards has it. Call it once before
// opening the database (further calls return the first call's answer).
func Auto() error {
	autoOnce.Do(func() {
		if rc := C.idem_go_auto(); rc != C.SQLITE_OK {
			autoErr = fmt.Errorf("sqlite-idempotency: sqlite3_auto_extension failed with code %d", int(rc))
		}
	})
	return autoErr
}

// SQLiteVersion is the version of the SQLite library the package is linked
// with (the one the extension registers in).
func SQLiteVersion() string { return C.GoString(C.idem_go_version()) }

// Querier is what the ledger runs its statements on: a *sql.DB, a
// *sql.Conn or a *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Ledger is one ledger (a virtual table of the idempotency module) on a
// database.
type Ledger struct {
	Q    Querier
	Name string
}

var optionName = regexp.MustCompile(`^[a-z_]+$`)

// Open makes the ledger name on q if it is not there (CREATE VIRTUAL TABLE
// IF NOT EXISTS name USING idempotency(options)), with options (lease_seconds,
// retention_seconds, ...: docs/reference.md) applied only when it is made.
// Open the database with journal_mode WAL, synchronous FULL and a
// busy_timeout, as the other packages do (mattn's DSN:
// _journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000).
func Open(ctx context.Context, q Querier, name string, options map[string]int64) (*Ledger, error) {
	if err := Auto(); err != nil {
		return nil, err
	}
	if name == "" {
		name = "ledger"
	}
	parts := make([]string, 0, len(options))
	for _, k := range sortedKeys(options) {
		if !optionName.MatchString(k) {
			return nil, fmt.Errorf("idempotency.Open: option name %q is not a word of a-z and _", k)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", k, options[k]))
	}
	stmt := "CREATE VIRTUAL TABLE IF NOT EXISTS " + quote(name) + " USING idempotency"
	if len(parts) > 0 {
		stmt += "(" + strings.Join(parts, ", ") + ")"
	}
	if _, err := q.ExecContext(ctx, stmt); err != nil {
		return nil, err
	}
	return &Ledger{Q: q, Name: name}, nil
}

// On is the same ledger on another Querier (a *sql.Conn, a *sql.Tx).
func (l *Ledger) On(q Querier) *Ledger { return &Ledger{Q: q, Name: l.Name} }

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Decision is idem_claim's answer (docs/ledger.md): Decision is admitted,
// replay, in_progress, unknown, mismatch or conflict; Raw is the whole
// object as the ledger wrote it.
type Decision struct {
	Decision string          `json:"decision"`
	Key      string          `json:"key"`
	Token    string          `json:"token"`
	Attempt  int64           `json:"attempt"`
	Status   string          `json:"status"`
	Result   json.RawMessage `json:"result"`
	Error    json.RawMessage `json:"error"`
	Raw      map[string]any  `json:"-"`
}

// ClaimOptions are idem_claim's optional arguments.
type ClaimOptions struct {
	Effect              string   // "external" (the default) or "local"
	OperationID         string   // the caller's own key, instead of the derived one
	Targets             []string // what the call's write touches (docs/ledger.md, "Targets")
	TargetWindowSeconds *int64
	AllowedBy           string // who allows a deliberate second write to a held target
}

// jsonText is v as JSON text: a json.RawMessage as it is, anything else
// through encoding/json (the ledger canonicalizes it).
func jsonText(v any, what string) (string, error) {
	if r, ok := v.(json.RawMessage); ok {
		return string(r), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("sqlite-idempotency: %s cannot be written as JSON: %w", what, err)
	}
	return string(b), nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// decode reads an answer of the ledger (a JSON object), its numbers kept as
// json.Number.
func decode(text string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("sqlite-idempotency: the ledger answered %q, not a JSON object: %w", text, err)
	}
	return m, nil
}

// Claim decides who executes the call (idem_claim).
func (l *Ledger) Claim(ctx context.Context, tenant, conversation, tool string, args any, o *ClaimOptions) (*Decision, error) {
	text, err := jsonText(args, "args")
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = &ClaimOptions{}
	}
	effect := o.Effect
	if effect == "" {
		effect = "external"
	}
	var options any
	if o.Targets != nil || o.TargetWindowSeconds != nil || o.AllowedBy != "" {
		m := map[string]any{}
		if o.Targets != nil {
			m["targets"] = o.Targets
		}
		if o.TargetWindowSeconds != nil {
			m["target_window_seconds"] = *o.TargetWindowSeconds
		}
		if o.AllowedBy != "" {
			m["allowed_by"] = o.AllowedBy
		}
		b, _ := json.Marshal(m)
		options = string(b)
	}
	var answer string
	err = l.Q.QueryRowContext(ctx, "SELECT idem_claim(?, ?, ?, ?, ?, ?, ?, ?)", l.Name, tenant, conversation, tool, text, effect,
		nullable(o.OperationID), options).Scan(&answer)
	if err != nil {
		return nil, err
	}
	d := &Decision{}
	if err := json.Unmarshal([]byte(answer), d); err != nil {
		return nil, fmt.Errorf("sqlite-idempotency: idem_claim answered %q: %w", answer, err)
	}
	if d.Raw, err = decode(answer); err != nil {
		return nil, err
	}
	return d, nil
}

// Settle records the outcome of an admitted claim (idem_settle): status
// succeeded, failed, released or unknown; detail its result or error (nil:
// none).
func (l *Ledger) Settle(ctx context.Context, token, status string, detail any) (map[string]any, error) {
	return l.answer(ctx, "SELECT idem_settle(?, ?, ?, ?)", token, status, detail)
}

// Resolve settles an unknown call (idem_resolve), by its tenant and key.
func (l *Ledger) Resolve(ctx context.Context, tenant, key, status string, detail any) (map[string]any, error) {
	return l.answer(ctx, "SELECT idem_resolve(?, ?, ?, ?, ?)", tenant, key, status, detail)
}

func (l *Ledger) answer(ctx context.Context, query string, args ...any) (map[string]any, error) {
	last := len(args) - 1
	if args[last] != nil {
		text, err := jsonText(args[last], "detail")
		if err != nil {
			return nil, err
		}
		args[last] = text
	}
	var text string
	if err := l.Q.QueryRowContext(ctx, query, append([]any{l.Name}, args...)...).Scan(&text); err != nil {
		return nil, err
	}
	return decode(text)
}

// Renew extends a claim's lease (idem_renew): by seconds, or by the claim's
// own lease when seconds is nil. Returns the new lease_until (Unix ms).
func (l *Ledger) Renew(ctx context.Context, token string, seconds *int64) (int64, error) {
	var until int64
	var err error
	if seconds == nil {
		err = l.Q.QueryRowContext(ctx, "SELECT idem_renew(?, ?)", l.Name, token).Scan(&until)
	} else {
		err = l.Q.QueryRowContext(ctx, "SELECT idem_renew(?, ?, ?)", l.Name, token, *seconds).Scan(&until)
	}
	return until, err
}

// Row is the ledger's row for tenant and key (the effective status; args,
// result, error and members as JSON values), or nil.
func (l *Ledger) Row(ctx context.Context, tenant, key string) (map[string]any, error) {
	rows, err := l.Q.QueryContext(ctx, "SELECT * FROM "+quote(l.Name)+" WHERE tenant = ? AND key = ?", tenant, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for i, c := range cols {
		v := vals[i]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		if s, ok := v.(string); ok && (c == "args" || c == "result" || c == "error" || c == "members") {
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			var j any
			if err := dec.Decode(&j); err != nil {
				return nil, fmt.Errorf("sqlite-idempotency: the %s column holds %q, not JSON: %w", c, s, err)
			}
			v = j
		}
		out[c] = v
	}
	return out, rows.Err()
}

// Attempt is the admitted call an action runs: its key (send it as
// Headers["Idempotency-Key"]), token and attempt number.
type Attempt struct {
	Key     string
	Token   string
	Attempt int64
	Headers map[string]string
	ledger  *Ledger
}

// Renew extends the attempt's lease by its own lease (a long action renews
// before it sends).
func (a Attempt) Renew(ctx context.Context) (int64, error) { return a.ledger.Renew(ctx, a.Token, nil) }

// Outcome is what Call returns for a call that ran (Idempotent false) or
// was replayed (Idempotent true): its status (succeeded or failed), result
// or error, and Text, the words the model reads on a replay or a failure
// (empty for a first success).
type Outcome struct {
	Key        string
	Status     string
	Attempt    int64
	Result     json.RawMessage
	Error      json.RawMessage
	Idempotent bool
	Text       string
}

// ToolFailed is what an action returns when the target refused the call
// (a known failure): Call settles it failed with Detail.
type ToolFailed struct{ Detail any }

func (e *ToolFailed) Error() string { return fmt.Sprintf("the tool failed: %v", e.Detail) }

// NotSent is what an action returns when it knows nothing reached the
// target: Call releases the claim (the next arrival runs the call).
type NotSent struct{ Reason string }

func (e *NotSent) Error() string { return "not sent: " + e.Reason }

// Refusal is Call's error for a call it did not run: Decision is
// in_progress, unknown (an earlier identical call, or this one: the action
// failed after it may have sent), mismatch, conflict or not_sent; Text is
// the words the model reads (the same as the other packages').
type Refusal struct {
	Decision string
	Key      string
	Text     string
	Answer   map[string]any
}

func (e *Refusal) Error() string { return e.Text }

// ErrRefused matches every *Refusal with errors.Is.
var ErrRefused = errors.New("sqlite-idempotency: refused")

func (e *Refusal) Is(target error) bool { return target == ErrRefused }

// Call runs one external tool call at most once: it claims (committed
// before the action starts), runs action for an admitted claim and settles
// what it returns (a result: succeeded; *ToolFailed: failed; *NotSent:
// released; any other error: unknown, never retried here), and replays a
// settled call. A call it does not run is a *Refusal.
func (l *Ledger) Call(ctx context.Context, tenant, conversation, tool string, args any,
	action func(ctx context.Context, a Attempt) (any, error), o *ClaimOptions) (*Outcome, error) {
	d, err := l.Claim(ctx, tenant, conversation, tool, args, o)
	if err != nil {
		return nil, err
	}
	var targets []string
	if o != nil {
		targets = o.Targets
	}
	fields := map[string]any{"tool": tool, "key": d.Key, "attempt": d.Raw["attempt"], "targets": targets}
	switch d.Decision {
	case "admitted":
		a := Attempt{Key: d.Key, Token: d.Token, Attempt: d.Attempt, Headers: map[string]string{"Idempotency-Key": `"` + d.Key + `"`}, ledger: l}
		result, aerr := action(ctx, a)
		var failed *ToolFailed
		var notSent *NotSent
		switch {
		case aerr == nil:
			if _, err := l.Settle(ctx, d.Token, "succeeded", jsonOrNull(result)); err != nil {
				return nil, err
			}
			text, _ := jsonText(jsonOrNull(result), "result")
			return &Outcome{Key: d.Key, Status: "succeeded", Attempt: d.Attempt, Result: json.RawMessage(text)}, nil
		case errors.As(aerr, &failed):
			if _, err := l.Settle(ctx, d.Token, "failed", jsonOrNull(failed.Detail)); err != nil {
				return nil, err
			}
			text, _ := jsonText(jsonOrNull(failed.Detail), "error")
			return &Outcome{Key: d.Key, Status: "failed", Attempt: d.Attempt, Error: json.RawMessage(text), Text: Say("failed", fields)}, nil
		case errors.As(aerr, &notSent):
			if _, err := l.Settle(ctx, d.Token, "released", map[string]any{"sent": false, "reason": notSent.Reason}); err != nil {
				return nil, err
			}
			return nil, &Refusal{Decision: "not_sent", Key: d.Key, Text: Say("not_sent", map[string]any{"tool": tool, "reason": notSent.Reason})}
		default:
			_, _ = l.Settle(ctx, d.Token, "unknown", map[string]any{"reason": aerr.Error()})
			fields["reason"] = aerr.Error()
			return nil, &Refusal{Decision: "unknown", Key: d.Key, Text: Say("outcome_unknown", fields)}
		}
	case "replay":
		fields["at"] = d.Raw["settled_at"]
		out := &Outcome{Key: d.Key, Status: d.Status, Attempt: d.Attempt, Result: d.Result, Error: d.Error, Idempotent: true}
		if d.Status == "failed" {
			out.Text = Say("failed_replay", fields)
		} else {
			out.Text = Say("replay", fields)
		}
		return out, nil
	case "in_progress":
		fields["renewed_at"] = d.Raw["renewed_at"]
		return nil, &Refusal{Decision: d.Decision, Key: d.Key, Text: Say("in_progress", fields), Answer: d.Raw}
	case "unknown":
		return nil, &Refusal{Decision: d.Decision, Key: d.Key, Text: Say("unknown", fields), Answer: d.Raw}
	case "mismatch":
		fields["differs"] = d.Raw["differs"]
		return nil, &Refusal{Decision: d.Decision, Key: d.Key, Text: Say("mismatch", fields), Answer: d.Raw}
	case "conflict":
		return nil, &Refusal{Decision: d.Decision, Key: d.Key, Text: SayConflict(tool, d.Raw), Answer: d.Raw}
	}
	return nil, fmt.Errorf("sqlite-idempotency: idem_claim returned an unexpected decision %q", d.Decision)
}

// jsonOrNull is v, or JSON null for a nil result (a result is stored as JSON).
func jsonOrNull(v any) any {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
