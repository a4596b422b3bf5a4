// idemdq: a dqlite node that carries the idempotency extension, and the
// clients that test the ledger through a three-node cluster
// (tests/suites/70-dqlite.sh). Built offline from Debian's go-dqlite
// sources (GOPATH mode); see tests/tests.mk.
//
//	idemdq node      -dir D -address 127.0.0.1:P [-join A,B] -ext PATH
//	idemdq ports     N                     N free loopback ports
//	idemdq leader    -cluster A,B,C        the leader's address
//	idemdq wait      -cluster A,B,C -voters N
//	idemdq basic     -cluster A,B,C        ledger, claim, settle, replay, guard
//	idemdq stream    -cluster A,B,C -client N -seconds S -log FILE [-tenant T] [-stop FILE]
//	idemdq verify    -cluster A,B,C -logs F1,F2,... [-tenant T] [-name NEMESIS]
//	idemdq new-leader -nodes A,B -not L    wait until one of A,B names a leader other than L
//	idemdq seen      -node A               the leader node A knows
//	idemdq check-all -cluster A,B,C [-name NEMESIS]  each node leads in turn: integrity, digest
//
// Test subcommands print "PASS name", "FAIL name: why" lines.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

var failed bool

func pass(name string) { fmt.Printf("PASS dqlite.%s\n", name) }

func fail(name, format string, a ...interface{}) {
	failed = true
	fmt.Printf("FAIL dqlite.%s: %s\n", name, fmt.Sprintf(format, a...))
}

// check prints PASS or FAIL for one named condition.
func check(name string, ok bool, format string, a ...interface{}) bool {
	if ok {
		pass(name)
	} else {
		fail(name, format, a...)
	}
	return ok
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: idemdq node|ports|leader|wait|basic|stream|verify|new-leader|seen|check-all ...")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	cluster := fs.String("cluster", "", "comma-separated node addresses")
	var err error
	switch cmd {
	case "node":
		err = runNode(args)
	case "ports":
		n := 3
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		err = runPorts(n)
	case "leader":
		fs.Parse(args)
		err = runLeader(*cluster)
	case "wait":
		voters := fs.Int("voters", 3, "voters to wait for")
		timeout := fs.Duration("timeout", 60*time.Second, "how long to wait")
		fs.Parse(args)
		err = runWaitVoters(*cluster, *voters, *timeout)
	case "basic":
		fs.Parse(args)
		err = runBasic(*cluster)
	case "stream":
		id := fs.Int("client", 0, "client number")
		seconds := fs.Float64("seconds", 10, "how long to claim")
		keys := fs.Int("keys", 400, "size of the shared key pool")
		logPath := fs.String("log", "", "where to write what this client was told")
		stop := fs.String("stop", "", "stop claiming once this file exists")
		tenant := fs.String("tenant", "t", "tenant of the claims (one per nemesis)")
		seed := fs.Int64("seed", 1, "PRNG seed")
		fs.Parse(args)
		err = runStream(*cluster, *tenant, *id, time.Duration(*seconds*float64(time.Second)), *keys, *logPath, *stop, *seed)
	case "verify":
		logs := fs.String("logs", "", "comma-separated client logs")
		tenant := fs.String("tenant", "t", "tenant the stream claimed under")
		name := fs.String("name", "", "prefix of the check names (the nemesis)")
		fs.Parse(args)
		err = runVerify(*cluster, *tenant, *name, *logs)
	case "new-leader":
		nodes := fs.String("nodes", "", "comma-separated nodes to ask")
		old := fs.String("not", "", "the old leader's address")
		timeout := fs.Duration("timeout", 20*time.Second, "how long to wait")
		fs.Parse(args)
		err = runNewLeader(*nodes, *old, *timeout)
	case "check-all":
		name := fs.String("name", "", "prefix of the check names (the nemesis)")
		fs.Parse(args)
		err = runCheckAll(*cluster, *name)
	case "seen":
		node := fs.String("node", "", "the node to ask")
		fs.Parse(args)
		var l string
		if l, err = leaderSeenBy(*node); err == nil {
			fmt.Println(l)
		}
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "idemdq %s: %v\n", cmd, err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}
