"""Builds aerie's extension (aerie._aerie) with the repository's own CMake and ships it with libaerie.so.

`pip install --no-build-isolation ./python` runs this: CMake configures the repository (its parent folder)
into build-python/ there, without tests or benches, and builds the one target aerie_python, which
pulls in libaerie.so (the C API) and the engine's libraries. The extension finds libaerie.so beside itself
($ORIGIN). AERIE_BUILD_DIR=<a configured build folder> reuses that build instead (no second compile of
the engine); AERIE_BUILD_JOBS sets the parallel jobs (default: the CPU count).

A CMake build tree's python/ folder holds a copy of this file beside the built package: installed from
there (`pip install --no-build-isolation build/python`) it ships what that build made, compiling nothing.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        built = list((HERE / "aerie").glob("_aerie*.so"))
        if built:  # a CMake build tree's package: the extension and libaerie.so are there already
            self._ship(ext, built[0], HERE / "aerie" / "libaerie.so")
            return
        if not (ROOT / "CMakeLists.txt").exists() or not (ROOT / "include" / "aerie.h").exists():
            raise RuntimeError(f"aerie's sources are not beside {HERE}: install from the repository's python/ folder")
        # build-python/ beside build/: kept between installs (a second one rebuilds what changed), and at the
        # same depth as build/, so that ccache (CCACHE_BASEDIR) finds objects that build compiled.
        build_dir = Path(os.environ.get("AERIE_BUILD_DIR") or ROOT / "build-python")
        if not (build_dir / "CMakeCache.txt").exists():
            self._cmake("-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release", "-DAERIE_BUILD_TESTS=OFF",
                        "-DAERIE_BUILD_BENCH=OFF", "-DAERIE_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}")
        jobs = os.environ.get("AERIE_BUILD_JOBS") or str(os.cpu_count() or 1)
        self._cmake("--build", str(build_dir), "--target", "aerie_python", "-j", jobs)
        built = list((build_dir / "python" / "aerie").glob("_aerie*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one extension in {build_dir / 'python' / 'aerie'}, found {built}")
        self._ship(ext, built[0], build_dir / "src" / "capi" / "libaerie.so")

    def _ship(self, ext, extension, library):
        """Copies the extension and libaerie.so (which it finds beside itself) into the package."""
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(extension, target.parent / extension.name)
        shutil.copy2(library, target.parent / "libaerie.so")

    @staticmethod
    def _cmake(*args):
        print("cmake", " ".join(args), flush=True)
        subprocess.run(["cmake", *args], check=True)


setup(ext_modules=[Extension("aerie._aerie", sources=[])], cmdclass={"build_ext": CMakeBuild})
