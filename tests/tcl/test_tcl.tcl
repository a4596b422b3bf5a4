# The extension from Tcl's sqlite3 package (Debian: libsqlite3-tcl).
#
# Usage: tclsh test_tcl.tcl EXTENSION_PATH
#
# On a database file in a temporary directory: load the extension
# (db enable_load_extension 1, then SELECT load_extension(...)), create a
# ledger, claim (admitted, with a token), settle succeeded, claim again
# (replay, "idempotent": true, the recorded result), a NULL (an unset Tcl
# variable binds NULL) and a blank tenant refused as a Tcl error carrying
# the extension's exact message, with [db errorcode] 19 (SQLITE_CONSTRAINT)
# and nothing written, and the SQL-native claim (INSERT INTO ledger,
# idem_last_claim, a taken key refused). JSON fields are read with SQL's
# json_extract, so no Tcl JSON package is needed.
#
# Prints one line per check: PASS <name> / FAIL <name>: <why>, and one
# non-check line with the Tcl and SQLite versions.
package require sqlite3

set PREFIX bindings.tcl
set failures 0

proc report {ok name {why ""}} {
    global PREFIX failures
    if {$ok} {
        puts "PASS $PREFIX:$name"
    } else {
        incr failures
        puts "FAIL $PREFIX:$name: [string map {\n { }} $why]"
    }
}

# field JSON PATH: a member of a JSON text, via SQL json_extract.
proc field {json path} {
    return [db onecolumn {SELECT json_extract($json, $path)}]
}

# expect_error NAME SCRIPT MESSAGE: SCRIPT must fail with exactly MESSAGE
# and leave [db errorcode] at 19 (SQLITE_CONSTRAINT).
proc expect_error {name script message} {
    if {[catch {uplevel 1 $script} got]} {
        set code [db errorcode]
        if {$got ne $message} {
            report 0 $name "message \"$got\", want \"$message\""
        } elseif {($code & 0xff) != 19} {
            report 0 $name "errorcode $code, want 19 (SQLITE_CONSTRAINT)"
        } else {
            report 1 $name
        }
    } else {
        report 0 $name "no error; returned \"$got\""
    }
}

if {[llength $argv] != 1} {
    puts stderr "usage: tclsh test_tcl.tcl EXTENSION_PATH"
    exit 2
}
set ext [file normalize [lindex $argv 0]]
set tmp [file join [expr {[info exists env(TMPDIR)] ? $env(TMPDIR) : "/tmp"}] "idem-tcl-[pid]-[clock clicks]"]
file mkdir $tmp

