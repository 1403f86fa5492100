"""Time SGLang 0.5.23's Triton sparse-MLA decode against ours, same process, same inputs.

    python kernels/bench/bench_sparse_mla.py --out results.json --markdown results.md

For every shape (B in 1/8/32/64, H in 16/64, top-k 512/1024, with and without a 512-token extra
cache) it builds one set of DSv4 paged FP8 inputs, checks both kernels against each other and
against the float64 reference, then times each three ways, all with CUDA events:

* gpu: one call captured in a CUDA graph, the graph replayed under `triton.testing.do_bench`
  (L2 flushed before every replay, median). This is the call's GPU time, cold cache, as under
  SGLang's decode CUDA graphs; the speed-ups and floors use it.
* eager: the Python call itself under do_bench. Where the host takes longer to launch the call
  than the GPU takes to run it (our two Triton launches, at small batch), this is host time.
* b2b: 20 calls back to back in one graph, per call (warm L2, launch gaps hidden).

An empty Triton kernel is timed the same three ways as the launch floor. `--sweep` also times the
alternative launch configurations (gpu timing).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sglang_sm120_kernels import sparse_mla_decode as smd
from sglang_sm120_kernels import testing

SHAPES = [(b, h, k, x) for x in (0, 512) for h in (16, 64) for k in (512, 1024) for b in (1, 8, 32, 64)]

SWEEP = {
    "default": smd.DEFAULT_CONFIG,
    "stages1": dataclasses.replace(smd.DEFAULT_CONFIG, num_stages=1),
    "h16-4warps": dataclasses.replace(smd.DEFAULT_CONFIG, num_warps_h16=4),
    "bt16": dataclasses.replace(smd.DEFAULT_CONFIG, block_t=16),
    "q-before-loop+loop-to-len": dataclasses.replace(smd.DEFAULT_CONFIG, q_in_loop=False, loop_to_len=True),
    "2-programs-per-sm": dataclasses.replace(smd.DEFAULT_CONFIG, target_programs_per_sm=2.0),
    "h64-one-program": dataclasses.replace(smd.DEFAULT_CONFIG, max_block_h=64),  # spills on sm_120
}

# The ways to merge the top-k splits (DecodeConfig.merge), and launch variants on top of the
# default `auto`: heads always in blocks of 32 (`h32`, before small-batch blocks of 16), the
# query always loaded before the tile loop (`qfirst`), stopping at topk_length (`len`), 16- or
# 64-token tiles (`bt16`, `bt64`), PDL for any attention grid of one wave (`pdl1`), PDL only where
# the attention grid leaves half the SMs idle (`pdl-half`, before the one-wave rule), half as
# many programs (`half`), merge programs of a fixed 64, 128, 256 or 512 output columns instead of
# the width rule (`d64`, `d128` as before it, `d256`, `d512`), split partials always in bf16 or
# always in fp32 (`bf16`, `fp32`), 16-head programs of 4 warps, two an SM (`h16w4x2`).
TWO_KERNEL = dataclasses.replace(smd.DEFAULT_CONFIG, merge="kernel")
_AUTO = smd.DEFAULT_CONFIG
MERGES = {
    **{name: dataclasses.replace(_AUTO, merge=name) for name in ("kernel", "pdl", "last", "auto")},
    "auto-h32": dataclasses.replace(_AUTO, small_batch_block_h=0),
    "auto-qfirst": dataclasses.replace(_AUTO, q_in_loop=False),
    "auto-len": dataclasses.replace(_AUTO, loop_to_len=True),
    "auto-bt16": dataclasses.replace(_AUTO, block_t=16),
    "auto-bt64": dataclasses.replace(_AUTO, block_t=64),
    "auto-pdl1": dataclasses.replace(_AUTO, auto_pdl_max_sm_share=1.0),
    "auto-pdl-half": dataclasses.replace(_AUTO, auto_pdl_one_wave=False),
    "auto-half": dataclasses.replace(_AUTO, target_programs_per_sm=0.5),
    **{f"auto-d{d}": dataclasses.replace(_AUTO, combine_block_d=d) for d in (64, 128, 256, 512)},
    "auto-bf16": dataclasses.replace(_AUTO, partial_dtype="bfloat16"),
    "auto-fp32": dataclasses.replace(_AUTO, partial_dtype="float32"),
    "auto-h16w4x2": dataclasses.replace(_AUTO, num_warps_h16=4, target_programs_per_sm=2.0),
}
# `--baseline FILE`: another version of sparse_mla_decode.py (e.g. `git show REV:path > FILE`),
# timed with its own default configuration as the column "baseline", on the same inputs.
BASELINE = "baseline"


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location("sparse_mla_decode_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@triton.jit
def _empty_kernel(x):
    pass


def _capture(fn, calls: int) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # compile and autotune outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # Capture on the warm-up stream: the "last" merge's counters (per stream) exist by now, so their
    # one-time zeroing is not captured into the graph.
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _bench_us(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1000.0


def _gpu_us(fn) -> float:
    """One call's GPU time: replay a one-call graph under do_bench (L2 flushed every time)."""
    graph = _capture(fn, 1)
    return _bench_us(graph.replay)


