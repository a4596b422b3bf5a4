//! The Rust runner of tests/conformance/ (its README.md is the format),
//! through the crate (bindings/rust) on rusqlite:
//!
//!     conformance --clock build/testclock.so --dir DIR FILE...
//!
//! Every step goes through the crate as a user calls it: Ledger::open (WAL,
//! synchronous=FULL; busy_timeout 0 here), claim with the arguments as JSON
//! values, settle, resolve, renew, row. What the crate does not offer
//! (idem_purge, key derivation, plain SQL such as a guard or a guarded
//! insert) runs as SQL on the same connection.
//!
//! CLOCK is the test clock (tests/c/testclock.c), loaded before any database
//! is opened (its VFS is then the default). Prints PASS conformance.rust:FILE
//! per file, or FAIL conformance.rust:FILE: step N (OP): FIELD: expected E,
//! got G at the first step that differs; exit 1 on a failure. Values compare
//! as serde_json reads them: an integer is not a float (1.0 is not 1),
//! member order aside.
use rusqlite::{params_from_iter, types::Value as Sql, Connection};
use serde_json::{json, Value};
use sqlite_idempotency::{parse_json, value_of, ClaimOptions, Error, Ledger};
use std::collections::HashMap;

const PREFIX: &str = "conformance.rust";

fn text(v: &Value) -> String {
    v.to_string()
}

// an integer is not a float, as the C and Python runners compare
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.is_f64() == y.is_f64() && x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).map_or(false, |w| same(v, w))),
        _ => a == b,
    }
}

fn compare(expect: &Value, got: &Value) -> Option<String> {
    if let Value::Object(e) = expect {
        for (k, v) in e {
            match got.get(k) {
                None => return Some(format!("{}: expected {}, got (absent)", k, text(v))),
                Some(w) if !same(v, w) => return Some(format!("{}: expected {}, got {}", k, text(v), text(w))),
                _ => {}
            }
        }
        return None;
    }
    if same(expect, got) {
        None
    } else {
        Some(format!("the answer: expected {}, got {}", text(expect), text(got)))
    }
}

enum Outcome {
    Answer(Value),
    Failed(String), // the step cannot run
    Error(String),  // the step's own error
}

struct Sequence<'a> {
    path: String,
    spec: &'a Value,
    helper: &'a Connection,
    conns: [Option<Connection>; 2],
    ledger: Ledger,
    saved: HashMap<String, String>,
    now: i64,
}

