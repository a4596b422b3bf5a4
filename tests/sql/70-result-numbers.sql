-- sqltest: encodings UTF-8 UTF-16le UTF-16be
-- Results and errors keep their numbers (docs/design.md, "Stored results and errors"): idem_settle and
-- idem_resolve store a detail as valid JSON in its stored form (members
-- sorted, no whitespace, strings escaped as JCS does) with every number
-- exactly as written, and a replay answers that text. The I-JSON integer
-- rule (2^53) is for arguments only.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
SELECT 'claim-k1', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'claim-k2', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k2'), '$.decision') = 'admitted';
SELECT 'claim-k3', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k3'), '$.decision') = 'admitted';
SELECT 'claim-k4', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k4'), '$.decision') = 'admitted';
SELECT 'claim-k5', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k5'), '$.decision') = 'admitted';
SELECT 'claim-k6', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k6'), '$.decision') = 'admitted';
SELECT 'claim-k7', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k7'), '$.decision') = 'admitted';
SELECT 'claim-k8', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k8'), '$.decision') = 'admitted';
SELECT 'claim-k9', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.decision') = 'admitted';
SELECT 'claim-k10', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k10'), '$.decision') = 'admitted';
SELECT 'claim-k11', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k11'), '$.decision') = 'admitted';
SELECT 'claim-k12', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k12'), '$.decision') = 'admitted';
SELECT 'claim-k13', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k13'), '$.decision') = 'admitted';
CREATE TEMP VIEW tok(name, t) AS SELECT "key", token FROM L;

-- ---------------------------------------------------------------- a 64-bit id, settled and replayed
SELECT 'id-settle', idem_settle('L', (SELECT t FROM tok WHERE name = 'k1'), 'succeeded', '{"id": 1234567890123456789}')
       = '{"key":"k1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'id-stored', (SELECT result FROM L_rows WHERE "key" = 'k1') = '{"id":1234567890123456789}';
SELECT 'id-select', (SELECT result FROM L WHERE tenant = 't' AND "key" = 'k1') = '{"id":1234567890123456789}';
SELECT 'id-replay', idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1')
       = '{"decision":"replay","idempotent":true,"key":"k1","status":"succeeded","attempt":1,"settled_at":1700000000000,"result":{"id":1234567890123456789},"members":[]}';
SELECT 'id-replay-again', idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1')
       = '{"decision":"replay","idempotent":true,"key":"k1","status":"succeeded","attempt":1,"settled_at":1700000000000,"result":{"id":1234567890123456789},"members":[]}';

-- ---------------------------------------------------------------- the int64 range and beyond
SELECT 'int64-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k2'), 'succeeded',
         '[9223372036854775807, -9223372036854775808, 18446744073709551616, -1000000000000000000000000000000]'), '$.status') = 'succeeded';
SELECT 'int64-stored', (SELECT result FROM L_rows WHERE "key" = 'k2')
       = '[9223372036854775807,-9223372036854775808,18446744073709551616,-1000000000000000000000000000000]';
SELECT 'int64-replay', instr(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k2'),
       '"result":[9223372036854775807,-9223372036854775808,18446744073709551616,-1000000000000000000000000000000]') > 0;

-- ---------------------------------------------------------------- 1.0 is not 1, 0.1 keeps its digits, -0 stays
SELECT 'forms-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k3'), 'succeeded',
         '{"one":1,"one_point_zero":1.0,"tenth":0.1,"tenth_long":0.1000000000000000055511151231257827,"minus_zero":-0,"minus_zero_point":-0.0,"exp":1E+2,"exp_small":2.50e-3}'), '$.status') = 'succeeded';
SELECT 'forms-stored', (SELECT result FROM L_rows WHERE "key" = 'k3')
       = '{"exp":1E+2,"exp_small":2.50e-3,"minus_zero":-0,"minus_zero_point":-0.0,"one":1,"one_point_zero":1.0,"tenth":0.1,"tenth_long":0.1000000000000000055511151231257827}';
SELECT 'forms-replay', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k3'), '$.result')
       = (SELECT result FROM L_rows WHERE "key" = 'k3');

-- ---------------------------------------------------------------- beyond a double: kept, not refused
-- JSON (RFC 8259) has no range; a double reader sees an infinity or zero,
-- the stored text keeps what the target sent.
SELECT 'overflow-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k4'), 'succeeded',
         '{"big":1e400,"neg":-1E+400,"tiny":1e-400}'), '$.status') = 'succeeded';
