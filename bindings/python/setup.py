"""Wheel and sdist build of sqlite-idempotency (metadata in pyproject.toml).

The package carries a native SQLite extension that Python loads with
sqlite3's load_extension, not a CPython extension module: it works with any
Python 3 interpreter but only on one platform, so a wheel is tagged
py3-none-<platform>, never pure. `make dist` (bindings/dist.sh) builds from
staging copies of this directory, never from the source tree:

- a binary wheel: the staging copy holds the extension built for one
  platform (sqlite_idempotency/idempotency.so); `bdist_wheel --plat-name
  manylinux_2_17_x86_64.manylinux2014_x86_64` (or _aarch64) gives the tag,
  which bindings/check-lib.sh has justified by reading the library's glibc
  symbol versions;
- the source distribution: the staging copy holds the C sources under csrc/
  (the extension's, and xxHash's header, xxhash.h, with its licence); its
  install compiles them into sqlite_idempotency/idempotency.so with the C
  compiler and needs SQLite's headers (sqlite3ext.h), and says so when
  either is missing. The wheel it builds is tagged for the machine it is
  built on (py3-none-linux_x86_64, say): fine to install, not to upload.

A directory with neither (this source tree) builds nothing.
"""
import glob
import os
import shutil
import sys
import sysconfig
import tempfile

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist
from wheel.bdist_wheel import bdist_wheel

try:
    from setuptools.errors import CompileError
except ImportError:  # setuptools < 59
    from distutils.errors import CompileError

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "sqlite_idempotency")
CSRC = os.path.join(HERE, "csrc")
SUFFIX = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")

NO_COMPILER = ("setup.py: no C compiler: {cc!r} is not installed. Building sqlite-idempotency from "
               "source needs a C compiler and SQLite's headers (Debian/Ubuntu: apt-get install gcc "
               "libsqlite3-dev; Fedora: dnf install gcc sqlite-devel; Alpine: apk add gcc musl-dev "
               "sqlite-dev; macOS: xcode-select --install), or install a binary wheel")
NO_HEADERS = ("setup.py: SQLite's headers (sqlite3ext.h, sqlite3.h) are not installed, and building "
              "sqlite-idempotency from source needs them (Debian/Ubuntu: apt-get install "
              "libsqlite3-dev; Fedora: dnf install sqlite-devel; Alpine: apk add sqlite-dev; macOS: "
              "brew install sqlite, then CFLAGS=-I$(brew --prefix sqlite)/include), or install a "
              "binary wheel")


class BinaryDistribution(Distribution):
    """Holds a native library: installed into platlib, the wheel not pure."""

    def has_ext_modules(self):
        return True


class normalized_sdist(sdist):
    """The sdist's file and top directory named as PEP 625 spells them:
    sqlite_idempotency-<version>, not sqlite-idempotency-<version>."""

    def make_distribution(self):
        dist = self.distribution
        fullname = dist.get_fullname
        dist.get_fullname = lambda: f"sqlite_idempotency-{dist.get_version()}"
        try:
            super().make_distribution()
        finally:
            dist.get_fullname = fullname


class build_extension(build_ext):
    """Compiles the SQLite extension to sqlite_idempotency/idempotency.so.

    The file is named as SQLite expects (it adds the suffix and derives the
    entry point sqlite3_idempotency_init from the name), not as a CPython
    module (idempotency.cpython-311-x86_64-linux-gnu.so).
    """

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + SUFFIX

    def get_export_symbols(self, ext):
        return ["sqlite3_idempotency_init"]

    def build_extensions(self):
        self.check_toolchain()
        super().build_extensions()

    def check_toolchain(self):
        """Says what is missing before the first source fails on it."""
        cc = getattr(self.compiler, "compiler_so", None)
        if cc and shutil.which(cc[0]) is None:
            raise SystemExit(NO_COMPILER.format(cc=cc[0]))
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "probe.c")
            with open(probe, "w") as f:
                f.write("#include <sqlite3ext.h>\nSQLITE_EXTENSION_INIT1\n"
                        "int idem_probe(void) { return SQLITE_OK; }\n")
            try:
                self.compiler.compile([probe], output_dir=tmp)
            except CompileError:
                raise SystemExit(NO_HEADERS) from None


class platform_wheel(bdist_wheel):
    """py3-none-<platform>: --plat-name as given (the manylinux tags of
    make dist), else this machine's platform (an sdist built here)."""

    def get_tag(self):
        if self.plat_name_supplied:
            plat = self.plat_name
        else:
            plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return "py3", "none", plat

    def run(self):
        if not os.path.isdir(CSRC) and not glob.glob(os.path.join(PKG, "idempotency.*")):
            raise SystemExit(f"setup.py: no built extension (idempotency{SUFFIX}) in {PKG} and no "
                             "sources (csrc/): build the packages with `make dist` from the project "
                             "root, or install the source distribution it writes")
        super().run()


ext_modules = []
if os.path.isdir(CSRC):
    unix = sys.platform != "win32"
    ext_modules.append(Extension(
        "sqlite_idempotency.idempotency",
        sources=sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(CSRC, "ext", "*.c"))),
        include_dirs=[os.path.join("csrc", d) for d in ("include", "ext", "xxhash")],
        extra_compile_args=["-std=gnu11", "-fvisibility=hidden"] if unix else [],
        libraries=["m"] if sys.platform.startswith("linux") else [],
    ))

setup(
    distclass=BinaryDistribution,
    ext_modules=ext_modules,
    cmdclass={"bdist_wheel": platform_wheel, "build_ext": build_extension, "sdist": normalized_sdist},
)
