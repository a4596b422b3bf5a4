// basic: the ledger's operations through the cluster, each claim inside a
// transaction, the way an application on dqlite uses it.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

func runBasic(cluster string) error {
	db, err := openDB(cluster)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var version string
	err = db.QueryRowContext(ctx, "SELECT idem_version()").Scan(&version)
	check("leader_has_extension", err == nil && version != "", "idem_version() on the leader: %v", err)

	// The ledger, a guarded table and its guard. DDL goes through the
	// exec path (replicated); idem_guard writes, so it runs in a transaction.
	for _, q := range []string{
		"CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300)",
		"CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			fail("setup", "%s: %v", q, err)
			return nil
		}
	}
	g, ok, err := inTx(db, "SELECT json_object('guard', idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token'))")
	check("guard_installed", ok && err == nil, "idem_guard: %v %v", g, err)

	// Claim an external call inside a transaction: admitted, not yet
	// committed as the function returns, committed by COMMIT.
	args := []interface{}{"ledger", "tenant-a", "conv-1", "send_email", `{"to":"a@b.c"}`, "external", "op-mail-1"}
	d, ok, err := inTx(db, claimSQL, args...)
	check("claim_admitted", ok && d.str("decision") == "admitted" && d["committed"] == false && len(d.str("token")) == 32,
		"want admitted with committed false inside BEGIN, and COMMIT ok; got %v, commit %v, %v", d, ok, err)
	token := d.str("token")
	checkDurable("claim_durable", d)

	var stored string
	err = db.QueryRowContext(ctx, "SELECT token FROM ledger WHERE tenant = 'tenant-a' AND key = 'op-mail-1'").Scan(&stored)
	check("claim_row_has_token", err == nil && stored == token, "ledger row token %q, claim token %q, %v", stored, token, err)

	d2, _, err := inTx(db, claimSQL, args...)
	check("second_arrival_in_progress", err == nil && d2.str("decision") == "in_progress", "got %v %v", d2, err)

	s, ok, err := inTx(db, settleSQL, "ledger", token, "succeeded", `{"message_id":"m-17"}`)
	check("settle", ok && s.str("status") == "succeeded", "got %v, commit %v, %v", s, ok, err)
	checkDurable("settle_durable", s)

	r, _, err := inTx(db, claimSQL, args...)
	res, _ := json.Marshal(r["result"])
	check("replay", err == nil && r.str("decision") == "replay" && r["idempotent"] == true && string(res) == `{"message_id":"m-17"}`,
		"got %v %v", r, err)

	// A guarded local write: claim, the row and the settle in one
	// transaction; the replay names the row as a member.
	localArgs := []interface{}{"ledger", "tenant-a", "conv-1", "create_order", `{"item":"a"}`, "local", "op-order-1"}
	if err := localWrite(ctx, db, localArgs); err != nil {
		fail("guarded_local_write", "%v", err)
	} else {
		pass("guarded_local_write")
	}
	r, _, err = inTx(db, claimSQL, localArgs...)
	members, _ := json.Marshal(r["members"])
	check("guarded_local_replay", err == nil && r.str("decision") == "replay" && string(members) == `[{"rowid":1,"table":"orders"}]`,
		"want a replay whose members are the one order row; got %v %v", r, err)

	_, err = db.ExecContext(ctx, "INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('tenant-a', 'op-x', NULL, 'b')")
	want := `idem_guard: insert into "orders" refused: key "op-x" needs a live claim of ledger ledger; there is no claim for it`
	check("guard_refuses_unclaimed_insert", err != nil && err.Error() == want, "want %q, got %v", want, err)

	var n int
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
	check("guarded_rows", err == nil && n == 1, "orders has %d rows (%v), want 1", n, err)

	// The SQL-native claim in autocommit goes through the exec path, which
	// dqlite replicates; require_transaction does not apply to it.
	_, err = db.ExecContext(ctx, `INSERT INTO ledger(tenant, conversation, tool, args, effect, key)
	  VALUES ('tenant-a', 'conv-1', 'migrate', '{"step":3}', 'local', 'op-insert-1')`)
	check("insert_claim_autocommit", err == nil, "INSERT INTO ledger through Exec: %v", err)
	var status string
	err = db.QueryRowContext(ctx, "SELECT status FROM ledger WHERE tenant = 'tenant-a' AND key = 'op-insert-1'").Scan(&status)
	check("insert_claim_landed", err == nil && status == "claimed", "status %q (%v), want claimed", status, err)
	_, err = db.ExecContext(ctx, `INSERT INTO ledger(tenant, conversation, tool, args, effect, key)
	  VALUES ('tenant-a', 'conv-1', 'migrate', '{"step":3}', 'local', 'op-insert-1')`)
	check("insert_taken_key_refused", err != nil && strings.HasPrefix(err.Error(), `idempotency: key "op-insert-1" of tenant "tenant-a" in ledger ledger is taken`),
		"a second INSERT of the key: %v", err)

	runRequireTransaction(ctx, db, cluster)
	return nil
}