SELECT 'overflow-stored', (SELECT result FROM L_rows WHERE "key" = 'k4') = '{"big":1e400,"neg":-1E+400,"tiny":1e-400}';
SELECT 'overflow-replay', instr(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k4'), '"result":{"big":1e400,"neg":-1E+400,"tiny":1e-400}') > 0;

-- ---------------------------------------------------------------- the four numbers of docs/reference.md
-- ("Numbers in a result or an error"): stored and replayed as written
SELECT 'doc-numbers-settle', idem_settle('L', (SELECT t FROM tok WHERE name = 'k13'), 'succeeded', '[1e400, 1e-400, 9007199254740993, 2.50]')
       = '{"key":"k13","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'doc-numbers-stored', (SELECT result FROM L_rows WHERE "key" = 'k13') = '[1e400,1e-400,9007199254740993,2.50]';
SELECT 'doc-numbers-replay', idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k13')
       = '{"decision":"replay","idempotent":true,"key":"k13","status":"succeeded","attempt":1,"settled_at":1700000000000,"result":[1e400,1e-400,9007199254740993,2.50],"members":[]}';
-- each of them refused in args (docs/keys.md), kept in an error
SELECT 'doc-numbers-args-' || n, errmsg('SELECT idem_key(''t'', ''c'', ''send'', ''[' || n || ']'')') = want
  FROM (SELECT '1e400' AS n, 'idem_key: args: number 1e400 at byte 1 overflows a double' AS want
        UNION ALL SELECT '1e-400', 'idem_key: args: number 1e-400 at byte 1 underflows to zero'
        UNION ALL SELECT '9007199254740993', 'idem_key: args: integer 9007199254740993 at byte 1 is beyond 2^53-1 and would lose precision; send it as a string');
SELECT 'doc-numbers-args-2.50-is-2.5', idem_canonical('[2.50]') = '[2.5]';

-- ---------------------------------------------------------------- the structure is canonical
SELECT 'structure-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k5'), 'succeeded',
         ' { "b" : "\u0041\u00e9" , "a" : [ 1.50 , { "z" : null, "y" : true } ] , "\u0063": "\/" } '), '$.status') = 'succeeded';
SELECT 'structure-stored', (SELECT result FROM L_rows WHERE "key" = 'k5') = '{"a":[1.50,{"y":true,"z":null}],"b":"Aé","c":"/"}';

-- ---------------------------------------------------------------- errors: failed, unknown, resolve
SELECT 'failed-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k6'), 'failed',
         '{"code":4001, "order_id":1234567890123456789}'), '$.status') = 'failed';
SELECT 'failed-stored', (SELECT error FROM L_rows WHERE "key" = 'k6') = '{"code":4001,"order_id":1234567890123456789}';
SELECT 'failed-replay', idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k6')
       = '{"decision":"replay","idempotent":true,"key":"k6","status":"failed","attempt":1,"settled_at":1700000000000,"error":{"code":4001,"order_id":1234567890123456789},"members":[]}';
SELECT 'unknown-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k7'), 'unknown',
         '{"request_id":9223372036854775807}'), '$.status') = 'unknown';
SELECT 'unknown-stored', (SELECT error FROM L_rows WHERE "key" = 'k7') = '{"request_id":9223372036854775807}';
SELECT 'resolve-succeeded', idem_resolve('L', 't', 'k7', 'succeeded', '{"id":-9223372036854775808,"at":1.0}')
       = '{"key":"k7","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'resolve-stored', (SELECT result FROM L_rows WHERE "key" = 'k7') = '{"at":1.0,"id":-9223372036854775808}';
SELECT 'resolve-replay', instr(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k7'), '"result":{"at":1.0,"id":-9223372036854775808}') > 0;
SELECT 'unknown-k8', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k8'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'resolve-failed', json_extract(idem_resolve('L', 't', 'k8', 'failed', '{"id":1234567890123456789}'), '$.status') = 'failed';
SELECT 'resolve-failed-stored', (SELECT error FROM L_rows WHERE "key" = 'k8') = '{"id":1234567890123456789}';

-- ---------------------------------------------------------------- a release: "sent":false still first
SELECT 'release-settle', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k9'), 'released',
         '{"attempt_id":1234567890123456789,"at":1.0,"sent":false,"z":-0}'), '$.status') = 'released';
SELECT 'release-stored', (SELECT error FROM L_rows WHERE "key" = 'k9') = '{"sent":false,"at":1.0,"attempt_id":1234567890123456789,"z":-0}';
SELECT 'release-readmits', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.decision') = 'admitted';
SELECT 'unknown-k10', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'k10'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'resolve-released', json_extract(idem_resolve('L', 't', 'k10', 'released', '{"n":1e400,"sent":false}'), '$.status') = 'released';
SELECT 'resolve-released-stored', (SELECT error FROM L_rows WHERE "key" = 'k10') = '{"sent":false,"n":1e400}';
SELECT 'release-needs-sent-false', errmsg('SELECT idem_settle(''L'', (SELECT t FROM tok WHERE name = ''k11''), ''released'', ''{"sent":0}'')')
       = 'idem_settle: releasing external key "k11" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'release-refused-wrote-nothing', (SELECT status || ',' || quote(error) FROM L_rows WHERE "key" = 'k11') = 'claimed,NULL';
-- a plain-SQL release is refused whatever its detail
SELECT 'plain-release-refused', errmsg('UPDATE L_rows SET status = ''released'', error = ''{"at":1.0,"sent":false}'' WHERE "key" = ''k11''')
       = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'plain-release-wrote-nothing', (SELECT status FROM L_rows WHERE "key" = 'k11') = 'claimed';