proc run {ext path} {
    global PREFIX
    sqlite3 db $path
    puts "   $PREFIX: Tcl [info patchlevel], sqlite3 package [package present sqlite3] with SQLite [db onecolumn {SELECT sqlite_version()}] (the system libsqlite3)"
    if {[catch {
        db enable_load_extension 1
        db eval {SELECT load_extension($ext)}
        db enable_load_extension 0
        set version [db onecolumn {SELECT idem_version()}]
    } err]} {
        report 0 load $err
        return
    }
    report [expr {$version ne ""}] load "idem_version() = $version"
    db eval {PRAGMA journal_mode=WAL}
    db eval {PRAGMA synchronous=FULL}
    db timeout 10000
    db eval {CREATE VIRTUAL TABLE ledger USING idempotency}

    set tenant tenant-a
    set conv conv-1
    set tool send_email
    set args {{"to":"a@example.com","subject":"hi"}}
    set d [db onecolumn {SELECT idem_claim('ledger', $tenant, $conv, $tool, $args)}]
    set token [field $d {$.token}]
    set key [field $d {$.key}]
    report [expr {[field $d {$.decision}] eq "admitted" && [regexp {^[0-9a-f]{32}$} $token]
                  && [field $d {$.committed}] == 1 && [field $d {$.attempt}] == 1
                  && [regexp {^idem1-[0-9a-f]{32}$} $key]}] claim-admitted "got $d"

    set result {{"message_id":"m-17"}}
    set s [db onecolumn {SELECT idem_settle('ledger', $token, 'succeeded', $result)}]
    report [expr {[field $s {$.status}] eq "succeeded" && [field $s {$.key}] eq $key}] \
        settle-succeeded "got $s"

    set args2 {{"subject":"hi","to":"a@example.com"}}
    set r [db onecolumn {SELECT idem_claim('ledger', $tenant, $conv, $tool, $args2)}]
    report [expr {[field $r {$.decision}] eq "replay" && [field $r {$.idempotent}] == 1
                  && [field $r {$.key}] eq $key && [field $r {$.result}] eq $result
                  && [field $r {$.token}] eq ""}] claim-replay "got $r"

    set before [db onecolumn {SELECT count(*) FROM ledger}]
    unset -nocomplain nobody
    expect_error refused-null-tenant {
        db eval {SELECT idem_claim('ledger', $nobody, $conv, $tool, $args)}
    } "idem_claim: tenant is missing (NULL)"
    set blank ""
    expect_error refused-blank-tenant {
        db eval {SELECT idem_claim('ledger', $blank, $conv, $tool, $args)}
    } "idem_claim: tenant is empty"
    set space " "
    expect_error refused-space-tenant {
        db eval {SELECT idem_claim('ledger', $space, $conv, $tool, $args)}
    } {idem_claim: tenant " " has byte 0x20 at offset 0; only A-Z a-z 0-9 _ - are allowed}
    set after [db onecolumn {SELECT count(*) FROM ledger}]
    report [expr {$before == 1 && $after == 1}] refused-wrote-nothing "rows before $before, after $after"

    set margs {{"step":3}}
    db eval {INSERT INTO ledger(tenant, conversation, tool, args) VALUES ($tenant, $conv, 'migrate', $margs)}
    set lc [db onecolumn {SELECT idem_last_claim('ledger')}]
    set want [db onecolumn {SELECT idem_key($tenant, $conv, 'migrate', $margs)}]
    report [expr {$lc ne "" && [field $lc {$.tenant}] eq $tenant && [field $lc {$.key}] eq $want
                  && [regexp {^[0-9a-f]{32}$} [field $lc {$.token}]] && [field $lc {$.committed}] == 1}] \
        insert-last-claim "got $lc"
    if {[catch {
        db eval {INSERT INTO ledger(tenant, conversation, tool, args) VALUES ($tenant, $conv, 'migrate', $margs)}
    } err]} {
        set prefix "idempotency: key \"$want\" of tenant \"$tenant\" in ledger ledger is taken"
        report [expr {[string first $prefix $err] == 0 && ([db errorcode] & 0xff) == 19
                      && [db onecolumn {SELECT idem_last_claim('ledger') IS NULL}] == 1}] \
            insert-taken-refused "errorcode [db errorcode], message $err"
    } else {
        report 0 insert-taken-refused "a second INSERT of the same key succeeded"
    }
    db eval {INSERT OR IGNORE INTO ledger(tenant, conversation, tool, args) VALUES ($tenant, $conv, 'migrate', $margs)}
    set changes [db changes]
    report [expr {$changes == 0 && [db onecolumn {SELECT count(*) FROM ledger}] == 2}] \
        insert-or-ignore-skips "changes $changes"
    db close

    # A new connection on the existing file, in defensive mode
    # (SQLITE_DBCONFIG_DEFENSIVE), loading the extension before the schema
    # is read, then a schema change by another connection.
    if {[catch {
        sqlite3 db $path
        db config defensive 1
        db enable_load_extension 1
        db eval {SELECT load_extension($ext)}
        set r2 [db onecolumn {SELECT idem_claim('ledger', $tenant, $conv, $tool, $args)}]
        sqlite3 other $path
        other eval {CREATE TABLE unrelated(x)}
        other close
        set r3 [db onecolumn {SELECT idem_claim('ledger', $tenant, $conv, $tool, $args)}]
    } err]} {
        report 0 reopen-defensive $err
    } else {
        report [expr {[field $r2 {$.decision}] eq "replay" && [field $r2 {$.result}] eq $result
                      && [field $r3 {$.decision}] eq "replay"}] reopen-defensive "got $r2 / $r3"
    }
    catch {db close}
}

if {[catch {run $ext [file join $tmp ledger.db]} err]} {
    report 0 unexpected "$err: $::errorInfo"
}
file delete -force $tmp
exit [expr {$failures ? 1 : 0}]
