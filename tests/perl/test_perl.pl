#!/usr/bin/perl
# The extension from Perl's DBI with DBD::SQLite (Debian: libdbd-sqlite3-perl).
#
# Usage: perl test_perl.pl EXTENSION_PATH
#
# On a database file in a temporary directory, with RaiseError: load the
# extension ($dbh->sqlite_enable_load_extension(1); sqlite_load_extension),
# create a ledger, claim (admitted, with a token), settle succeeded, claim
# again (replay, "idempotent": true, the recorded result), a NULL (undef)
# and a blank tenant refused: the statement dies, $dbh->err is 19
# (SQLITE_CONSTRAINT) and $dbh->errstr is the extension's exact message,
# with nothing written; and the SQL-native claim (INSERT INTO ledger,
# idem_last_claim, a taken key refused).
#
# Prints one line per check: PASS <name> / FAIL <name>: <why>, and one
# non-check line with the Perl, DBD::SQLite and SQLite versions.
use strict;
use warnings;
use DBI;
use File::Temp qw(tempdir);
use File::Spec;
use Cwd qw(abs_path);
use JSON::PP;

my $PREFIX = 'bindings.perl';
my $failures = 0;
my $json = JSON::PP->new->canonical;

sub report {
    my ($ok, $name, $why) = @_;
    if ($ok) {
        print "PASS $PREFIX:$name\n";
    } else {
        $failures++;
        $why = '' unless defined $why;
        $why =~ s/\n/ /g;
        print "FAIL $PREFIX:$name: $why\n";
    }
}

# expect_error(NAME, DBH, CODE, MESSAGE): CODE must die through RaiseError
# with $dbh->err 19 and $dbh->errstr exactly MESSAGE.
sub expect_error {
    my ($name, $dbh, $code, $message) = @_;
    my $got = eval { $code->(); 1 };
    if ($got) {
        report(0, $name, 'no error');
        return;
    }
    my $died = $@;
    my ($err, $errstr) = ($dbh->err, $dbh->errstr);
    if (!defined $err || $err != 19) {
        report(0, $name, 'err ' . (defined $err ? $err : 'undef') . ", want 19 (SQLITE_CONSTRAINT); died with $died");
    } elsif ($errstr ne $message) {
        report(0, $name, "errstr \"$errstr\", want \"$message\"");
    } elsif (index($died, $message) < 0) {
        report(0, $name, "the die message \"$died\" does not carry \"$message\"");
    } else {
        report(1, $name);
    }
}

