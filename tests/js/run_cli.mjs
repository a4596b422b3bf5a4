// Shared by diff.mjs and numbers.mjs: run a C helper (under TEST_WRAP's
// wrapper when set) on the given input, printing PASS/FAIL lines; a helper
// that fails to run or exits non-zero ends the test with status 1.
import { spawnSync } from 'node:child_process';

export const report = { ok: true };
export function fail (name, why) { console.log(`FAIL ${name}: ${why}`); report.ok = false; }
export function pass (name) { console.log(`PASS ${name}`); }

export function runCli (cli, input, name) {
  const wrap = (process.env.TEST_WRAP || '').split(/\s+/).filter(Boolean);
  const argv = [...wrap, cli];
  const run = spawnSync(argv[0], argv.slice(1), { input, maxBuffer: 1 << 30 });
  if (run.error || run.status !== 0) {
    fail(name, `${argv.join(' ')} exited with ${run.error ? run.error.message : 'status ' + run.status}: ${String(run.stderr).slice(0, 2000)}`);
    process.exit(1);
  }
  pass(name);
  return run;
}
