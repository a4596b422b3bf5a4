// docs/integrations.md's table of what the model reads, from words.json:
// checks that the block between the docs' words-table markers is the table
// words.json gives (a PASS/FAIL line), or with --write puts it there.
//
// Usage: node words_table.mjs WORDS_JSON DOCS_MD [--write]
import fs from 'node:fs';
import { Checks } from './checks.mjs';

const [wordsFile, docsFile, flag] = process.argv.slice(2);
const BEGIN = '<!-- words-table: generated from bindings/node/words.json by tests/js/words_table.mjs; edit words.json, then run it with --write -->';
const END = '<!-- /words-table -->';

// The table: one row per kind, its text as the model reads it, the fields in {braces}.
function table(words) {
  const code = (s) => `\`${s}\``;
  const expand = (s) => s.replace(/\{([a-z_]+)\}/g, (m, name) => words.constants[name] ?? m);
  const rows = Object.values(words.kinds).map((k) => {
    let text = k.text === '' ? 'nothing before it' : code(expand(k.text));
    for (const [name, fragment] of Object.entries(k.optional || {})) text += `; {${name}} is ${code(expand(fragment))} when known, else nothing`;
    if (k.then) text += `; then ${k.then}`;
    return `| ${k.decision} | ${k.when} | ${text} |`;
  });
  return [BEGIN, '| decision | when | what the model reads |', '|---|---|---|', ...rows, END].join('\n');
}

const checks = new Checks('integrations.words');
const words = JSON.parse(fs.readFileSync(wordsFile, 'utf8'));
const docs = fs.readFileSync(docsFile, 'utf8');
const want = table(words);
const at = docs.indexOf(BEGIN);
const end = docs.indexOf(END, at);
if (flag === '--write') {
  if (at < 0 || end < 0) throw new Error(`words_table: ${docsFile} has no block between ${BEGIN} and ${END}`);
  fs.writeFileSync(docsFile, docs.slice(0, at) + want + docs.slice(end + END.length));
} else {
  const got = at < 0 || end < 0 ? '(no words-table block)' : docs.slice(at, end + END.length);
  checks.report(got === want, 'docs-table', `${docsFile}'s table differs from the one ${wordsFile} gives (run node tests/js/words_table.mjs ${wordsFile} ${docsFile} --write): got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  process.exit(checks.status());
}
