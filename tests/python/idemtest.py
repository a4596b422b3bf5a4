"""tests/python/idemtest.py: shared by the Python test programs
(tests/python/test_copies.py, tests/python/test_guard.py,
tests/python/test_python.py): check lines, the extension loading, one
value of a query."""
import os

from checks import Checks  # noqa: F401 (re-exported: one Checks for every test)


def load_ext(db, ext):
    """Loads the extension at path ext into db; loading stays disabled after."""
    db.enable_load_extension(True)
    try:
        db.load_extension(os.path.abspath(ext))
    finally:
        db.enable_load_extension(False)


def one(db, sql, args=()):
    """The first column of the first row, or None when there is no row."""
    row = db.execute(sql, args).fetchone()
    return row[0] if row else None


def resolve_ext():
    """(path, None): the extension to load, $EXT (default
    build/idempotency.so), as an absolute path; or (None, why) to skip. A
    sanitizer build under build/asan cannot be loaded by an uninstrumented
    python or sqlite3 shell: build/idempotency.so is used instead when it
    exists."""
    ext = os.environ.get("EXT") or "build/idempotency.so"
    if "build/asan" in ext.replace(os.sep, "/"):
        plain = "build/idempotency.so"
        if not os.path.exists(plain):
            return None, (f"$EXT={ext} is a sanitizer build that an uninstrumented python or "
                          f"shell cannot load, and the plain build {plain} is absent (run make)")
        ext = plain
    for cand in (ext, ext + ".so", ext + ".dylib"):
        if os.path.exists(cand):
            return os.path.abspath(cand), None
    return None, f"the extension {ext} is not built (run make)"
