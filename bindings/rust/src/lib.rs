//! sqlite-idempotency for Rust: the extension's C sources compiled into the
//! crate (build.rs, the `cc` crate) and registered with
//! `sqlite3_auto_extension` ([`auto`]), so every connection the program
//! opens afterwards through the system SQLite (rusqlite without its
//! `bundled` feature) has the `idem_*` functions and the `idempotency`
//! module; and a small typed claim API on rusqlite ([`Ledger`]) with the
//! decisions and the words of the Python, Node and Go packages.
//!
//! ```no_run
//! use serde_json::json;
//! sqlite_idempotency::auto().unwrap();
//! let conn = rusqlite::Connection::open("agent.db").unwrap();
//! let ledger = sqlite_idempotency::Ledger::open(&conn, "ledger", &[]).unwrap();
//! let out = ledger.call(&conn, "user-42", "chat-7", "send_email", &json!({"to": "ann@example.com"}), None,
//!     |a| Ok(json!({"queued": 1, "key": a.headers[0].1.clone()}))).unwrap();
//! assert!(!out.idempotent);
//! ```
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::Once;

extern "C" {
    fn sqlite3_idempotency_init(db: *mut rusqlite::ffi::sqlite3, err: *mut *mut c_char, api: *const std::ffi::c_void) -> c_int;
}

static AUTO: Once = Once::new();
static AUTO_RC: AtomicI32 = AtomicI32::new(0);

/// Registers the extension with `sqlite3_auto_extension`: every connection
/// the process opens afterwards has it. Call it once before opening the
/// database (further calls return the first call's answer).
pub fn auto() -> Result<(), Error> {
    // SAFETY: the entry point has the signature sqlite3_auto_extension
    // calls it with (db, pzErrMsg, pApi); SQLite's own API casts it so too.
    AUTO.call_once(|| unsafe {
        let entry: unsafe extern "C" fn() = std::mem::transmute(sqlite3_idempotency_init as *const ());
        AUTO_RC.store(rusqlite::ffi::sqlite3_auto_extension(Some(entry)), Ordering::SeqCst);
    });
    match AUTO_RC.load(Ordering::SeqCst) {
        rusqlite::ffi::SQLITE_OK => Ok(()),
        rc => Err(Error::Usage(format!("sqlite-idempotency: sqlite3_auto_extension failed with code {}", rc))),
    }
}

/// What goes wrong: the database's error (its message is the ledger's), a
/// value the API refuses, or a call the ledger did not run ([`Refusal`]).
#[derive(Debug)]
pub enum Error {
    Sqlite(rusqlite::Error),
    Usage(String),
    Refused(Refusal),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // the message SQLite reports, as the other packages give it
            Error::Sqlite(rusqlite::Error::SqliteFailure(_, Some(m))) => f.write_str(m),
            Error::Sqlite(e) => write!(f, "{}", e),
            Error::Usage(m) => f.write_str(m),
            Error::Refused(r) => f.write_str(&r.text),
        }
    }
}

impl std::error::Error for Error {}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Sqlite(e)
    }
}

/// A call [`Ledger::call`] did not run: `decision` is in_progress, unknown
/// (an earlier identical call, or this one: the action failed after it may
/// have sent), mismatch, conflict or not_sent; `text` is what the model
/// reads (the other packages' words).
#[derive(Debug, Clone)]
pub struct Refusal {
    pub decision: String,
    pub key: Option<String>,
    pub text: String,
    pub answer: Value,
}

/// Options of a claim (idem_claim's optional arguments).
#[derive(Debug, Default, Clone)]
pub struct ClaimOptions {
    /// "external" (the default) or "local"
    pub effect: Option<String>,
    /// the caller's own key, instead of the derived one
    pub operation_id: Option<String>,
    /// what the call's write touches (docs/ledger.md, "Targets")
    pub targets: Option<Vec<String>>,
    pub target_window_seconds: Option<i64>,
    /// who allows a deliberate second write to a held target
    pub allowed_by: Option<String>,
}

/// One ledger (a virtual table of the idempotency module); its methods run
/// on the connection given, so a claim and a guarded write share a
/// transaction.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub name: String,
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// JSON text as a value, however deeply nested (the ledger stores what it
/// accepts, deeper than serde_json's default limit of 128).
pub fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

fn parse(text: &str) -> Result<Value, Error> {
    parse_json(text).map_err(|e| Error::Usage(format!("sqlite-idempotency: the ledger answered {:?}, not JSON: {}", text, e)))
}