def _b2b_us(fn, calls: int = 20, replays: int = 10) -> float:
    graph = _capture(fn, calls)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / (calls * replays)


def _errors(out, lse, ref_out, ref_lse) -> tuple[float, float]:
    out = out[:, 0].double()
    lse = lse[..., 0].double()
    both_inf = torch.isinf(lse) & torch.isinf(ref_lse) & (torch.sign(lse) == torch.sign(ref_lse))
    lse_err = torch.where(both_inf, torch.zeros_like(lse), (lse - ref_lse).abs())
    return (out - ref_out).abs().max().item(), lse_err.max().item()


def run(args) -> dict:
    dev = "cuda"
    props = torch.cuda.get_device_properties(0)
    baseline = _load_module(args.baseline) if args.baseline else None
    sgl = testing.load_sglang_kernel_module()
    x = torch.zeros(1, device=dev)
    empty = lambda: _empty_kernel[(1,)](x)
    empty_us, empty_gpu_us, empty_b2b_us = _bench_us(empty), _gpu_us(empty), _b2b_us(empty)
    meta = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "sglang_kernel_file": str(testing.find_sglang_kernel_file()),
        "empty_eager_us": empty_us,
        "empty_gpu_us": empty_gpu_us,
        "empty_b2b_us": empty_b2b_us,
        "default_config": dataclasses.asdict(smd.DEFAULT_CONFIG),
        "baseline": str(args.baseline) if args.baseline else None,
        # Each timed variant's whole configuration, so a column stays readable after the
        # defaults (and with them what "auto-..." means) have moved on.
        "variant_configs": {
            name: dataclasses.asdict(cfg)
            for name, cfg in MERGES.items()
            if args.merges and (not args.variants or name in args.variants)
        },
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    print(json.dumps(meta), flush=True)
    if getattr(args, "jsonl", None):
        with open(args.jsonl, "a") as f:
            f.write(json.dumps(meta) + "\n")
    rows = []
    shapes = SHAPES if not args.quick else [s for s in SHAPES if s[0] in (1, 32)]
    if args.floors:  # the shapes of the two floors that concern batch: B=1, and B=32 with H=64
        shapes = [s for s in SHAPES if s[0] == 1] + [s for s in SHAPES if s[0] == 32 and s[1] == 64]
    if args.batches:
        shapes = [s for s in shapes if s[0] in args.batches]
    for b, h, k, xk in shapes:
        case = testing.make_case(
            b, h, k, seed=1000 + b + h + k + xk, extra_topk=xk, lengths="full", invalid_frac=0.0,
            num_pages=64, extra_num_pages=64, extra_page_size=64, sink=True,
        ).to(dev)  # fmt: skip
        args_ = case.args()
        # The lambdas below are timed within this iteration only (B023 does not apply).
        ours = lambda cfg=smd.DEFAULT_CONFIG, st="partial+combine": smd.sparse_mla_decode(
            *args_,  # noqa: B023
            config=cfg,
            _stages=st,
        )
        theirs = lambda: sgl.flash_mla_sparse_decode_triton(*args_)  # noqa: B023
        o1, l1 = ours()
        o2, l2 = theirs()
        ref_o, ref_l = testing.reference_decode(
            case.q, case.k_cache, case.indices, case.topk_length, case.attn_sink, case.softmax_scale,
            case.extra_k_cache, case.extra_indices, case.extra_topk_length,
        )  # fmt: skip
        err_ours = _errors(o1, l1, ref_o, ref_l)
        err_sgl = _errors(o2, l2, ref_o, ref_l)
        err_vs = _errors(o1, l1, o2[:, 0].double(), l2[..., 0].double())
        if args.merges:
            row = {"B": b, "H": h, "topk": k, "extra": xk, "sglang_gpu_us": _gpu_us(theirs),
                   "ours_partial_gpu_us": _gpu_us(lambda: ours(TWO_KERNEL, st="partial")),  # noqa: B023
                   "merges": {}}  # fmt: skip
            variants = dict(MERGES)
            if baseline is not None:
                variants = {BASELINE: baseline.DEFAULT_CONFIG, **variants}
            for name, cfg in variants.items():
                if args.variants and name not in args.variants and name != BASELINE:
                    continue
                mod = baseline if name == BASELINE else smd
                run_it = lambda c=cfg, m=mod: m.sparse_mla_decode(*args_, config=c)  # noqa: B023
                o, lse_ = run_it()
                plan = mod._plan(case.q, mod._rows(case.indices, b), xk, cfg, None)
                e_ref = _errors(o, lse_, ref_o, ref_l)
                e_sgl = _errors(o, lse_, o2[:, 0].double(), l2[..., 0].double())
                row["merges"][name] = {
                    "gpu_us": _gpu_us(run_it),
                    "merge_ran": plan.merge,
                    "n_split_total": plan.n_split_total, "tiles_per_split": plan.tiles_per_split,
                    "vs_ref_out": e_ref[0], "vs_ref_lse": e_ref[1],
                    "vs_sglang_out": e_sgl[0], "vs_sglang_lse": e_sgl[1],
                    "counters_zero": all(int(t.count_nonzero()) == 0 for t in mod._COUNTERS.values()),
                }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
            continue
        row = {
            "B": b, "H": h, "topk": k, "extra": xk,
            "sglang_gpu_us": _gpu_us(theirs),
            "ours_gpu_us": _gpu_us(ours),
            "ours_partial_gpu_us": _gpu_us(lambda: ours(st="partial")),  # noqa: B023
            "sglang_eager_us": _bench_us(theirs),
            "ours_eager_us": _bench_us(ours),
            "sglang_b2b_us": _b2b_us(theirs, calls=5, replays=3),
            "ours_b2b_us": _b2b_us(ours),
            "ours_vs_ref_out": err_ours[0], "ours_vs_ref_lse": err_ours[1],
            "sglang_vs_ref_out": err_sgl[0], "sglang_vs_ref_lse": err_sgl[1],
            "ours_vs_sglang_out": err_vs[0], "ours_vs_sglang_lse": err_vs[1],
        }  # fmt: skip
        if args.sweep:
            row["sweep_gpu_us"] = {name: _gpu_us(lambda c=cfg: ours(c)) for name, cfg in SWEEP.items()}  # noqa: B023
        row["speedup"] = row["sglang_gpu_us"] / row["ours_gpu_us"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"meta": meta, "rows": rows}


