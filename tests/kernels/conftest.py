"""Kernel tests: on a CUDA machine they run on the GPU; elsewhere through Triton's interpreter.

TRITON_INTERPRET must be set before any Triton kernel is defined, so it is set here, at collection,
and only when no CUDA device is present. The kernel package is imported from the source tree.
"""

import os
import sys
from pathlib import Path

import pytest

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
sys.path.insert(0, str(KERNELS_DIR))

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # the hook tests need no torch
    HAS_CUDA = False

if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> str:
    return "cuda" if HAS_CUDA else "cpu"


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)
