// The page of `sqlite-idempotency serve` in a real browser: Debian's
// chromium, headless, driven by puppeteer-core. For each server (the
// Python package's and the Node package's, started by the suite, URLs on
// argv), against the fixture one.db (two unknown calls, targets):
//   counts       the bars show the counts by status of /api/status
//   attention    the unknown calls, oldest first, each with its age in words
//   filter       a key or argument text narrows the list to the one call
//   detail       a call opened with the keyboard (Enter on its row) shows its
//                arguments, targets and the resolve command, exactly
//   phone        at a phone's width the page does not scroll sideways
//   offline      every request the page made went to the server's origin
//   token        (argv TOKEN_URL) a server that needs a token: the page,
//                opened with ?token=, shows the ledger and moves the token
//                out of the address bar
// The node server's resolve command is printed (RESOLVE ...): the suite runs
// it as copied on a copy of the file. The suite checks the file is
// byte-identical afterwards. With SHOTS set,
// the page is saved there as serve-overview.png, serve-detail.png and
// serve-phone.png (docs/operating.md shows them; make screenshots).
//
// Usage: node test_serve_browser.mjs CHROMIUM KEY KEY2 URL... [--token URL]
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { Checks } from './checks.mjs';

const checks = new Checks('serve.browser');
const argv = process.argv.slice(2);
const [chromium, key, key2] = argv;
const ti = argv.indexOf('--token');
const urls = argv.slice(3, ti < 0 ? undefined : ti);
const tokenUrl = ti < 0 ? undefined : argv[ti + 1];
const shots = process.env.SHOTS;
const j = (v) => JSON.stringify(v);

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-default-apps', '--disable-sync'],
});

async function api(url, p) {
  return JSON.parse(await (await fetch(new URL(p, url))).text());
}

try {
  for (const [i, url] of urls.entries()) {
    const who = i === 0 ? 'python' : 'node';
    const origin = new URL(url).origin;
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const requested = [];
    page.on('request', (r) => requested.push(r.url()));
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(url, { waitUntil: 'networkidle0' });
    await page.waitForSelector('#attention table');
    const status = await api(url, '/api/status');

    // counts
    const bars = await page.$$eval('#by-status > span', (s) => s.map((x) => x.textContent.trim()));
    const byStatus = {};
    for (const c of status.counts) byStatus[c.status] = (byStatus[c.status] || 0) + c.rows;
    const want = ['claimed', 'unknown', 'succeeded', 'failed', 'released'].filter((s) => byStatus[s]).flatMap((s) => [s, '', String(byStatus[s])]);
    checks.report(j(bars) === j(want) && (await page.$eval('#verdict', (e) => e.textContent)) === status.verdict, `${who}:counts`, `the bars read ${j(bars)}, want ${j(want)}`);

    // attention: the unknown calls, oldest first, with their age in words
    const unknown = await api(url, '/api/list?status=unknown');
    const att = await page.$$eval('#attention tbody tr', (rs) => rs.map((r) => [r.dataset.key, r.cells[3].textContent]));
    checks.report(unknown.length === 2 && j(att.map((a) => a[0])) === j(unknown.map((r) => r.key)) && att.map((a) => a[0]).includes(key) && att.map((a) => a[0]).includes(key2)
      && att.every((a) => /^\d+ (second|minute|hour|day)s? ago$/.test(a[1])), `${who}:attention`, `the page lists ${j(att)}; the ledger's unknown calls are ${j(unknown.map((r) => r.key))}`);
    if (shots && i === 1) await page.screenshot({ path: path.join(shots, 'serve-overview.png'), fullPage: true });

    // filter: a text inside one call's arguments
    await page.select('#f-status', 'all');
    await page.type('#f-text', 'b@example.com');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#list-count')?.textContent === '1 call');
    const listed = await page.$$eval('#list tbody tr', (rs) => rs.map((r) => r.dataset.key));
    checks.report(j(listed) === j([key2]), `${who}:filter`, `the list holds ${j(listed)}, want only ${key2}`);

    // detail, opened with the keyboard
    await page.$eval('#f-text', (e) => { e.value = ''; });
    await page.select('#f-status', 'unknown');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#list-count')?.textContent === '2 calls');
    await page.focus(`#list tbody tr[data-key="${key}"]`);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#resolve-cmd');
    const cmd = await page.$eval('#resolve-cmd', (e) => e.textContent);
    const args = await page.$eval('#detail-args', (e) => e.textContent);
    const targets = await page.$eval('#detail', (e) => e.textContent.includes('card:acme/4242/order-9'));
    const wantCmd = `sqlite-idempotency resolve ${status.file} ${key} succeeded --tenant acme --ledger ${status.ledger}`;
    await page.select('#resolve-choice', 'released');
    const released = await page.$eval('#resolve-cmd', (e) => e.textContent);
    if (i === 1) console.log(`RESOLVE ${cmd}`); // the suite runs it, as copied, on a copy of the file
    checks.report(cmd === wantCmd && released === `sqlite-idempotency resolve ${status.file} ${key} released --tenant acme --detail '{"sent":false}' --ledger ${status.ledger}`
      && args === '{\n  "amount": 9\n}' && targets, `${who}:detail`, `the command reads ${j(cmd)} (want ${j(wantCmd)}), released ${j(released)}; arguments ${j(args)}; targets shown ${targets}`);
    await page.select('#resolve-choice', 'succeeded');
    if (shots && i === 1) await (await page.$('#detail-section')).screenshot({ path: path.join(shots, 'serve-detail.png') });

    // a phone's width
    await page.setViewport({ width: 390, height: 844, isMobile: true });
    await page.reload({ waitUntil: 'networkidle0' });
    await page.waitForSelector('#attention table');
    const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    checks.report(wide <= 0, `${who}:phone`, `the page is ${wide} px wider than a 390 px screen`);
    if (shots && i === 1) await page.screenshot({ path: path.join(shots, 'serve-phone.png'), fullPage: false });

    const outside = requested.filter((u) => !u.startsWith(`${origin}/`));
    checks.report(outside.length === 0 && requested.length > 3 && errors.length === 0, `${who}:offline`, `requests outside ${origin}: ${j(outside)}; script errors ${j(errors)}`);
    await page.close();
  }

  if (tokenUrl) {
    const page = await browser.newPage();
    const u = new URL(tokenUrl);
    const bare = `${u.origin}/`;
    const refused = await fetch(`${bare}api/status`);
    await page.goto(tokenUrl, { waitUntil: 'networkidle0' });
    await page.waitForSelector('#attention table');
    const shown = await page.$$eval('#attention tbody tr', (rs) => rs.length);
    const address = page.url();
    checks.report(refused.status === 401 && shown === 2 && !address.includes('token='), 'token', `without the token: ${refused.status} (want 401); with it the page lists ${shown} unknown calls (want 2), its address is ${address}`);
    await page.close();
  }
} catch (e) {
  checks.report(false, 'run', e.stack);
} finally {
  await browser.close();
}
if (shots) for (const f of ['serve-overview.png', 'serve-detail.png', 'serve-phone.png']) checks.report(fs.existsSync(path.join(shots, f)), `screenshot:${f}`, `not written to ${shots}`);
process.exit(checks.status());