def markdown_merges(result: dict) -> str:
    m = result["meta"]
    e = m["empty_gpu_us"]
    names = list(result["rows"][0]["merges"])
    main = "auto" if "auto" in names else names[-1]
    lines = [
        (
            f"Measured on {m['device']} ({m['sms']} SMs), torch {m['torch']}, triton {m['triton']}, {m['when']}. "
            f"gpu us, medians; empty Triton kernel {e:.2f} us. Cells: time (splits per query, x empty launch"
            ", and the merge that ran where the column names another)."
        ),
        "",
        "| B | H | top-k | extra | SGLang | two-kernel partial only | "
        + " | ".join(names)
        + f" | SGLang / {main} | max out err vs ref |",
        "|---|---|---|---|---|---|" + "---|" * len(names) + "---|---|",
    ]
    for r in result["rows"]:
        cells = [
            f"{v['gpu_us']:.1f} ({v['n_split_total']}, {v['gpu_us'] / e:.2f}x"
            + ("" if v["merge_ran"] == n.split("-")[0] else f", ran {v['merge_ran']}")
            + ")"
            for n, v in r["merges"].items()
        ]
        err = max(v["vs_ref_out"] for v in r["merges"].values())
        lines.append(
            f"| {r['B']} | {r['H']} | {r['topk']} | {r['extra']} | {r['sglang_gpu_us']:.1f} "
            f"| {r['ours_partial_gpu_us']:.1f} | "
            + " | ".join(cells)
            + f" | {r['sglang_gpu_us'] / r['merges'][main]['gpu_us']:.1f}x | {err:.1e} |"
        )
    return "\n".join(lines) + "\n"


