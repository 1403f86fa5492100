"""The decode kernels compile for sm_120 (RTX PRO 6000 Blackwell) on a machine without a GPU.

Triton's whole pipeline runs for GPUTarget("cuda", 120, 32) with the ptxas Triton ships; the test
reads what ptxas reports and the SASS of the cubin. It runs in a subprocess because this test
session may have switched Triton to its interpreter.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Twenty seconds of Triton compiling: the second tier of `make test`, not the fast one.
pytestmark = pytest.mark.slow

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
SM120_MAX_SHARED_PER_BLOCK = 101376  # 99 KB opt-in, compute capability 12.0


def test_every_kernel_variant_builds_sm120_cubin_on_tensor_cores_without_spills():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run(
        [sys.executable, "-m", "sglang_sm120_kernels.aot", "--arch", "120", "--json"],
        check=False, cwd=KERNELS_DIR, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    reports = json.loads(res.stdout)
    partial = {"H16", "H16+extra", "H32", "H32+extra"}
    partial |= {v + "+last" for v in partial}
    merges = {"S16", "S32", "S64", "S64+steps"}  # all splits in one step of 16, 32, 64; or steps of 64
    assert {r["variant"] for r in reports} == partial | {v + "+qloop" for v in partial} | merges
    for r in reports:
        assert r["arch"] == "sm_120a", r
        assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, r
        assert r["triton_shared_bytes"] <= SM120_MAX_SHARED_PER_BLOCK, r
        if r["kernel"] == "_sparse_mla_partial_kernel":
            assert r["tensor_core_sass"] > 0, f"no HMMA in {r['variant']}: {r['sass_mnemonics']}"