impl Ledger {
    /// Makes the ledger `name` if it is not there (CREATE VIRTUAL TABLE IF NOT
    /// EXISTS name USING idempotency(options)), with options (lease_seconds,
    /// ...) applied only when it is made. Calls [`auto`] first; a connection
    /// opened before that has no extension. Open the database with WAL,
    /// synchronous FULL and a busy timeout, as the other packages do.
    pub fn open(conn: &Connection, name: &str, options: &[(&str, i64)]) -> Result<Ledger, Error> {
        auto()?;
        let mut parts = Vec::new();
        for (k, v) in options {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return Err(Error::Usage(format!("Ledger::open: option name {:?} is not a word of a-z and _", k)));
            }
            parts.push(format!("{}={}", k, v));
        }
        let mut sql = format!("CREATE VIRTUAL TABLE IF NOT EXISTS {} USING idempotency", quote(name));
        if !parts.is_empty() {
            sql += &format!("({})", parts.join(", "));
        }
        conn.execute_batch(&sql)?;
        Ok(Ledger { name: name.to_string() })
    }

    /// Decides who executes the call (idem_claim); its answer as JSON.
    pub fn claim(&self, conn: &Connection, tenant: &str, conversation: &str, tool: &str, args: &Value, o: Option<&ClaimOptions>) -> Result<Value, Error> {
        let d = ClaimOptions::default();
        let o = o.unwrap_or(&d);
        let mut options = Map::new();
        if let Some(t) = &o.targets {
            options.insert("targets".into(), json!(t));
        }
        if let Some(w) = o.target_window_seconds {
            options.insert("target_window_seconds".into(), json!(w));
        }
        if let Some(a) = &o.allowed_by {
            options.insert("allowed_by".into(), json!(a));
        }
        let options = if options.is_empty() { None } else { Some(Value::Object(options).to_string()) };
        let effect = o.effect.clone().unwrap_or_else(|| "external".into());
        let text: String = conn.query_row(
            "SELECT idem_claim(?, ?, ?, ?, ?, ?, ?, ?)",
            params![self.name, tenant, conversation, tool, args.to_string(), effect, o.operation_id, options],
            |r| r.get(0),
        )?;
        parse(&text)
    }

    /// Records the outcome of an admitted claim (idem_settle); detail None is SQL NULL.
    pub fn settle(&self, conn: &Connection, token: &str, status: &str, detail: Option<&Value>) -> Result<Value, Error> {
        let text: String = conn.query_row("SELECT idem_settle(?, ?, ?, ?)", params![self.name, token, status, detail.map(|d| d.to_string())], |r| r.get(0))?;
        parse(&text)
    }

    /// Settles an unknown call (idem_resolve), by its tenant and key.
    pub fn resolve(&self, conn: &Connection, tenant: &str, key: &str, status: &str, detail: Option<&Value>) -> Result<Value, Error> {
        let text: String = conn.query_row("SELECT idem_resolve(?, ?, ?, ?, ?)", params![self.name, tenant, key, status, detail.map(|d| d.to_string())], |r| r.get(0))?;
        parse(&text)
    }

    /// Extends a claim's lease (idem_renew), by seconds or by its own lease; the new lease_until.
    pub fn renew(&self, conn: &Connection, token: &str, seconds: Option<i64>) -> Result<i64, Error> {
        Ok(match seconds {
            None => conn.query_row("SELECT idem_renew(?, ?)", params![self.name, token], |r| r.get(0))?,
            Some(s) => conn.query_row("SELECT idem_renew(?, ?, ?)", params![self.name, token, s], |r| r.get(0))?,
        })
    }

    /// The ledger's row for tenant and key (the effective status; args,
    /// result, error and members as JSON values), or None.
    pub fn row(&self, conn: &Connection, tenant: &str, key: &str) -> Result<Option<Value>, Error> {
        let mut stmt = conn.prepare(&format!("SELECT * FROM {} WHERE tenant = ? AND key = ?", quote(&self.name)))?;
        let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
        let row = stmt
            .query_row(params![tenant, key], |r| {
                let mut m = Map::new();
                for (i, n) in names.iter().enumerate() {
                    m.insert(n.clone(), value_of(r.get_ref(i)?));
                }
                Ok(m)
            })
            .optional()?;
        let mut m = match row {
            Some(m) => m,
            None => return Ok(None),
        };
        for c in ["args", "result", "error", "members"] {
            if let Some(Value::String(s)) = m.get(c) {
                let v = parse(s)?;
                m.insert(c.into(), v);
            }
        }
        Ok(Some(Value::Object(m)))
    }

    /// Runs one external tool call at most once: claims (committed before the
    /// action runs; call it in autocommit), runs `action` for an admitted
    /// claim and settles what it returns (Ok: succeeded; Err(ToolFailed):
    /// failed; Err(NotSent): released; Err(Unknown): unknown, never run again
    /// here), and replays a settled call. A call it does not run is
    /// `Error::Refused`.
    pub fn call<F>(&self, conn: &Connection, tenant: &str, conversation: &str, tool: &str, args: &Value, o: Option<&ClaimOptions>, action: F) -> Result<Outcome, Error>
    where
        F: FnOnce(&Attempt) -> Result<Value, ActionError>,
    {
        let d = self.claim(conn, tenant, conversation, tool, args, o)?;
        let key = d["key"].as_str().map(str::to_string);
        let targets = o.and_then(|o| o.targets.clone()).map(|t| json!(t)).unwrap_or(Value::Null);
        let mut fields = json!({"tool": tool, "key": key, "attempt": d["attempt"], "targets": targets});
        let refuse = |decision: &str, text: String| Err(Error::Refused(Refusal { decision: decision.into(), key: key.clone(), text, answer: d.clone() }));
        match d["decision"].as_str().unwrap_or("") {
            "admitted" => {
                let token = d["token"].as_str().unwrap_or("").to_string();
                let a = Attempt { key: key.clone().unwrap_or_default(), token: token.clone(), attempt: d["attempt"].as_i64().unwrap_or(0), headers: vec![("Idempotency-Key".into(), format!("\"{}\"", key.clone().unwrap_or_default()))] };
                match action(&a) {
                    Ok(result) => {
                        self.settle(conn, &token, "succeeded", Some(&result))?;
                        Ok(Outcome { key: a.key, status: "succeeded".into(), attempt: a.attempt, result, error: Value::Null, idempotent: false, text: None })
                    }
                    Err(ActionError::ToolFailed(detail)) => {
                        self.settle(conn, &token, "failed", Some(&detail))?;
                        Ok(Outcome { key: a.key, status: "failed".into(), attempt: a.attempt, result: Value::Null, error: detail, idempotent: false, text: Some(say("failed", &fields)) })
                    }
                    Err(ActionError::NotSent(reason)) => {
                        self.settle(conn, &token, "released", Some(&json!({"sent": false, "reason": reason})))?;
                        refuse("not_sent", say("not_sent", &json!({"tool": tool, "reason": reason})))
                    }
                    Err(ActionError::Unknown(reason)) => {
                        let _ = self.settle(conn, &token, "unknown", Some(&json!({"reason": reason})));
                        fields["reason"] = json!(reason);
                        refuse("unknown", say("outcome_unknown", &fields))
                    }
                }
            }
            "replay" => {
                fields["at"] = d["settled_at"].clone();
                let status = d["status"].as_str().unwrap_or("").to_string();
                let text = say(if status == "failed" { "failed_replay" } else { "replay" }, &fields);
                Ok(Outcome { key: key.unwrap_or_default(), status, attempt: d["attempt"].as_i64().unwrap_or(0), result: d["result"].clone(), error: d["error"].clone(), idempotent: true, text: Some(text) })
            }
            "in_progress" => {
                fields["renewed_at"] = d["renewed_at"].clone();
                refuse("in_progress", say("in_progress", &fields))
            }
            "unknown" => refuse("unknown", say("unknown", &fields)),
            "mismatch" => {
                fields["differs"] = d["differs"].clone();
                refuse("mismatch", say("mismatch", &fields))
            }
            "conflict" => refuse("conflict", say_conflict(tool, &d)),
            other => Err(Error::Usage(format!("sqlite-idempotency: idem_claim returned an unexpected decision {:?}", other))),
        }
    }
}

