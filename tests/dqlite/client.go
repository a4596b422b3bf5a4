// The clients: go-dqlite's database/sql driver against the cluster. Every
// claim is made inside BEGIN ... COMMIT and a caller counts it as committed
// only when COMMIT returned without error.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/canonical/go-dqlite/client"
	"github.com/canonical/go-dqlite/driver"
)

const dbName = "ledger.db"

var registerOnce sync.Once

// store returns a node store holding the given comma-separated addresses.
func store(cluster string) client.NodeStore {
	s := client.NewInmemNodeStore()
	var infos []client.NodeInfo
	for _, a := range strings.Split(cluster, ",") {
		infos = append(infos, client.NodeInfo{Address: a})
	}
	s.Set(context.Background(), infos)
	return s
}

func quiet(client.LogLevel, string, ...interface{}) {}

// openDB opens the cluster's database through the driver; the driver finds
// the leader and finds the new one after a failover.
func openDB(cluster string) (*sql.DB, error) {
	var err error
	registerOnce.Do(func() {
		var drv *driver.Driver
		drv, err = driver.New(store(cluster), driver.WithLogFunc(quiet),
			driver.WithConnectionTimeout(20*time.Second),
			driver.WithAttemptTimeout(2*time.Second))
		if err == nil {
			sql.Register("dqlite", drv)
		}
	})
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("dqlite", dbName)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(1)
	return db, nil
}

// decision is a parsed answer of idem_claim or idem_settle.
type decision map[string]interface{}

func (d decision) str(k string) string {
	s, _ := d[k].(string)
	return s
}

// inTx runs one SELECT returning a single JSON text inside BEGIN ...
// COMMIT. committed reports whether COMMIT returned without error; err is
// the first error (BEGIN, the statement, or COMMIT).
func inTx(db *sql.DB, query string, args ...interface{}) (out decision, committed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("begin: %w", err)
	}
	var text string
	if err = tx.QueryRowContext(ctx, query, args...).Scan(&text); err != nil {
		tx.Rollback()
		return nil, false, err
	}
	if err = json.Unmarshal([]byte(text), &out); err != nil {
		tx.Rollback()
		return nil, false, fmt.Errorf("not a JSON object: %q", text)
	}
	if err = tx.Commit(); err != nil {
		return out, false, fmt.Errorf("commit: %w", err)
	}
	return out, true, nil
}

// errText names an error with its SQLite code when it has one.
func errText(err error) string {
	var de driver.Error
	if errors.As(err, &de) {
		return fmt.Sprintf("code %d: %s", de.Code, de.Message)
	}
	return fmt.Sprint(err)
}

const claimSQL = "SELECT idem_claim(?, ?, ?, ?, ?, ?, ?)"
const settleSQL = "SELECT idem_settle(?, ?, ?, ?)"

// runPorts prints n free loopback ports, one a line.
func runPorts(n int) error {
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return nil
}

// leaderAddress returns the current leader's address.
func leaderAddress(cluster string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := client.FindLeader(ctx, store(cluster), client.WithLogFunc(quiet))
	return leaderOf(ctx, cli, err)
}

// leaderOf asks the node a client is connected to (when err is nil) for the
// leader's address, and closes the client.
func leaderOf(ctx context.Context, cli *client.Client, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer cli.Close()
	info, err := cli.Leader(ctx)
	if err != nil {
		return "", err
	}
	return info.Address, nil
}

// runLeader prints the current leader's address.
func runLeader(cluster string) error {
	a, err := leaderAddress(cluster)
	if err == nil {
		fmt.Println(a)
	}
	return err
}

// runWaitVoters waits until the cluster has n voters, each answering.
func runWaitVoters(cluster string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		cli, err := client.FindLeader(ctx, store(cluster), client.WithLogFunc(quiet))
		if err == nil {
			nodes, err2 := cli.Cluster(ctx)
			cli.Close()
			voters := 0
			var desc []string
			for _, nd := range nodes {
				desc = append(desc, fmt.Sprintf("%d@%s:%s", nd.ID, nd.Address, nd.Role))
				if nd.Role != client.Voter {
					continue
				}
				if c, err3 := client.New(ctx, nd.Address, client.WithLogFunc(quiet)); err3 == nil {
					c.Close()
					voters++
				}
			}
			last = strings.Join(desc, " ")
			if err2 == nil && voters >= n {
				cancel()
				fmt.Println(last)
				return nil
			}
		} else {
			last = err.Error()
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("wait-voters: fewer than %d voters answering after %s (last: %s)", n, timeout, last)
}

// leaderSeenBy asks one node which leader it knows (empty: none).
func leaderSeenBy(address string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cli, err := client.New(ctx, address, client.WithLogFunc(quiet))
	return leaderOf(ctx, cli, err)
}

// runNewLeader waits until one of nodes names a leader other than old,
// and that leader names itself, then prints its address. It asks the nodes
// one by one, never through old: a paused or cut-off old leader would hold
// the question until the attempt timed out.
func runNewLeader(nodes, old string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last []string
	for time.Now().Before(deadline) {
		last = last[:0]
		for _, a := range strings.Split(nodes, ",") {
			l, err := leaderSeenBy(a)
			last = append(last, fmt.Sprintf("%s sees %q (%v)", a, l, err))
			if err != nil || l == "" || l == old || !strings.Contains(","+nodes+",", ","+l+",") {
				continue
			}
			if self, err := leaderSeenBy(l); err == nil && self == l {
				fmt.Println(l)
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("new-leader: no leader other than %s within %s (%s)", old, timeout, strings.Join(last, "; "))
}