// localWrite claims a local call, writes its row and settles, in one
// transaction.
func localWrite(ctx context.Context, db *sql.DB, args []interface{}) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var text string
	if err := tx.QueryRowContext(ctx, claimSQL, args...).Scan(&text); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	var d decision
	json.Unmarshal([]byte(text), &d)
	if d.str("decision") != "admitted" {
		return fmt.Errorf("claim: %s", text)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (?, ?, ?, 'a')",
		args[1], d.str("key"), d.str("token")); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := tx.QueryRowContext(ctx, settleSQL, "ledger", d.str("token"), "succeeded", `{"order":1}`).Scan(&text); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return tx.Commit()
}

// checkDurable: under dqlite a claim or a settle made inside a transaction
// is durable through the Raft quorum, whatever the leader's synchronous=OFF
// says.
func checkDurable(name string, d decision) {
	check(name, d["durable"] == true && d.str("durability") == "raft-quorum",
		`want "durable":true,"durability":"raft-quorum"; got %v`, d)
}

const requireTxMessage = `idem_claim: ledger "ledger" requires a transaction (require_transaction=1): ` +
	`a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; ` +
	`open a transaction, claim, and commit before acting`

// runRequireTransaction: under dqlite a ledger created without options
// refuses a claim made outside a transaction. The autocommit query path
// (db.QueryRow outside a transaction) is the one dqlite does not
// replicate: refused, nothing written, the leader still serving. libdqlite
// 1.11 reports an error raised during a query as code 1 with the result
// column's name; the exec path carries the extension's message.
func runRequireTransaction(ctx context.Context, db *sql.DB, cluster string) {
	var v int
	err := db.QueryRowContext(ctx, "SELECT v FROM ledger_meta WHERE k = 'require_transaction'").Scan(&v)
	check("created_with_require_transaction_1", err == nil && v == 1,
		"a ledger created under dqlite without the option has require_transaction = %d in its meta (%v), want 1", v, err)
	_, err = db.ExecContext(ctx, "CREATE VIRTUAL TABLE ledger_rt0 USING idempotency(require_transaction=0)")
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT v FROM ledger_rt0_meta WHERE k = 'require_transaction'").Scan(&v)
	}
	check("explicit_require_transaction_0_kept", err == nil && v == 0,
		"CREATE ... USING idempotency(require_transaction=0) under dqlite stored %d (%v), want 0", v, err)

	args := []interface{}{"ledger", "tenant-a", "conv-1", "send_email", `{"to":"q@b.c"}`, "external", "op-autocommit-1"}
	var text string
	err = db.QueryRowContext(ctx, claimSQL, args...).Scan(&text)
	mangled := "code 1: idem_claim(?, ?, ?, ?, ?, ?, ?)"
	check("autocommit_query_refused", err != nil && (errText(err) == mangled || err.Error() == requireTxMessage),
		"want the refusal (or, through libdqlite 1.11's query path, %q); got %q, answer %q", mangled, errText(err), text)

	_, err = db.ExecContext(ctx, claimSQL, args...)
	check("autocommit_exec_refused_message", err != nil && err.Error() == requireTxMessage,
		"want %q, got %v", requireTxMessage, err)

	var n int
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM ledger WHERE key = 'op-autocommit-1'").Scan(&n)
	check("autocommit_refusal_wrote_nothing", err == nil && n == 0, "%d rows for the refused key (%v)", n, err)

	before, _ := leaderAddress(cluster)
	d, ok, err := inTx(db, claimSQL, args...)
	after, _ := leaderAddress(cluster)
	check("same_claim_in_transaction_admitted", ok && d.str("decision") == "admitted",
		"got %v, commit %v, %v", d, ok, err)
	check("leader_survives_refusal", before != "" && before == after,
		"leader before %q, after %q: the refused autocommit claim must not bring the leader down", before, after)
}