fn sql_of(v: &Value) -> Sql {
    match v {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(*b as i64),
        Value::Number(n) => n.as_i64().map(Sql::Integer).unwrap_or_else(|| Sql::Real(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => Sql::Text(s.clone()),
        other => Sql::Text(other.to_string()),
    }
}

impl<'a> Sequence<'a> {
    fn set_clock(&mut self, ms: i64) -> Result<(), String> {
        self.now = ms;
        self.helper.query_row("SELECT testclock_set(?)", [ms], |_| Ok(())).map_err(|e| e.to_string())
    }

    fn conn(&mut self, i: usize) -> Result<&Connection, String> {
        if self.conns[i].is_none() {
            let c = Connection::open(&self.path).map_err(|e| e.to_string())?;
            c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=0;").map_err(|e| e.to_string())?;
            if i == 0 {
                let mut opts: Vec<(String, i64)> = Vec::new();
                if let Some(Value::Object(m)) = self.spec.get("ledger") {
                    for (k, v) in m {
                        opts.push((k.clone(), v.as_i64().unwrap_or(0)));
                    }
                }
                let refs: Vec<(&str, i64)> = opts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                Ledger::open(&c, "ledger", &refs).map_err(|e| e.to_string())?;
            }
            self.conns[i] = Some(c);
        }
        Ok(self.conns[i].as_ref().unwrap())
    }

    fn token(&self, step: &Value) -> Result<String, Outcome> {
        if let Some(name) = step["token"].as_str() {
            return self.saved.get(name).cloned().ok_or_else(|| Outcome::Failed(format!("cannot run the step: no earlier claim saved a token as {:?}", name)));
        }
        if let Some(t) = step["token_text"].as_str() {
            return Ok(t.to_string());
        }
        Err(Outcome::Failed("cannot run the step: the step names no token".into()))
    }

    fn run(&mut self, step: &Value) -> Outcome {
        let i = step["conn"].as_u64().unwrap_or(0) as usize;
        if let Err(e) = self.conn(i) {
            return Outcome::Error(e);
        }
        let ledger = self.ledger.clone();
        let s = |k: &str| step[k].as_str().unwrap_or("").to_string();
        let res: Result<Value, Error> = match step["step"].as_str().unwrap_or("") {
            "clock" => {
                let ms = step.get("set").and_then(Value::as_i64).unwrap_or_else(|| self.now + step["advance"].as_i64().unwrap_or(0));
                return match self.set_clock(ms) {
                    Ok(()) => Outcome::Answer(Value::Null),
                    Err(e) => Outcome::Error(e),
                };
            }
            "claim" => {
                let o = ClaimOptions {
                    effect: step["effect"].as_str().map(str::to_string),
                    operation_id: step["operation_id"].as_str().map(str::to_string),
                    targets: step["targets"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()),
                    target_window_seconds: step["target_window_seconds"].as_i64(),
                    allowed_by: step["allowed_by"].as_str().map(str::to_string),
                };
                let r = ledger.claim(self.conns[i].as_ref().unwrap(), &s("tenant"), &s("conversation"), &s("tool"), &step["args"], Some(&o));
                if let (Ok(d), Some(as_name)) = (&r, step["as"].as_str()) {
                    if let Some(t) = d["token"].as_str() {
                        self.saved.insert(as_name.to_string(), t.to_string());
                    }
                }
                r
            }
            "settle" => match self.token(step) {
                Ok(t) => ledger.settle(self.conns[i].as_ref().unwrap(), &t, &s("status"), step.get("detail")),
                Err(o) => return o,
            },
            "renew" => match self.token(step) {
                Ok(t) => ledger.renew(self.conns[i].as_ref().unwrap(), &t, step["seconds"].as_i64()).map(|u| json!({"lease_until": u})),
                Err(o) => return o,
            },
            "resolve" => ledger.resolve(self.conns[i].as_ref().unwrap(), &s("tenant"), &s("key"), &s("status"), step.get("detail")),
            "purge" => self.conns[i]
                .as_ref()
                .unwrap()
                .query_row("SELECT idem_purge('ledger', ?)", [step["older_than"].as_i64().unwrap_or(0)], |r| r.get::<_, i64>(0))
                .map(|n| json!({"purged": n}))
                .map_err(Error::from),
            "row" => ledger.row(self.conns[i].as_ref().unwrap(), &s("tenant"), &s("key")).map(|r| r.unwrap_or(Value::Null)),
            "sql" => {
                let binds: Vec<Sql> = step["bind"]
                    .as_array()
                    .map(|a| a.iter().map(|b| if let Some(n) = b["token"].as_str() { Sql::Text(self.saved.get(n).cloned().unwrap_or_default()) } else { sql_of(b) }).collect())
                    .unwrap_or_default();
                let c = self.conns[i].as_ref().unwrap();
                (|| -> Result<Value, rusqlite::Error> {
                    let mut st = c.prepare(&s("sql"))?;
                    let n = st.column_count();
                    let mut rows = st.query(params_from_iter(binds.iter()))?;
                    let mut out = Vec::new();
                    while let Some(r) = rows.next()? {
                        out.push(Value::Array((0..n).map(|j| r.get_ref(j).map(value_of)).collect::<Result<_, _>>()?));
                    }
                    Ok(json!({ "rows": out }))
                })()
                .map_err(Error::from)
            }
            other => return Outcome::Failed(format!("cannot run the step: unknown step {:?}", other)),
        };
        match res {
            Ok(v) => Outcome::Answer(v),
            Err(e) => Outcome::Error(e.to_string()),
        }
    }
}

fn check(step: &Value, seq: &mut Sequence) -> Option<String> {
    match seq.run(step) {
        Outcome::Failed(why) => Some(why),
        Outcome::Error(e) => {
            let want = step.get("error")?;
            let parts = match want {
                Value::Array(a) => a.clone(),
                one => vec![one.clone()],
            };
            for p in parts {
                if !e.contains(p.as_str().unwrap_or("")) {
                    return Some(format!("expected an error containing {}, got {:?}", text(&p), e));
                }
            }
            None
        }
        Outcome::Answer(got) => {
            if let Some(e) = step.get("error") {
                return Some(format!("expected the error {}, got the answer {}", text(e), text(&got)));
            }
            let mut why = step.get("expect").and_then(|e| compare(e, &got));
            if why.is_none() {
                for n in step["absent"].as_array().cloned().unwrap_or_default() {
                    if let Some(v) = got.get(n.as_str().unwrap_or("")) {
                        why = Some(format!("{}: expected it absent, got {}", n.as_str().unwrap_or(""), text(v)));
                        break;
                    }
                }
            }
            why
        }
    }
}

fn run_sequence(helper: &Connection, name: &str, spec: &Value, path: String) -> bool {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{}", path, suffix));
    }
    let mut seq = Sequence { path, spec, helper, conns: [None, None], ledger: Ledger { name: "ledger".into() }, saved: HashMap::new(), now: 0 };
    let fail = |i: usize, op: &str, why: &str| {
        println!("FAIL {}:{}: step {} ({}): {}", PREFIX, name, i, op, why);
        false
    };
    if let Err(e) = seq.set_clock(spec["clock"].as_i64().unwrap_or(0)) {
        return fail(0, "clock", &e);
    }
    if let Err(e) = seq.conn(0) {
        return fail(0, "open", &e);
    }
    for q in spec["setup"].as_array().cloned().unwrap_or_default() {
        if let Err(e) = seq.conns[0].as_ref().unwrap().execute_batch(q.as_str().unwrap_or("")) {
            return fail(0, "setup", &e.to_string());
        }
    }
    let steps = spec["steps"].as_array().cloned().unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        if let Some(why) = check(step, &mut seq) {
            return fail(i + 1, step["step"].as_str().unwrap_or(""), &why);
        }
    }
    println!("PASS {}:{} ({} steps)", PREFIX, name, steps.len());
    true
}

