-- idem_version(): the extension's version, as text "major.minor.patch".
-- Checks are rows (id, ok); ok must be the integer 1.

SELECT 'version-is-text', typeof(idem_version()) = 'text';
SELECT 'version-is-semver',
       idem_version() GLOB '[0-9]*.[0-9]*.[0-9]*'
   AND idem_version() NOT GLOB '*[^0-9.]*'
   AND length(idem_version()) - length(replace(idem_version(), '.', '')) = 2;
SELECT 'version-matches-header', idem_version() = '0.1.0';
SELECT 'version-deterministic', idem_version() = idem_version();
SELECT 'version-takes-no-argument',
       errmsg('SELECT idem_version(1)') = 'wrong number of arguments to function idem_version()';
SELECT 'version-wrong-arity-code', errcode('SELECT idem_version(1)') = 1;

-- Being DETERMINISTIC, it may appear in a CHECK and an index expression.
CREATE TABLE v(x CHECK (x = idem_version()));
INSERT INTO v VALUES (idem_version());
SELECT 'version-in-check', errmsg('INSERT INTO v VALUES (''0.0.0'')') GLOB 'CHECK constraint failed: *';
