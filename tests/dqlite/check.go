// check-all: every node in turn becomes the leader (leadership transfer)
// and answers PRAGMA integrity_check and a digest of the ledger, so each
// node's own copy of the database is checked and compared.
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/canonical/go-dqlite/client"
)

func runCheckAll(cluster, prefix string) error {
	if prefix != "" {
		prefix += "."
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli, err := client.FindLeader(ctx, store(cluster), client.WithLogFunc(quiet))
	if err != nil {
		return err
	}
	nodes, err := cli.Cluster(ctx)
	cli.Close()
	if err != nil {
		return err
	}
	index := map[string]int{} // address -> position in -cluster, for stable names
	for i, a := range strings.Split(cluster, ",") {
		index[a] = i
	}
	digests := map[string]uint64{}
	checked := 0
	for _, nd := range nodes {
		name := fmt.Sprintf("%snode%d", prefix, index[nd.Address])
		if err := leadOn(ctx, cluster, nd.ID); err != nil {
			fail(name+".leads", "transfer leadership to %d (%s): %v", nd.ID, nd.Address, err)
			continue
		}
		db, err := openDB(cluster)
		if err != nil {
			return err
		}
		var ic string
		err = db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ic)
		check(name+".integrity_check", err == nil && ic == "ok", "node %d: %q %v", nd.ID, ic, err)
		d, n, err := digest(ctx, db)
		if err != nil {
			fail(name+".digest", "%v", err)
		} else {
			fmt.Printf("   %s %s (id %d) leads: integrity ok, %d rows, digest %s\n", name, nd.Address, nd.ID, n, d)
			digests[d] = nd.ID
		}
		db.Close()
		checked++
	}
	check(prefix+"every_node_checked", checked == len(nodes) && len(nodes) == 3, "checked %d of %d nodes", checked, len(nodes))
	check(prefix+"nodes_agree", len(digests) == 1, "the nodes hold %d different ledgers", len(digests))
	return nil
}

// leadOn transfers leadership to node id and waits until it leads.
func leadOn(ctx context.Context, cluster string, id uint64) error {
	var last error
	for i := 0; i < 50; i++ {
		cli, err := client.FindLeader(ctx, store(cluster), client.WithLogFunc(quiet))
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		info, err := cli.Leader(ctx)
		if err == nil && info.ID == id {
			cli.Close()
			return nil
		}
		if err == nil {
			last = cli.Transfer(ctx, id)
		} else {
			last = err
		}
		cli.Close()
		time.Sleep(300 * time.Millisecond)
	}
	return last
}
