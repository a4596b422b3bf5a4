"""The checks a registry makes of a wheel, and the one behind its tag.

    python3 bindings/check-wheel.py WHEEL...     (make dist runs it on each wheel)

For each wheel: the file name parses (name-version-python-abi-platform.whl,
the name normalised), every platform tag is one PyPI accepts
(manylinux_X_Y_ARCH or its alias manylinux2014_ARCH; never linux_ARCH),
the dist-info directory matches, WHEEL says Wheel-Version 1.0, not purelib,
and lists exactly the tags of the file name, METADATA names the project and
version, RECORD lists every file once with its sha256 and size (RECORD
itself unhashed) and nothing else; then each extension inside is an ELF
file for the tag's machine whose glibc symbol versions the tag allows
(bindings/check-lib.sh, with the oldest glibc among the tags). Prints one
line per wheel; on the first problem prints it and exits 1.
"""
import base64
import email.parser
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[A-Za-z0-9_.!+]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
MANYLINUX = re.compile(r"^manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>x86_64|aarch64)$")
ALIASES = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
PLATFORM = {"x86_64": "linux-x64", "aarch64": "linux-arm64"}


class Bad(Exception):
    pass


def platform_tags(plat):
    """(arch, (major, minor)) for each tag; Bad for one PyPI refuses."""
    out = []
    for tag in plat.split("."):
        m = MANYLINUX.match(tag)
        if m:
            out.append((m["arch"], (int(m["major"]), int(m["minor"]))))
            continue
        alias, _, arch = tag.partition("_")
        if alias in ALIASES and arch in PLATFORM:
            out.append((arch, ALIASES[alias]))
            continue
        raise Bad(f"platform tag {tag} is not one PyPI accepts for Linux "
                  "(manylinux_X_Y_x86_64, manylinux_X_Y_aarch64, or the alias manylinux2014_ARCH)")
    return out


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check(path):
    base = os.path.basename(path)
    m = NAME.match(base)
    if not m:
        raise Bad("the file name is not NAME-VERSION-PYTHON-ABI-PLATFORM.whl")
    name, version = m["name"], m["version"]
    if name != re.sub(r"[-_.]+", "_", name).lower():
        raise Bad(f"the name {name} is not normalised (lowercase, runs of -_. as _)")
    tags = platform_tags(m["plat"])
    arches = {a for a, _ in tags}
    if len(arches) != 1:
        raise Bad(f"the platform tags name more than one machine: {', '.join(sorted(arches))}")
    arch = arches.pop()
    glibc = min(v for _, v in tags)
    want_tags = {f"{p}-{a}-{t}" for p in m["py"].split(".") for a in m["abi"].split(".") for t in m["plat"].split(".")}

    with zipfile.ZipFile(path) as z:
        names = [i.filename for i in z.infolist() if not i.is_dir()]
        info = f"{name}-{version}.dist-info"
        for need in ("WHEEL", "METADATA", "RECORD"):
            if f"{info}/{need}" not in names:
                raise Bad(f"no {info}/{need}")
        wheel = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode())
        if wheel.get("Wheel-Version") != "1.0":
            raise Bad(f"WHEEL says Wheel-Version {wheel.get('Wheel-Version')}, not 1.0")
        if wheel.get("Root-Is-Purelib") != "false":
            raise Bad(f"WHEEL says Root-Is-Purelib {wheel.get('Root-Is-Purelib')}; a wheel with a native library is not pure")
        got_tags = set(wheel.get_all("Tag") or [])
        if got_tags != want_tags:
            raise Bad(f"WHEEL lists the tags {', '.join(sorted(got_tags))}; the file name says {', '.join(sorted(want_tags))}")
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        if re.sub(r"[-_.]+", "_", meta.get("Name", "")).lower() != name or meta.get("Version") != version:
            raise Bad(f"METADATA says {meta.get('Name')} {meta.get('Version')}, the file name {name} {version}")

        record = {}
        for line in z.read(f"{info}/RECORD").decode().splitlines():
            if not line:
                continue
            file, digest, size = line.rsplit(",", 2)
            if file in record:
                raise Bad(f"RECORD lists {file} twice")
            record[file] = (digest, size)
        for file in names:
            if file not in record:
                raise Bad(f"RECORD does not list {file}")
            digest, size = record.pop(file)
            if file == f"{info}/RECORD":
                continue
            data = z.read(file)
            if digest != record_hash(data) or size != str(len(data)):
                raise Bad(f"RECORD says {file} is {digest} ({size} bytes); it is {record_hash(data)} ({len(data)} bytes)")
        if record:
            raise Bad(f"RECORD lists {', '.join(sorted(record))}, which the wheel does not hold")

        libs = [f for f in names if re.search(r"\.so(\.|$)", f)]
        if not libs:
            raise Bad("the wheel holds no shared library, yet its tag is a platform's")
        with tempfile.TemporaryDirectory() as tmp:
            for lib in libs:
                file = os.path.join(tmp, os.path.basename(lib))
                with open(file, "wb") as f:
                    f.write(z.read(lib))
                r = subprocess.run(["bash", os.path.join(HERE, "check-lib.sh"), PLATFORM[arch], file,
                                    f"{glibc[0]}.{glibc[1]}"], capture_output=True, text=True)
                if r.returncode != 0:
                    raise Bad(f"{lib}: {r.stderr.strip().replace(file, os.path.basename(lib))}")
    return f"{len(names)} files, RECORD verified, tags {', '.join(sorted(want_tags))}, {', '.join(libs)} for {arch} within glibc {glibc[0]}.{glibc[1]}"


def main(argv):
    if not argv:
        print("usage: check-wheel.py WHEEL...", file=sys.stderr)
        return 2
    for path in argv:
        try:
            print(f"check-wheel: {os.path.basename(path)}: {check(path)}")
        except (Bad, zipfile.BadZipFile, OSError, ValueError) as e:
            print(f"check-wheel: {os.path.basename(path)}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