sub run {
    my ($ext, $path) = @_;
    my $dbh = DBI->connect("dbi:SQLite:dbname=$path", '', '',
                           { RaiseError => 1, PrintError => 0, AutoCommit => 1 });
    # DBD::SQLite upstream bundles its own SQLite; Debian's links the system one.
    printf "   %s: Perl %vd, DBI %s, DBD::SQLite %s with SQLite %s\n", $PREFIX, $^V,
        $DBI::VERSION, $DBD::SQLite::VERSION, ($dbh->selectrow_array('SELECT sqlite_version()'))[0];
    my $version = eval {
        $dbh->sqlite_enable_load_extension(1);
        $dbh->sqlite_load_extension($ext);
        $dbh->sqlite_enable_load_extension(0);
        ($dbh->selectrow_array('SELECT idem_version()'))[0];
    };
    if (!defined $version) {
        report(0, 'load', "$@");
        return;
    }
    report($version ne '', 'load', "idem_version() = $version");
    $dbh->do('PRAGMA journal_mode=WAL');
    $dbh->do('PRAGMA synchronous=FULL');
    $dbh->sqlite_busy_timeout(10000);
    $dbh->do('CREATE VIRTUAL TABLE ledger USING idempotency');

    my $one = sub { my ($sql, @bind) = @_; return ($dbh->selectrow_array($sql, undef, @bind))[0]; };
    my $claim = "SELECT idem_claim('ledger', ?, ?, ?, ?)";
    my $args = '{"to":"a@example.com","subject":"hi"}';
    my $d = decode_json($one->($claim, 'tenant-a', 'conv-1', 'send_email', $args));
    my $token = $d->{token} // '';
    my $key = $d->{key} // '';
    report($d->{decision} eq 'admitted' && $token =~ /^[0-9a-f]{32}$/ && $d->{committed}
           && $d->{attempt} == 1 && $key =~ /^idem1-[0-9a-f]{32}$/,
           'claim-admitted', 'got ' . $json->encode($d));

    my $result = '{"message_id":"m-17"}';
    my $s = decode_json($one->("SELECT idem_settle('ledger', ?, 'succeeded', ?)", $token, $result));
    report($s->{status} eq 'succeeded' && $s->{key} eq $key, 'settle-succeeded', 'got ' . $json->encode($s));

    my $r = decode_json($one->($claim, 'tenant-a', 'conv-1', 'send_email', '{"subject":"hi","to":"a@example.com"}'));
    report($r->{decision} eq 'replay' && JSON::PP::is_bool($r->{idempotent}) && $r->{idempotent}
           && $r->{key} eq $key && !exists $r->{token}
           && $json->encode($r->{result}) eq $result,
           'claim-replay', 'got ' . $json->encode($r));

    my $before = $one->('SELECT count(*) FROM ledger');
    expect_error('refused-null-tenant', $dbh,
                 sub { $one->($claim, undef, 'conv-1', 'send_email', $args) },
                 'idem_claim: tenant is missing (NULL)');
    expect_error('refused-blank-tenant', $dbh,
                 sub { $one->($claim, '', 'conv-1', 'send_email', $args) },
                 'idem_claim: tenant is empty');
    expect_error('refused-space-tenant', $dbh,
                 sub { $one->($claim, ' ', 'conv-1', 'send_email', $args) },
                 'idem_claim: tenant " " has byte 0x20 at offset 0; only A-Z a-z 0-9 _ - are allowed');
    my $after = $one->('SELECT count(*) FROM ledger');
    report($before == 1 && $after == 1, 'refused-wrote-nothing', "rows before $before, after $after");

    my $ins = 'INSERT INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)';
    $dbh->do($ins, undef, 'tenant-a', 'conv-1', 'migrate', '{"step":3}');
    my $raw = $one->("SELECT idem_last_claim('ledger')");
    my $lc = defined $raw ? decode_json($raw) : {};
    my $want = $one->("SELECT idem_key('tenant-a', 'conv-1', 'migrate', '{\"step\":3}')");
    report(defined $raw && $lc->{tenant} eq 'tenant-a' && $lc->{key} eq $want
           && ($lc->{token} // '') =~ /^[0-9a-f]{32}$/ && $lc->{committed},
           'insert-last-claim', 'got ' . ($raw // 'NULL'));
    if (eval { $dbh->do($ins, undef, 'tenant-a', 'conv-1', 'migrate', '{"step":3}'); 1 }) {
        report(0, 'insert-taken-refused', 'a second INSERT of the same key succeeded');
    } else {
        my ($err, $errstr) = ($dbh->err, $dbh->errstr);
        report($err == 19
               && index($errstr, "idempotency: key \"$want\" of tenant \"tenant-a\" in ledger ledger is taken") == 0
               && !defined $one->("SELECT idem_last_claim('ledger')"),
               'insert-taken-refused', "err $err, errstr $errstr");
    }
    my $n = $dbh->do('INSERT OR IGNORE INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)',
                     undef, 'tenant-a', 'conv-1', 'migrate', '{"step":3}');
    report($n == 0 && $one->('SELECT count(*) FROM ledger') == 2, 'insert-or-ignore-skips', "do returned $n");
    $dbh->disconnect;

    # A new connection on the existing file: load first, then the replay.
    my $r2 = eval {
        my $db2 = DBI->connect("dbi:SQLite:dbname=$path", '', '', { RaiseError => 1, PrintError => 0 });
        $db2->sqlite_enable_load_extension(1);
        $db2->sqlite_load_extension($ext);
        my $v = decode_json(($db2->selectrow_array($claim, undef, 'tenant-a', 'conv-1', 'send_email', $args))[0]);
        $db2->disconnect;
        $v;
    };
    report($r2 && $r2->{decision} eq 'replay' && $json->encode($r2->{result}) eq $result,
           'reopen', $r2 ? 'got ' . $json->encode($r2) : "$@");
}

if (@ARGV != 1) {
    print STDERR "usage: perl test_perl.pl EXTENSION_PATH\n";
    exit 2;
}
my $ext = abs_path($ARGV[0]);
my $tmp = tempdir('idem-perl-XXXXXX', TMPDIR => 1, CLEANUP => 1);
eval { run($ext, File::Spec->catfile($tmp, 'ledger.db')); 1 } or report(0, 'unexpected', "$@");
exit($failures ? 1 : 0);