fn run_keys(conn: &Connection, name: &str, spec: &Value) -> bool {
    let mut fails = Vec::new();
    let mut vectors: Vec<(String, usize, Value)> = Vec::new();
    if let Some(f) = spec["vectors_file"].as_str() {
        let where_ = std::path::Path::new(name).parent().unwrap_or(std::path::Path::new(".")).join(f);
        match std::fs::read_to_string(&where_).map_err(|e| e.to_string()).and_then(|t| parse_json(&t).map_err(|e| e.to_string())) {
            Ok(Value::Array(list)) => vectors.extend(list.into_iter().enumerate().map(|(i, v)| (where_.display().to_string(), i + 1, v))),
            Ok(_) => fails.push(format!("{} is not a list", where_.display())),
            Err(e) => fails.push(e),
        }
    }
    for (i, v) in spec["vectors"].as_array().cloned().unwrap_or_default().into_iter().enumerate() {
        vectors.push(("\"vectors\"".into(), i + 1, v));
    }
    let key_of = |v: &Value| -> Result<(String, String), rusqlite::Error> {
        conn.query_row("SELECT idem_canonical(?4), idem_key(?1, ?2, ?3, ?4)", [sql_of(&v["tenant"]), sql_of(&v["conversation"]), sql_of(&v["tool"]), sql_of(&v["args"])], |r| Ok((r.get(0)?, r.get(1)?)))
    };
    for (where_, i, v) in &vectors {
        match key_of(v) {
            Err(e) => fails.push(format!("vector {} of {}: refused: {}", i, where_, Error::from(e))),
            Ok((can, _)) if Some(can.as_str()) != v["canonical"].as_str() => fails.push(format!("vector {} of {}: canonical: expected {}, got {}", i, where_, v["canonical"], can)),
            Ok((_, key)) if Some(key.as_str()) != v["key"].as_str() => fails.push(format!("vector {} of {}: key: expected {}, got {}", i, where_, v["key"], key)),
            _ => {}
        }
    }
    let refusals = spec["refusals"].as_array().cloned().unwrap_or_default();
    for r in &refusals {
        let got = conn.query_row("SELECT idem_key(?, ?, ?, ?)", [sql_of(&r["tenant"]), sql_of(&r["conversation"]), sql_of(&r["tool"]), sql_of(&r["args"])], |row| row.get::<_, String>(0));
        let want = r["error"].as_str().unwrap_or("");
        match got {
            Ok(key) => fails.push(format!("refusal {}: expected the error {:?}, got the key {}", r["name"], want, key)),
            Err(e) => {
                let m = Error::from(e).to_string();
                if !m.contains(want) {
                    fails.push(format!("refusal {}: expected an error containing {:?}, got {:?}", r["name"], want, m));
                }
            }
        }
    }
    for f in &fails {
        println!("FAIL {}:{}: {}", PREFIX, name, f);
    }
    if fails.is_empty() {
        println!("PASS {}:{} ({} vectors, {} refusals)", PREFIX, name, vectors.len(), refusals.len());
    }
    fails.is_empty()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut clock, mut dir, mut files) = (None, None, Vec::new());
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--clock" if i + 1 < args.len() => {
                clock = Some(args[i + 1].clone());
                i += 1;
            }
            "--dir" if i + 1 < args.len() => {
                dir = Some(args[i + 1].clone());
                i += 1;
            }
            f => files.push(f.to_string()),
        }
        i += 1;
    }
    let (clock, dir) = match (clock, dir) {
        (Some(c), Some(d)) if !files.is_empty() => (c, d),
        _ => {
            eprintln!("usage: conformance --clock CLOCK --dir DIR FILE...");
            std::process::exit(2);
        }
    };
    if let Err(e) = sqlite_idempotency::auto() {
        println!("FAIL {}:auto: {}", PREFIX, e);
        std::process::exit(1);
    }
    let helper = Connection::open_in_memory().unwrap();
    let abs = std::fs::canonicalize(&clock).unwrap_or_else(|_| clock.clone().into());
    // SAFETY: the test clock is this project's own extension
    let loaded = unsafe { helper.load_extension_enable().and_then(|_| helper.load_extension(&abs, None)) };
    if let Err(e) = loaded {
        println!("FAIL {}:clock: {}", PREFIX, e);
        std::process::exit(1);
    }
    let keys = Connection::open_in_memory().unwrap();
    let mut ok = true;
    for (n, name) in files.iter().enumerate() {
        let spec: Value = match std::fs::read_to_string(name).map_err(|e| e.to_string()).and_then(|t| parse_json(&t).map_err(|e| e.to_string())) {
            Ok(v) => v,
            Err(e) => {
                println!("FAIL {}:{}: cannot read the file: {}", PREFIX, name, e);
                ok = false;
                continue;
            }
        };
        ok &= match spec["kind"].as_str() {
            Some("sequence") => run_sequence(&helper, name, &spec, format!("{}/conformance-rust-{}.db", dir, n + 1)),
            Some("keys") => run_keys(&keys, name, &spec),
            _ => {
                println!("FAIL {}:{}: \"kind\" is neither \"sequence\" nor \"keys\"", PREFIX, name);
                false
            }
        };
    }
    std::process::exit(if ok { 0 } else { 1 });
}
