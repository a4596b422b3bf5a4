// tests/js/checks.mjs: the PASS/FAIL lines of a Node test program.
//
//   const checks = new Checks('packages.node');
//   checks.report(ok, 'name', 'why it failed');
//   process.exit(checks.status());     // 1 when a check failed
export class Checks {
  constructor(prefix) {
    this.prefix = prefix;
    this.failures = 0;
    this.report = this.report.bind(this);
  }

  // Prints `PASS prefix:name` or `FAIL prefix:name: why` (on one line).
  report(ok, name, why = '') {
    if (ok) {
      console.log(`PASS ${this.prefix}:${name}`);
    } else {
      this.failures++;
      console.log(`FAIL ${this.prefix}:${name}: ${String(why).replace(/\n/g, ' ')}`);
    }
  }

  status() {
    return this.failures ? 1 : 0;
  }
}
