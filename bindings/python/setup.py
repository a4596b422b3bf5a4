"""Wheel build of sqlite-idempotency (metadata in pyproject.toml).

The wheel carries a native SQLite extension that Python loads with
sqlite3's load_extension, not a CPython extension module: it works with any
Python 3 interpreter but only on one platform. So the wheel is tagged
py3-none-<platform> (the platform of the build machine), never pure.

`make dist` builds it from a copy of this directory into which it has put
the built extension (idempotency.so, which links nothing but the C
library); building from the source tree alone is refused, since that wheel
would be missing the extension.
"""
import glob
import os
import sysconfig

from setuptools import Distribution, setup
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


class BinaryDistribution(Distribution):
    """Holds a native library: installed into platlib, the wheel not pure."""

    def has_ext_modules(self):
        return True


class platform_wheel(bdist_wheel):
    def get_tag(self):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return "py3", "none", plat

    def run(self):
        pkg = os.path.join(HERE, "sqlite_idempotency")
        if not [p for ext in ("so", "dylib", "dll") for p in glob.glob(os.path.join(pkg, "idempotency." + ext))]:
            raise SystemExit(f"setup.py: no built extension (idempotency.so) in {pkg}: "
                             "build the wheel with `make dist` from the project root")
        super().run()


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": platform_wheel})
