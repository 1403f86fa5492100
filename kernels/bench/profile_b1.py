"""Run one decode shape a few times, for `ncu` (Nsight Compute) to profile our two kernels.

    ncu --clock-control none --kernel-name regex:_sparse_mla --launch-skip 4 --launch-count 2 \\
        --section SpeedOfLight --section WarpStateStats python kernels/bench/profile_b1.py
"""

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sglang_sm120_kernels import sparse_mla_decode as smd
from sglang_sm120_kernels import testing

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--heads", type=int, default=16)
ap.add_argument("--topk", type=int, default=512)
ap.add_argument("--extra", type=int, default=0)
ap.add_argument("--config", default="{}", help="DecodeConfig fields as a Python dict literal")
ns = ap.parse_args()
config = dataclasses.replace(smd.DEFAULT_CONFIG, **eval(ns.config))  # a developer's tool: trusted input
case = testing.make_case(ns.batch, ns.heads, ns.topk, seed=1, extra_topk=ns.extra, lengths="full", invalid_frac=0.0,
                         num_pages=64, extra_num_pages=64).to("cuda")  # fmt: skip
for _ in range(4):
    smd.sparse_mla_decode(*case.args(), config=config)
torch.cuda.synchronize()
