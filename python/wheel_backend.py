"""The build backend of `pip install .` (PEP 517, named in pyproject.toml).

It packs the deferkv package into a wheel with the standard library only, so it installs
offline with any CPython >= 3.9 on the machine, with or without build isolation: no
setuptools or wheel package is needed (setuptools before 70.1 cannot build a wheel
without the `wheel` package, which a pyenv Python often lacks).

The wheel holds the Python files of python/deferkv, the compiled extension, and the
embedded models and evaluation data under deferkv/share (the package points DEFERKV_HOME
there, so an installed deferkv needs no checkout). The extension is taken from an existing
build when one was made for this interpreter (build/python/deferkv/_deferkv<suffix>, the
suffix naming the Python version and ABI), so CI's build is reused and nothing is
compiled; otherwise CMake builds the module alone for this interpreter in
build/python-<tag> (the whole library: minutes).
"""
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "deferkv"


def _version() -> str:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        match = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.MULTILINE)
    if not match:
        raise RuntimeError("pyproject.toml has no version")
    return match.group(1)


def _tag() -> str:
    if sys.implementation.name != "cpython":
        raise RuntimeError(f"deferkv's extension is built for CPython, not {sys.implementation.name}")
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{python}-{python}{sys.abiflags}-{platform}"


def _extension() -> str:
    """The compiled module for this interpreter, built when there is none."""
    name = "_deferkv" + sysconfig.get_config_var("EXT_SUFFIX")
    existing = os.path.join(ROOT, "build", "python", NAME, name)
    if os.path.isfile(existing):
        return existing
    build = os.path.join(ROOT, "build", "python-" + _tag().split("-")[0])
    built = os.path.join(build, "python", NAME, name)
    if not os.path.isfile(built):
        print(f"deferkv: no {name} in build/python: building the module with CMake in {build}", file=sys.stderr)
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DDEFERKV_BUILD_PYTHON=ON", "-DDEFERKV_BUILD_TESTS=OFF", "-DDEFERKV_BUILD_BENCH=OFF",
                        "-DPython3_EXECUTABLE=" + sys.executable], check=True)
        subprocess.run(["cmake", "--build", build, "--target", "deferkv_python"], check=True)
    if not os.path.isfile(built):
        raise RuntimeError(f"the CMake build made no {built}")
    return built


def _files():
    """(path in the wheel, path on disk) of everything the package holds."""
    package = os.path.join(ROOT, "python", NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith((".py", ".pyi")) or name == "py.typed":
            yield f"{NAME}/{name}", os.path.join(package, name)
    extension = _extension()
    yield f"{NAME}/{os.path.basename(extension)}", extension
    for folder in ("models", "data"):
        for directory, _, names in sorted(os.walk(os.path.join(ROOT, folder))):
            for name in sorted(names):
                path = os.path.join(directory, name)
                yield f"{NAME}/share/" + os.path.relpath(path, ROOT).replace(os.sep, "/"), path


def _metadata(version: str) -> str:
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Long-context LLM inference on the CPU with pluggable KV-cache compression\n"
            "Requires-Python: >=3.9\n")


def _record_line(path: str, data: bytes) -> list:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path, f"sha256={digest}", str(len(data))]


# PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version, tag = _version(), _tag()
    dist_info = f"{NAME}-{version}.dist-info"
    wheel_name = f"{NAME}-{version}-{tag}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        def add(path: str, data: bytes) -> None:
            wheel.writestr(path, data)
            records.append(_record_line(path, data))

        for path, source in _files():
            with open(source, "rb") as f:
                add(path, f.read())
        add(f"{dist_info}/METADATA", _metadata(version).encode())
        add(f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: deferkv wheel_backend\n"
                                   f"Root-Is-Purelib: false\nTag: {tag}\n").encode())
        add(f"{dist_info}/top_level.txt", f"{NAME}\n".encode())
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows(records)
        writer.writerow([f"{dist_info}/RECORD", "", ""])
        wheel.writestr(f"{dist_info}/RECORD", record.getvalue())
    return wheel_name
