// The crate as a user calls it: a call and its replay with the replay's
// words, an unknown outcome never run again (its words name the target), a
// reworded call to the same target refused as a conflict, failed and not
// sent, in progress, a guarded write in one BEGIN IMMEDIATE transaction,
// refusals with their exact messages.
use rusqlite::{params, Connection, TransactionBehavior};
use serde_json::{json, Value};
use sqlite_idempotency::{say, ActionError, ClaimOptions, Error, Ledger};
use std::cell::Cell;

fn open(name: &str) -> (Connection, Ledger) {
    sqlite_idempotency::auto().unwrap();
    let dir = std::env::temp_dir().join(format!("idem-rust-{}-{}", std::process::id(), name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conn = Connection::open(dir.join("agent.db")).unwrap();
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=10000;").unwrap();
    let ledger = Ledger::open(&conn, "ledger", &[("lease_seconds", 60)]).unwrap();
    (conn, ledger)
}

fn refusal(e: Error) -> sqlite_idempotency::Refusal {
    match e {
        Error::Refused(r) => r,
        other => panic!("expected a refusal, got {}", other),
    }
}

#[test]
fn call_replays() {
    let (conn, l) = open("replay");
    let runs = Cell::new(0);
    let send = |a: &sqlite_idempotency::Attempt| {
        runs.set(runs.get() + 1);
        Ok(json!({"queued": runs.get(), "key": a.headers[0].1}))
    };
    let first = l.call(&conn, "user-42", "chat-7", "send_email", &json!({"to": "ann@example.com", "subject": "Report"}), None, send).unwrap();
    let second = l.call(&conn, "user-42", "chat-7", "send_email", &json!({"subject": "Report", "to": "ann@example.com"}), None, send).unwrap();
    let row = l.row(&conn, "user-42", &first.key).unwrap().unwrap();
    let want = say("replay", &json!({"tool": "send_email", "key": first.key, "attempt": 1, "at": row["updated_at"]}));
    assert_eq!(runs.get(), 1);
    assert!(!first.idempotent && second.idempotent);
    assert_eq!(second.result, first.result);
    assert_eq!(first.result["key"], json!(format!("\"{}\"", first.key)));
    assert_eq!(second.text.as_deref(), Some(want.as_str()));
    assert!(want.starts_with("send_email was not run again: this request is identical to a call that already ran at "));
}

#[test]
fn unknown_is_never_retried() {
    let (conn, l) = open("unknown");
    let runs = Cell::new(0);
    let timeout = |_: &sqlite_idempotency::Attempt| -> Result<Value, ActionError> {
        runs.set(runs.get() + 1);
        Err(ActionError::Unknown("read timeout".into()))
    };
    let o = ClaimOptions { targets: Some(vec!["mailto:bob@example.com/invoice-42".into()]), ..Default::default() };
    let r1 = refusal(l.call(&conn, "u", "c", "send_email", &json!({"to": "bob@example.com"}), Some(&o), timeout).unwrap_err());
    let r2 = refusal(l.call(&conn, "u", "c", "send_email", &json!({"to": "bob@example.com"}), Some(&o), timeout).unwrap_err());
    let key = r1.key.clone().unwrap();
    assert_eq!(runs.get(), 1);
    assert_eq!((r1.decision.as_str(), r2.decision.as_str()), ("unknown", "unknown"));
    assert_eq!(r1.text, format!("send_email did not finish (key {}: read timeout): that request may have reached the target system, the outcome is theirs to report, and nothing is retried here. Do not call send_email again for this or for mailto:bob@example.com/invoice-42, however its arguments are worded; tell the user it may or may not have happened and that it must be checked in the target system.", key));
    assert_eq!(r2.text, say("unknown", &json!({"tool": "send_email", "key": key, "attempt": 1, "targets": ["mailto:bob@example.com/invoice-42"]})));
    let r3 = refusal(l.call(&conn, "u", "c", "send_email", &json!({"to": "bob@example.com", "body": "again"}), Some(&o), timeout).unwrap_err());
    assert_eq!(runs.get(), 1);
    assert_eq!(r3.decision, "conflict");
    assert!(r3.text.starts_with(&format!("send_email was not run: a different call (send_email, key {}) already touched mailto:bob@example.com/invoice-42", key)), "{}", r3.text);
}

#[test]
fn failed_and_not_sent() {
    let (conn, l) = open("failed");
    let decline = |_: &sqlite_idempotency::Attempt| -> Result<Value, ActionError> { Err(ActionError::ToolFailed(json!({"code": "card_declined"}))) };
    let a = l.call(&conn, "u", "c", "charge", &json!({"amount": 5}), None, decline).unwrap();
    let b = l.call(&conn, "u", "c", "charge", &json!({"amount": 5}), None, decline).unwrap();
    assert_eq!((a.status.as_str(), b.status.as_str(), b.idempotent), ("failed", "failed", true));
    assert_eq!(a.error, json!({"code": "card_declined"}));
    assert_eq!(a.text.unwrap(), format!("charge failed (key {}). The failure is recorded: an identical call gives it again without running. Do not call charge again with these arguments. The failure:", a.key));
    let runs = Cell::new(0);
    let flaky = |_: &sqlite_idempotency::Attempt| {
        runs.set(runs.get() + 1);
        if runs.get() == 1 {
            Err(ActionError::NotSent("connection refused".into()))
        } else {
            Ok(json!("sent"))
        }
    };
    let r = refusal(l.call(&conn, "u", "c", "notify", &json!({"n": 1}), None, flaky).unwrap_err());
    let out = l.call(&conn, "u", "c", "notify", &json!({"n": 1}), None, flaky).unwrap();
    assert_eq!(r.decision, "not_sent");
    assert_eq!((out.idempotent, out.result.clone(), runs.get()), (false, json!("sent"), 2));
}

#[test]
fn in_progress() {
    let (conn, l) = open("progress");
    let held = l.claim(&conn, "u", "c", "send_email", &json!({"to": "x"}), None).unwrap();
    assert_eq!(held["decision"], "admitted");
    let r = refusal(l.call(&conn, "u", "c", "send_email", &json!({"to": "x"}), None, |_| panic!("the action ran")).unwrap_err());
    assert_eq!(r.decision, "in_progress");
    assert!(r.text.starts_with(&format!("send_email was not run: another caller holds an identical call (key {}, attempt 1) and renewed it ", held["key"].as_str().unwrap())), "{}", r.text);
    let token = held["token"].as_str().unwrap();
    l.settle(&conn, token, "succeeded", Some(&json!({"ok": true}))).unwrap();
    let e = l.settle(&conn, token, "failed", None).unwrap_err();
    assert!(e.to_string().contains("illegal transition succeeded -> failed"), "{}", e);
}

#[test]
fn guarded_write_in_one_transaction() {
    let (mut conn, l) = open("guarded");
    conn.execute_batch("CREATE TABLE orders(tenant, op_key, claim_token, item); SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');").unwrap();
    let mut write = || {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let d = l.claim(&tx, "u", "c", "place_order", &json!({"item": "book"}), Some(&ClaimOptions { effect: Some("local".into()), ..Default::default() })).unwrap();
        if d["decision"] == "admitted" {
            tx.execute("INSERT INTO orders VALUES (?, ?, ?, 'book')", params!["u", d["key"].as_str(), d["token"].as_str()]).unwrap();
            l.settle(&tx, d["token"].as_str().unwrap(), "succeeded", Some(&json!({"order": 1}))).unwrap();
        }
        tx.commit().unwrap();
        d
    };
    let (a, b) = (write(), write());
    let n: i64 = conn.query_row("SELECT count(*) FROM orders", [], |r| r.get(0)).unwrap();
    let e = conn.execute("INSERT INTO orders VALUES ('u', 'order-9', NULL, 'unclaimed')", []).unwrap_err();
    assert_eq!((a["decision"].as_str(), b["decision"].as_str(), n), (Some("admitted"), Some("replay"), 1));
    assert_eq!(b["members"], json!([{"table": "orders", "rowid": 1}]));
    assert_eq!(Error::from(e).to_string(), "idem_guard: insert into \"orders\" refused: key \"order-9\" needs a live claim of ledger ledger; there is no claim for it");
}

#[test]
fn refusals() {
    let (conn, l) = open("refusals");
    let e = l.claim(&conn, "", "c", "t", &json!({}), None).unwrap_err();
    assert!(e.to_string().contains("tenant"), "{}", e);
    let e2 = Ledger::open(&conn, "other", &[("Lease", 1)]).unwrap_err();
    assert_eq!(e2.to_string(), "Ledger::open: option name \"Lease\" is not a word of a-z and _");
}

#[test]
fn words_are_the_node_packages() {
    let node = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../node/words.json")).unwrap();
    assert_eq!(sqlite_idempotency::WORDS_JSON, node);
}
