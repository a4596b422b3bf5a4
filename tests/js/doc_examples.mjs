// Runs the JavaScript examples of docs/integrations.md's agent-framework
// sections as written, each a program in a fresh directory of the staged
// npm project (where sqlite-idempotency and the frameworks resolve), and
// compares its output with the ```text block that follows it (where <time>
// stands for any ISO 8601 UTC time).
//
// Usage: node doc_examples.mjs DOCS_MD FRAMEWORK...   (ai, openai-agents, langchain, mastra)
//   a section whose framework is not named skips, saying so.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Checks } from './checks.mjs';

const SECTIONS = { 'The Vercel AI SDK': 'ai', 'OpenAI Agents': 'openai-agents', 'LangChain and LangGraph': 'langchain', Mastra: 'mastra' };
const [docs, ...ready] = process.argv.slice(2);
const tally = new Checks('integrations.docs');

// [{ framework, code, expected, line }] of the sections' js blocks not marked norun.
function examples(text) {
  const out = [];
  let framework;
  let block;
  let lines = [];
  let norun = false;
  text.split('\n').forEach((line, i) => {
    if (block) {
      if (line === '```') {
        if (block.lang === 'js' && !block.norun) out.push({ framework, code: lines.join('\n'), line: block.line });
        else if (block.lang === 'text' && out.length && out.at(-1).expected === undefined && out.at(-1).framework === framework) out.at(-1).expected = lines.join('\n');
        block = undefined;
      } else {
        lines.push(line);
      }
      return;
    }
    const h = /^## (.*)$/.exec(line);
    if (h) framework = Object.entries(SECTIONS).find(([title]) => h[1].startsWith(title))?.[1];
    const f = /^```(\w+)$/.exec(line);
    if (f && framework) {
      block = { lang: f[1], line: i + 1, norun };
      lines = [];
    }
    if (line.trim() !== '') norun = line.trim() === '<!-- norun -->';
  });
  return out;
}

// The output as the docs show it: <time> there stands for an ISO 8601 UTC
// time (a replay's "already ran at"), which differs from run to run.
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const sameOutput = (got, expected) => got.replace(TIME, '<time>') === expected;

const found = examples(fs.readFileSync(docs, 'utf8'));
const counts = {};
for (const fw of Object.values(SECTIONS)) {
  const mine = found.filter((e) => e.framework === fw);
  if (!ready.includes(fw)) { console.log(`SKIP integrations.docs:${fw}: the framework is not installed`); continue; }
  tally.report(mine.length > 0, `${fw}:examples`, `no js example in the ${fw} section of ${docs}`);
  for (const e of mine) {
    counts[fw] = (counts[fw] || 0) + 1;
    const name = `${fw}:example-${counts[fw]} (line ${e.line})`;
    const dir = fs.mkdtempSync(path.join(process.cwd(), 'doc-example-'));
    fs.writeFileSync(path.join(dir, 'example.mjs'), `${e.code}\n`);
    let got;
    try {
      got = execFileSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      got = `exit ${err.status}: ${err.stdout || ''}${err.stderr || ''}`;
    }
    fs.rmSync(dir, { recursive: true, force: true });
    if (e.expected === undefined) tally.report(false, name, 'no ```text block with its output follows it');
    else tally.report(sameOutput(got, `${e.expected}\n`), name, `printed ${JSON.stringify(got)}, the docs say ${JSON.stringify(e.expected)}`);
  }
}
process.exit(tally.status());
