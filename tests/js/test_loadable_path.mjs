// getLoadablePath() of the installed npm package when the platform package
// is not there: installed with --omit=optional, then a platform package of
// another version, then one without its library, then the real one; and a
// platform no package is built for. Each error message is compared exactly.
//
// Usage: node test_loadable_path.mjs LIBRARY      (from an npm project in which
//   sqlite-idempotency was installed with --omit=optional; LIBRARY is the
//   extension built for this platform, copied into the package it makes)
//
// Prints PASS/FAIL lines; exit status 1 when a check failed.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Checks } from './checks.mjs';

const require = createRequire(path.join(process.cwd(), 'package.json'));
const idem = require('sqlite-idempotency');
const tally = new Checks('packages.node.loadable-path');
const { report } = tally;
const lib = process.argv[2];

const platform = `${process.platform}-${process.arch}`;
const name = `sqlite-idempotency-${platform}`;
const V = idem.VERSION;
const message = () => { try { return `returned ${idem.getLoadablePath()}`; } catch (e) { return `${e.name}: ${e.message}`; } };
const is = (got, want, check) => report(got === want, check, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);

const dir = path.join(process.cwd(), 'node_modules', name);
report(!fs.existsSync(dir), 'omitted', `${dir} exists after npm install --omit=optional`);
is(message(), `IdempotencyError: sqlite-idempotency: the package for ${platform}, ${name}, is not installed; npm installs it as an optional dependency of sqlite-idempotency unless optional dependencies are left out (--omit=optional, --no-optional) or node_modules was installed on another platform: run npm install ${name}@${V}`,
   'not-installed');

const arch = Object.getOwnPropertyDescriptor(process, 'arch');
Object.defineProperty(process, 'arch', { value: 'riscv64', configurable: true });
try {
  is(message(), `IdempotencyError: sqlite-idempotency: no package for ${process.platform}-riscv64: the extension is packaged for linux-x64 and linux-arm64 (sqlite-idempotency-linux-x64, sqlite-idempotency-linux-arm64); on ${process.platform}-riscv64 build it from source (make) and load build/idempotency with the driver's loadExtension`,
     'other-platform');
} finally {
  Object.defineProperty(process, 'arch', arch);
}

fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '0.0.9' }));
is(message(), `IdempotencyError: sqlite-idempotency: ${name} is version 0.0.9, sqlite-idempotency is ${V}; they must be the same: run npm install ${name}@${V}`,
   'other-version');

fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: V }));
is(message(), `IdempotencyError: sqlite-idempotency: ${name} in ${fs.realpathSync(dir)} has no idempotency.so: run npm install ${name}@${V}`,
   'no-library');

fs.copyFileSync(lib, path.join(dir, 'idempotency.so'));
is(message(), `returned ${path.join(fs.realpathSync(dir), 'idempotency')}`, 'found');

process.exit(tally.status());