def markdown(result: dict) -> str:
    if result["rows"] and "merges" in result["rows"][0]:
        return markdown_merges(result)
    m = result["meta"]
    e = m["empty_gpu_us"]
    lines = [
        (
            f"Measured on {m['device']} (sm_{m['capability'].replace('.', '')}, {m['sms']} SMs), torch {m['torch']}, "
            f"triton {m['triton']}, {m['when']}. Times in microseconds, medians."
        ),
        "",
        (
            f"Empty Triton kernel: gpu {e:.2f} us, eager {m['empty_eager_us']:.2f} us, "
            f"b2b {m['empty_b2b_us']:.2f} us per launch."
        ),
        "",
        (
            "| B | H | top-k | extra | SGLang gpu | ours gpu | speed-up | ours / empty | ours partial-kernel gpu "
            "| SGLang eager | ours eager | SGLang b2b | ours b2b | out err ours/ref | out err SGLang/ref "
            "| lse err ours/ref | out err ours/SGLang |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['B']} | {r['H']} | {r['topk']} | {r['extra']} | {r['sglang_gpu_us']:.1f} | {r['ours_gpu_us']:.1f} "
            f"| {r['speedup']:.1f}x | {r['ours_gpu_us'] / e:.2f}x | {r['ours_partial_gpu_us']:.1f} "
            f"| {r['sglang_eager_us']:.1f} | {r['ours_eager_us']:.1f} | {r['sglang_b2b_us']:.1f} | {r['ours_b2b_us']:.1f} "
            f"| {r['ours_vs_ref_out']:.1e} | {r['sglang_vs_ref_out']:.1e} | {r['ours_vs_ref_lse']:.1e} "
            f"| {r['ours_vs_sglang_out']:.1e} |"
        )
    if result["rows"] and "sweep_gpu_us" in result["rows"][0]:
        names = list(result["rows"][0]["sweep_gpu_us"])
        lines += ["", "Launch-configuration sweep (ours, gpu us):", "",
                  "| B | H | top-k | extra | " + " | ".join(names) + " |",
                  "|---|---|---|---|" + "---|" * len(names)]  # fmt: skip
        for r in result["rows"]:
            lines.append(
                f"| {r['B']} | {r['H']} | {r['topk']} | {r['extra']} | "
                + " | ".join(f"{r['sweep_gpu_us'][n]:.1f}" for n in names)
                + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the raw results as JSON here")
    ap.add_argument("--markdown", type=Path, help="write the results table here")
    ap.add_argument("--sweep", action="store_true", help="also time the alternative launch configurations")
    ap.add_argument("--quick", action="store_true", help="B in {1, 32} only")
    ap.add_argument("--floors", action="store_true", help="B=1 and B=32/H=64 only")
    ap.add_argument(
        "--batches",
        type=lambda v: [int(b) for b in v.split(",")],
        help="only these batch sizes, e.g. 1 or 1,32",
    )
    ap.add_argument(
        "--merges",
        action="store_true",
        help="gpu timing only: SGLang, and ours with each merge of the top-k splits (MERGES)",
    )
    ap.add_argument(
        "--variants", type=lambda v: v.split(","), help=f"with --merges: only these of {', '.join(MERGES)}"
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="with --merges: also time this other version of sparse_mla_decode.py (its defaults)",
    )
    ap.add_argument("--jsonl", type=Path, help="append each row here as it is measured")
    ns = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time", file=sys.stderr)
        return 2
    result = run(ns)
    md = markdown(result)
    if ns.out:
        ns.out.write_text(json.dumps(result, indent=1))
    if ns.markdown:
        ns.markdown.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
