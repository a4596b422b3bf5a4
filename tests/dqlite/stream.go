// stream: one client claiming keys from a pool shared with the other
// clients, inside transactions, while a nemesis works on the leader (kills
// it, pauses it, cuts it off), until -seconds pass or the -stop file
// appears. It writes one
// line per thing it was told, for verify:
//
//	committed KEY TOKEN      admitted, and COMMIT returned without error
//	settled KEY TOKEN        the settle's COMMIT returned without error
//	commit-error KEY ERR     admitted, but COMMIT failed: the outcome is unknown
//	decision KEY DECISION    any other decision
//	error STAGE ERR          BEGIN or the statement failed (nothing was told)
package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"time"
)

// streamArgs is the request bound to pool key i of a tenant (one tenant
// per nemesis, so each starts from fresh keys): every client sends the
// same request for the same key, so a key is never a mismatch.
func streamArgs(tenant string, i int) []interface{} {
	return []interface{}{"ledger", tenant, "c", "pay", fmt.Sprintf(`{"n":%d}`, i), "external", fmt.Sprintf("k-%d", i)}
}

// stopped reports whether the file that ends the stream exists.
func stopped(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

func runStream(cluster, tenant string, id int, d time.Duration, keys int, logPath, stop string, seed int64) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	db, err := openDB(cluster)
	if err != nil {
		return err
	}
	defer db.Close()
	rng := rand.New(rand.NewSource(seed))
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && !stopped(stop) {
		i := rng.Intn(keys)
		a := streamArgs(tenant, i)
		key := a[6].(string)
		out, committed, err := inTx(db, claimSQL, a...)
		switch {
		case out == nil && err != nil:
			fmt.Fprintf(w, "error claim %q\n", errText(err))
			time.Sleep(time.Duration(20+rng.Intn(80)) * time.Millisecond)
			continue
		case out.str("decision") != "admitted":
			fmt.Fprintf(w, "decision %s %s\n", key, out.str("decision"))
			continue
		case !committed:
			fmt.Fprintf(w, "commit-error %s %q\n", key, errText(err))
			continue
		}
		token := out.str("token")
		fmt.Fprintf(w, "committed %s %s\n", key, token)
		if rng.Intn(2) == 0 {
			continue // left claimed: verify settles it after the failovers
		}
		s, ok, err := inTx(db, settleSQL, "ledger", token, "succeeded", fmt.Sprintf(`{"by":%d}`, id))
		if ok && s.str("status") == "succeeded" {
			fmt.Fprintf(w, "settled %s %s\n", key, token)
		} else {
			fmt.Fprintf(w, "error settle %q\n", errText(err))
		}
	}
	return nil
}
