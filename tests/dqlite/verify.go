// verify: after the failovers, what every client was told holds on the
// current leader, and settles and replays still work.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

type row struct {
	token, status, result string
	attempt               int
}

// readRows reads the rows of one stream's tenant from the leader.
func readRows(ctx context.Context, db *sql.DB, tenant string) (map[string]row, error) {
	rs, err := db.QueryContext(ctx, "SELECT key, token, status, attempt, coalesce(result, '') FROM ledger WHERE tenant = ?", tenant)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	rows := map[string]row{}
	for rs.Next() {
		var k string
		var r row
		if err := rs.Scan(&k, &r.token, &r.status, &r.attempt, &r.result); err != nil {
			return nil, err
		}
		rows[k] = r
	}
	return rows, rs.Err()
}

// digest is a hash of every ledger row and guarded row, to compare nodes.
func digest(ctx context.Context, db *sql.DB) (string, int, error) {
	rs, err := db.QueryContext(ctx, `SELECT tenant || '|' || key || '|' || token || '|' || status || '|' || attempt
	  || '|' || coalesce(result, '') FROM ledger
	  UNION ALL SELECT 'orders|' || id || '|' || op_key || '|' || claim_token FROM orders ORDER BY 1`)
	if err != nil {
		return "", 0, err
	}
	defer rs.Close()
	h := sha256.New()
	n := 0
	for rs.Next() {
		var s string
		if err := rs.Scan(&s); err != nil {
			return "", 0, err
		}
		fmt.Fprintln(h, s)
		n++
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:16], n, rs.Err()
}

func runVerify(cluster, tenant, name, logs string) error {
	if name != "" {
		name += "."
	}
	committed := map[string]string{} // key -> token the client was told is committed
	settled := map[string]bool{}
	var twice []string
	counts := map[string]int{}
	for _, p := range strings.Split(logs, ",") {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			kind := fields[0]
			switch kind {
			case "decision":
			case "error": // error claim ERR, error settle ERR
				counts["error "+fields[1]]++
			default:
				counts[kind]++
			}
			switch kind {
			case "committed":
				if _, dup := committed[fields[1]]; dup {
					twice = append(twice, fields[1])
				}
				committed[fields[1]] = fields[2]
			case "settled":
				settled[fields[1]] = true
			case "decision":
				counts["decision "+fields[2]]++
			}
		}
		f.Close()
	}
	var summary []string
	for k, v := range counts {
		summary = append(summary, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(summary)
	fmt.Printf("   clients were told: %s\n", strings.Join(summary, " "))
	attempted := counts["committed"] + counts["commit-error"] + counts["error claim"]
	for k, v := range counts {
		if strings.HasPrefix(k, "decision ") {
			attempted += v
		}
	}
	fmt.Printf("   %sclaims: attempted=%d committed=%d commit-errors=%d\n", name, attempted, counts["committed"], counts["commit-error"])
	check(name+"stream_claimed_something", len(committed) >= 20 && counts["decision in_progress"]+counts["decision replay"] > 0,
		"only %d committed claims and %d in_progress/replay decisions: the stream did not exercise the ledger",
		len(committed), counts["decision in_progress"]+counts["decision replay"])
	check(name+"no_key_admitted_twice", len(twice) == 0, "keys committed to two callers: %v", twice)

	db, err := openDB(cluster)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := readRows(ctx, db, tenant)
	if err != nil {
		fail(name+"read_ledger", "%v", err)
		return nil
	}
	var missing, badAttempt, badSettle []string
	for k, tok := range committed {
		r, ok := rows[k]
		if !ok || r.token != tok {
			missing = append(missing, fmt.Sprintf("%s (told %s, found %+v)", k, tok, r))
		}
		if settled[k] && r.status != "succeeded" {
			badSettle = append(badSettle, k+":"+r.status)
		}
	}
	for k, r := range rows {
		if r.attempt != 1 {
			badAttempt = append(badAttempt, fmt.Sprintf("%s:%d", k, r.attempt))
		}
	}
	check(name+"committed_claims_survive", len(missing) == 0,
		"%d of %d claims told committed are missing or carry another token on the new leader: %v",
		len(missing), len(committed), missing)
	check(name+"settles_survive", len(badSettle) == 0, "settled keys not succeeded: %v", badSettle)
	check(name+"one_attempt_per_key", len(badAttempt) == 0, "keys admitted more than once (attempt > 1): %v", badAttempt)
	fmt.Printf("   ledger: %d rows, %d told committed, %d unacknowledged claims (COMMIT failed but the claim landed)\n",
		len(rows), len(committed), len(rows)-len(committed))

	// After the failovers: settle what is still claimed with the token the
	// client holds, then every settled key replays its result.
	nSettled, nReplay := 0, 0
	var errs []string
	for k, tok := range committed {
		r := rows[k]
		if r.status == "claimed" {
			s, ok, err := inTx(db, settleSQL, "ledger", tok, "succeeded", `{"by":"verify"}`)
			if !ok || s.str("status") != "succeeded" {
				errs = append(errs, fmt.Sprintf("settle %s: %v %v", k, s, err))
				continue
			}
			nSettled++
		}
		var i int
		fmt.Sscanf(k, "k-%d", &i)
		d, _, err := inTx(db, claimSQL, streamArgs(tenant, i)...)
		res, _ := json.Marshal(d["result"])
		if err != nil || d.str("decision") != "replay" || d["idempotent"] != true || !strings.HasPrefix(string(res), `{"by":`) {
			errs = append(errs, fmt.Sprintf("replay %s: %v %v", k, d, err))
			continue
		}
		nReplay++
	}
	check(name+"settle_and_replay_after_failover", len(errs) == 0 && nReplay == len(committed),
		"%d errors: %v", len(errs), errs)
	fmt.Printf("   after the failovers: %d claims settled with their tokens, %d keys replayed\n", nSettled, nReplay)
	return nil
}