/// A SQLite value as JSON (a blob as its bytes' text, lossy).
pub fn value_of(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef::*;
    match v {
        Null => Value::Null,
        Integer(i) => json!(i),
        Real(f) => json!(f),
        Text(t) | Blob(t) => json!(String::from_utf8_lossy(t)),
    }
}

/// The admitted call an action runs: its key (send it as the
/// Idempotency-Key header: `headers`), token and attempt number.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub key: String,
    pub token: String,
    pub attempt: i64,
    pub headers: Vec<(String, String)>,
}

/// What an action returns when it did not succeed.
#[derive(Debug, Clone)]
pub enum ActionError {
    /// the target refused the call (a known failure): settled failed with this detail
    ToolFailed(Value),
    /// nothing reached the target: the claim is released, the next arrival runs the call
    NotSent(String),
    /// it may have reached the target (a timeout, a lost connection): settled unknown
    Unknown(String),
}

/// A call that ran (`idempotent` false) or was replayed (true); `text` is
/// what the model reads on a replay or a failure (None for a first success).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub key: String,
    pub status: String,
    pub attempt: i64,
    pub result: Value,
    pub error: Value,
    pub idempotent: bool,
    pub text: Option<String>,
}

// --- the words (bindings/node/words.json, the one table) ---------------------------

