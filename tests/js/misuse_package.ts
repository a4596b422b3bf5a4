// Type-checked by tests/suites/63-packages.sh: tsc must REFUSE each marked
// line (a declaration that accepted them would not be checking anything).
import { Ledger, LoadableDatabase, rawJson } from 'sqlite-idempotency';

declare const db: LoadableDatabase;
const ledger = Ledger.open(db);
const d = ledger.claim('t', 'c', 'tool', {});
console.log(d.token);                                      // MISUSE 1: token only on admitted
ledger.settle('tok', 'done');                              // MISUSE 2: not a status
ledger.claim('t', 'c', 'tool', {}, { effect: 'remote' });  // MISUSE 3: not an effect
ledger.claim('t', 'c', 'tool', () => 1);                   // MISUSE 4: args must be JSON
rawJson({ id: 1 });                                        // MISUSE 5: rawJson takes JSON text