-- ---------------------------------------------------------------- still refused: not JSON, exact messages
CREATE TEMP TABLE bad(name PRIMARY KEY, detail, want);
INSERT INTO bad VALUES
  ('leading-zero', '01', 'idem_settle: detail: trailing bytes after the JSON value at byte 1'),
  ('minus-leading-zero', '[-01]', 'idem_settle: detail: not valid JSON: unexpected byte 0x31 at byte 3, expected '','' or '']'''),
  ('no-integer-part', '.5', 'idem_settle: detail: not valid JSON: unexpected byte 0x2e at byte 0, expected a JSON value'),
  ('no-fraction-digit', '1.', 'idem_settle: detail: not valid JSON: unexpected end of input at byte 2, expected a digit after the decimal point'),
  ('no-exponent-digit', '[1e+]', 'idem_settle: detail: not valid JSON: unexpected byte 0x5d at byte 4, expected a digit in the exponent'),
  ('plus-sign', '+1', 'idem_settle: detail: not valid JSON: unexpected byte 0x2b at byte 0, expected a JSON value'),
  ('nan', '{"x":NaN}', 'idem_settle: detail: not valid JSON: unexpected byte 0x4e at byte 5, expected a JSON value'),
  ('infinity', 'Infinity', 'idem_settle: detail: not valid JSON: unexpected byte 0x49 at byte 0, expected a JSON value'),
  ('hex', '0x10', 'idem_settle: detail: trailing bytes after the JSON value at byte 1'),
  ('duplicate', '{"id":1,"id":1}', 'idem_settle: detail: duplicate member name "id" in the object at byte 0'),
  ('lone-surrogate', '["\ud800"]', 'idem_settle: detail: lone surrogate \ud800 at byte 2'),
  ('trailing-comma', '[1,]', 'idem_settle: detail: not valid JSON: unexpected byte 0x5d at byte 3, expected a JSON value');
SELECT 'refused-' || name, errmsg('SELECT idem_settle(''L'', (SELECT t FROM tok WHERE name = ''k12''), ''succeeded'', ' || quote(detail) || ')') = want
  FROM bad ORDER BY name;
SELECT 'refused-wrote-nothing', (SELECT status || ',' || quote(result) FROM L_rows WHERE "key" = 'k12') = 'claimed,NULL';
SELECT 'refused-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''k8'', ''succeeded'', ''[01]'')')
       = 'idem_resolve: detail: not valid JSON: unexpected byte 0x31 at byte 2, expected '','' or '']''';
SELECT 'refused-depth', errmsg('SELECT idem_settle(''L'', (SELECT t FROM tok WHERE name = ''k12''), ''succeeded'', ''' || replace(printf('%257c', ' '), ' ', '[') || ''')')
       = 'idem_settle: detail: nesting deeper than 256 levels at byte 256';
SELECT 'refused-code', errcode('SELECT idem_settle(''L'', (SELECT t FROM tok WHERE name = ''k12''), ''succeeded'', ''01'')') = 1;
SELECT 'refused-still-claimed', (SELECT status FROM L_rows WHERE "key" = 'k12') = 'claimed';

-- ---------------------------------------------------------------- the size limit counts the stored form
CREATE VIRTUAL TABLE S USING idempotency(max_args_bytes=26);
SELECT 'small-claim', json_extract(idem_claim('S', 't', 'c', 'send', '{}', 'external', 's1'), '$.decision') = 'admitted';
-- 27 bytes in stored form (the whitespace does not count, every digit does)
SELECT 'small-over', errmsg('SELECT idem_settle(''S'', (SELECT token FROM S WHERE "key" = ''s1''), ''succeeded'', ''{ "id" : 12345678901234567890 }'')')
       = 'idem_settle: detail is 27 bytes in canonical form, over the ledger''s max_args_bytes of 26';
SELECT 'small-fits', json_extract(idem_settle('S', (SELECT token FROM S WHERE "key" = 's1'), 'succeeded', '{ "id" : 1234567890123456789 }'), '$.status') = 'succeeded';
SELECT 'small-stored', (SELECT result FROM S_rows WHERE "key" = 's1') = '{"id":1234567890123456789}';

-- ---------------------------------------------------------------- arguments keep the I-JSON rule
SELECT 'args-big-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{"id":1234567890123456789}'')')
       = 'idem_claim: args: integer 1234567890123456789 at byte 6 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'args-overflow-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{"n":1e400}'')')
       = 'idem_claim: args: number 1e400 at byte 5 overflows a double';
SELECT 'args-one-point-zero-is-one', idem_key('t', 'c', 'send', '{"n":1.0}') = idem_key('t', 'c', 'send', '{"n":1}');
SELECT 'canonical-keeps-rule', errmsg('SELECT idem_canonical(''[9223372036854775807]'')')
       = 'idem_canonical: json: integer 9223372036854775807 at byte 1 is beyond 2^53-1 and would lose precision; send it as a string';
