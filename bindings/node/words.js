'use strict';
// What the model reads on each decision of a guarded tool call, from the
// one table (words.json) that every adapter and Python's package speak
// from and docs/integrations.md shows.
//
//   say('replay', { tool: 'send_email', key, attempt: 1, at: 1796005624636 })
//   // 'send_email was not run again: this request is identical to a call that already ran at 2026-11-30T... (key ..., attempt 1), ...'
//
// {name} in a text is a field of the call, required unless the kind lists
// it under optional (then its fragment is written when the field is given,
// and left out when it is not). A string is written as it is, anything else
// as compact JSON; at and renewed_at (milliseconds since the epoch) are
// written as ISO 8601 UTC and as whole seconds ago (fields.now, default
// Date.now()), targets (a list of strings) joined by ", ". Fields a text
// does not name are ignored.
const words = require('./words.json');

const where = 'sqlite-idempotency: say';

const format = {
  iso8601: (name, v) => {
    if (!Number.isFinite(v)) throw new TypeError(`${where}: ${name} must be milliseconds since the epoch, got ${JSON.stringify(v)}`);
    return new Date(v).toISOString();
  },
  seconds_ago: (name, v, now) => {
    if (!Number.isFinite(v)) throw new TypeError(`${where}: ${name} must be milliseconds since the epoch, got ${JSON.stringify(v)}`);
    return String(Math.max(0, Math.floor((now - v) / 1000)));
  },
  list: (name, v) => {
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new TypeError(`${where}: ${name} must be a list of strings, got ${JSON.stringify(v)}`);
    return v.join(', ');
  },
};

function value(name, v, now) {
  const f = words.formats[name];
  if (f) return format[f](name, v, now);
  return typeof v === 'string' ? v : JSON.stringify(v);
}

// an empty list (no targets) is not given
const given = (v) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);

function fill(kind, template, fields, now, optional) {
  return template.replace(/\{([a-z_]+)\}/g, (_, name) => {
    if (Object.hasOwn(words.constants, name)) return words.constants[name];
    if (optional && Object.hasOwn(optional, name)) {
      return given(fields[name]) ? fill(kind, optional[name], fields, now, null) : '';
    }
    if (!given(fields[name])) {
      throw new TypeError(`${where}: the ${kind} text needs the field ${name}, got ${fields[name] === null ? 'null' : 'undefined'}`);
    }
    return value(name, fields[name], now);
  });
}

// The text of kind (a key of words.json's kinds) for fields.
function say(kind, fields = {}) {
  if (!Object.hasOwn(words.kinds, kind)) {
    throw new TypeError(`${where}: unknown kind ${JSON.stringify(kind)} (kinds are ${Object.keys(words.kinds).join(', ')})`);
  }
  if (fields === null || typeof fields !== 'object') throw new TypeError(`${where}: fields must be an object, got ${fields === null ? 'null' : typeof fields}`);
  const entry = words.kinds[kind];
  const now = given(fields.now) ? fields.now : Date.now();
  return fill(kind, entry.text, fields, now, entry.optional);
}

// The words of a reason every adapter shares (words.json's reasons), for
// the reason field of a text.
function because(name, fields = {}) {
  if (!Object.hasOwn(words.reasons, name)) {
    throw new TypeError(`${where}: unknown reason ${JSON.stringify(name)} (reasons are ${Object.keys(words.reasons).join(', ')})`);
  }
  return fill(`${name} reason`, words.reasons[name], fields, Date.now(), null);
}

// The words of a conflict decision (its held_by's status picks the kind:
// conflict_succeeded, conflict_unknown, conflict_claimed) for the tool
// name; { kind, text }, and result, the holder's result when it succeeded
// (what the model reads after the words).
function sayConflict(tool, decision) {
  const held = decision.held_by || {};
  const kind = held.status === 'succeeded' ? 'conflict_succeeded' : held.status === 'unknown' ? 'conflict_unknown' : 'conflict_claimed';
  const text = say(kind, { tool, key: decision.key, target: decision.target, held_tool: held.tool, held_key: held.key, at: held.updated_at });
  return kind === 'conflict_succeeded' ? { kind, text, result: held.result === undefined ? null : held.result } : { kind, text };
}

module.exports = { say, because, sayConflict, words, UNKNOWN: words.constants.unknown_sentence };