/// words.json, the Node package's, read at build time.
pub const WORDS_JSON: &str = include_str!("../../node/words.json");

fn words() -> &'static Value {
    static ONCE: Once = Once::new();
    static WORDS: AtomicPtr<Value> = AtomicPtr::new(std::ptr::null_mut());
    ONCE.call_once(|| {
        let v: Value = serde_json::from_str(WORDS_JSON).expect("sqlite-idempotency: words.json");
        WORDS.store(Box::into_raw(Box::new(v)), Ordering::SeqCst);
    });
    // SAFETY: set once above, never freed
    unsafe { &*WORDS.load(Ordering::SeqCst) }
}

fn given(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        _ => true,
    }
}

fn millis(name: &str, v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).unwrap_or_else(|| panic!("sqlite-idempotency: say: {} must be milliseconds since the epoch, got {}", name, v))
}

fn iso8601(ms: i64) -> String {
    // days since the epoch to a civil date (Howard Hinnant's algorithm)
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, sod / 3600, sod % 3600 / 60, sod % 60, milli)
}

fn format_value(name: &str, v: &Value, now: i64) -> String {
    match words()["formats"][name].as_str() {
        Some("iso8601") => return iso8601(millis(name, v)),
        Some("seconds_ago") => return ((now - millis(name, v)) / 1000).max(0).to_string(),
        Some("list") => {
            if let Value::Array(a) = v {
                return a.iter().map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string())).collect::<Vec<_>>().join(", ");
            }
        }
        _ => {}
    }
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn fill(kind: &str, template: &str, fields: &Value, now: i64, optional: Option<&Map<String, Value>>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let len = match rest[open + 1..].find('}') {
            Some(len) => len,
            None => break,
        };
        let name = &rest[open + 1..open + 1 + len];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            out.push_str(&rest[..open + 1]);
            rest = &rest[open + 1..];
            continue;
        }
        out.push_str(&rest[..open]);
        rest = &rest[open + len + 2..];
        if let Some(c) = words()["constants"][name].as_str() {
            out.push_str(c);
        } else if let Some(frag) = optional.and_then(|o| o.get(name)).and_then(Value::as_str) {
            if given(fields.get(name)) {
                out.push_str(&fill(kind, frag, fields, now, None));
            }
        } else if given(fields.get(name)) {
            out.push_str(&format_value(name, &fields[name], now));
        } else {
            panic!("sqlite-idempotency: say: the {} text needs the field {}", kind, name);
        }
    }
    out.push_str(rest);
    out
}

/// The text of `kind` (a kind of words.json) for `fields` (a JSON object),
/// as `say()` of the other packages writes it; `fields["now"]` (Unix ms)
/// sets the clock of "seconds ago".
pub fn say(kind: &str, fields: &Value) -> String {
    let k = &words()["kinds"][kind];
    let text = k["text"].as_str().unwrap_or_else(|| panic!("sqlite-idempotency: say: unknown kind {:?}", kind));
    let now = if given(fields.get("now")) {
        millis("now", &fields["now"])
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    };
    fill(kind, text, fields, now, k["optional"].as_object())
}

/// What the model reads on a conflict (idem_claim's answer): the words of
/// its holder's status, then, when the holder succeeded, its result as JSON
/// on the next line.
pub fn say_conflict(tool: &str, answer: &Value) -> String {
    let held = &answer["held_by"];
    let kind = match held["status"].as_str() {
        Some("succeeded") => "conflict_succeeded",
        Some("unknown") => "conflict_unknown",
        _ => "conflict_claimed",
    };
    let mut text = say(kind, &json!({"tool": tool, "key": answer["key"], "target": answer["target"], "held_tool": held["tool"], "held_key": held["key"], "at": held["updated_at"]}));
    if kind == "conflict_succeeded" {
        text.push('\n');
        text.push_str(&held["result"].to_string());
    }
    text
}
