"""Ships sglang_sm120_kernels_overlay.pth at the top of site-packages, where Python runs it at start.

setuptools has no declarative way to put a file beside the packages, so build_py copies it into
the build tree's root; it then lands in the wheel's purelib root.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "sglang_sm120_kernels_overlay.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        self.copy_file(os.path.join(here, PTH), os.path.join(self.build_lib, PTH), preserve_mode=0)


setup(cmdclass={"build_py": BuildPyWithPth})
