"""tests/python/checks.py: the PASS/FAIL/SKIP lines of a Python test program.

    checks = Checks("packages.python")
    checks.report(ok, "name", "why it failed")
    return checks.status()          # the exit status: 1 when a check failed
"""


class Checks:
    def __init__(self, prefix):
        self.prefix = prefix
        self.failures = 0

    def report(self, ok, name, why=""):
        """Prints ``PASS prefix:name`` or ``FAIL prefix:name: why`` (on one line)."""
        if ok:
            print(f"PASS {self.prefix}:{name}", flush=True)
        else:
            self.failures += 1
            print(f"FAIL {self.prefix}:{name}: " + str(why).replace("\n", " "), flush=True)

    def check_eq(self, name, got, want):
        self.report(got == want, name, f"got {got!r}, want {want!r}")

    def skip(self, name, why):
        """Prints ``SKIP prefix:name: why``."""
        print(f"SKIP {self.prefix}:{name}: {why}", flush=True)

    def status(self):
        return 1 if self.failures else 0
