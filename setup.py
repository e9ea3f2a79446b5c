"""Installs build/python/deferkv, the package CMake builds (see pyproject.toml)."""
import glob
import os
import subprocess

from setuptools import setup
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join("build", "python", "deferkv")


def build_with_cmake() -> None:
    """The README's build, for the Python module only, when it was not run before."""
    if glob.glob(os.path.join(ROOT, PACKAGE, "_deferkv*.so")):
        return
    subprocess.run(["cmake", "-S", ROOT, "-B", os.path.join(ROOT, "build"), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DDEFERKV_BUILD_PYTHON=ON"], check=True)
    subprocess.run(["cmake", "--build", os.path.join(ROOT, "build"), "--target", "deferkv_python"], check=True)


class PlatformDistribution(Distribution):
    """The package holds a compiled extension: the wheel is for this platform only."""

    def has_ext_modules(self) -> bool:
        return True


build_with_cmake()
setup(
    packages=["deferkv"],
    package_dir={"deferkv": PACKAGE},
    package_data={"deferkv": ["_deferkv*.so", "*.pyi", "py.typed"]},
    distclass=PlatformDistribution,
    # setuptools' own scratch folder, apart from CMake's files in build/.
    options={"build": {"build_base": os.path.join("build", "setuptools")}, "egg_info": {"egg_base": "build"}},
)
