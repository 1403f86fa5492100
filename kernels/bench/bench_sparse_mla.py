"""Time SGLang 0.5.23's Triton sparse-MLA decode against ours, same process, same inputs.

    python kernels/bench/bench_sparse_mla.py --out results.json --markdown results.md

For every shape (B in 1/8/32/64, H in 16/64, top-k 512/1024, with and without a 512-token extra
cache) it builds one set of DSv4 paged FP8 inputs, checks both kernels against each other and
against the float64 reference, then times each with `triton.testing.do_bench` (CUDA events, L2
flushed before every call, median) and by replaying a CUDA graph of 20 back-to-back calls (what a
decode step under SGLang's CUDA graphs looks like). An empty Triton kernel is timed the same way
as the launch floor. `--sweep` also times the alternative launch configurations.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sglang_sm120_kernels import sparse_mla_decode as smd  # noqa: E402
from sglang_sm120_kernels import testing  # noqa: E402

SHAPES = [
    (b, h, k, x)
    for x in (0, 512)
    for h in (16, 64)
    for k in (512, 1024)
    for b in (1, 8, 32, 64)
]

SWEEP = {
    "default": smd.DEFAULT_CONFIG,
    "h64-one-program": dataclasses.replace(smd.DEFAULT_CONFIG, max_block_h=64),
    "bt16": dataclasses.replace(smd.DEFAULT_CONFIG, block_t=16),
    "2-programs-per-sm": dataclasses.replace(smd.DEFAULT_CONFIG, target_programs_per_sm=2.0),
    "stages2": dataclasses.replace(smd.DEFAULT_CONFIG, num_stages=2),
}


@triton.jit
def _empty_kernel(x):
    pass


def _graph_time_us(fn, calls: int = 20, replays: int = 20) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / (calls * replays)


def _bench_us(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1000.0


def _errors(out, lse, ref_out, ref_lse) -> tuple[float, float]:
    out = out[:, 0].double()
    lse = lse[..., 0].double()
    both_inf = torch.isinf(lse) & torch.isinf(ref_lse) & (torch.sign(lse) == torch.sign(ref_lse))
    lse_err = torch.where(both_inf, torch.zeros_like(lse), (lse - ref_lse).abs())
    return (out - ref_out).abs().max().item(), lse_err.max().item()


def run(args) -> dict:
    dev = "cuda"
    props = torch.cuda.get_device_properties(0)
    sgl = testing.load_sglang_kernel_module()
    x = torch.zeros(1, device=dev)
    empty_us = _bench_us(lambda: _empty_kernel[(1,)](x))
    empty_graph_us = _graph_time_us(lambda: _empty_kernel[(1,)](x))
    meta = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "sglang_kernel_file": str(testing.find_sglang_kernel_file()),
        "empty_launch_us": empty_us,
        "empty_launch_graph_us": empty_graph_us,
        "default_config": dataclasses.asdict(smd.DEFAULT_CONFIG),
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    print(json.dumps(meta), flush=True)
    rows = []
    shapes = SHAPES if not args.quick else [s for s in SHAPES if s[0] in (1, 32)]
    for b, h, k, xk in shapes:
        case = testing.make_case(
            b, h, k, seed=1000 + b + h + k + xk, extra_topk=xk, lengths="full", invalid_frac=0.0,
            num_pages=64, extra_num_pages=64, extra_page_size=64, sink=True,
        ).to(dev)  # fmt: skip
        args_ = case.args()
        ours = lambda cfg=smd.DEFAULT_CONFIG: smd.sparse_mla_decode(*args_, config=cfg)  # noqa: E731
        theirs = lambda: sgl.flash_mla_sparse_decode_triton(*args_)  # noqa: E731
        o1, l1 = ours()
        o2, l2 = theirs()
        ref_o, ref_l = testing.reference_decode(
            case.q, case.k_cache, case.indices, case.topk_length, case.attn_sink, case.softmax_scale,
            case.extra_k_cache, case.extra_indices, case.extra_topk_length,
        )  # fmt: skip
        err_ours = _errors(o1, l1, ref_o, ref_l)
        err_sgl = _errors(o2, l2, ref_o, ref_l)
        err_vs = _errors(o1, l1, o2[:, 0].double(), l2[..., 0].double())
        row = {
            "B": b, "H": h, "topk": k, "extra": xk,
            "sglang_us": _bench_us(theirs),
            "ours_us": _bench_us(ours),
            "sglang_graph_us": _graph_time_us(theirs, calls=5, replays=5) if not args.no_graph else None,
            "ours_graph_us": _graph_time_us(ours) if not args.no_graph else None,
            "ours_vs_ref_out": err_ours[0], "ours_vs_ref_lse": err_ours[1],
            "sglang_vs_ref_out": err_sgl[0], "sglang_vs_ref_lse": err_sgl[1],
            "ours_vs_sglang_out": err_vs[0], "ours_vs_sglang_lse": err_vs[1],
        }  # fmt: skip
        if args.sweep:
            row["sweep_us"] = {name: _bench_us(lambda c=cfg: ours(c)) for name, cfg in SWEEP.items()}
        row["speedup"] = row["sglang_us"] / row["ours_us"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"meta": meta, "rows": rows}


def markdown(result: dict) -> str:
    m = result["meta"]
    lines = [
        f"Measured on {m['device']} (sm_{m['capability'].replace('.', '')}, {m['sms']} SMs), torch {m['torch']}, "
        f"triton {m['triton']}, {m['when']}.",
        "",
        f"Empty Triton kernel launch: {m['empty_launch_us']:.2f} us (do_bench), "
        f"{m['empty_launch_graph_us']:.2f} us per launch in a CUDA graph.",
        "",
        "| B | H | top-k | extra | SGLang us | ours us | speed-up | ours / empty | SGLang graph us | ours graph us "
        "| out err ours/ref | out err SGLang/ref | lse err ours/ref | out err ours/SGLang |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        g1 = f"{r['sglang_graph_us']:.1f}" if r.get("sglang_graph_us") else "-"
        g2 = f"{r['ours_graph_us']:.1f}" if r.get("ours_graph_us") else "-"
        lines.append(
            f"| {r['B']} | {r['H']} | {r['topk']} | {r['extra']} | {r['sglang_us']:.1f} | {r['ours_us']:.1f} "
            f"| {r['speedup']:.1f}x | {r['ours_us'] / m['empty_launch_us']:.2f}x | {g1} | {g2} "
            f"| {r['ours_vs_ref_out']:.1e} | {r['sglang_vs_ref_out']:.1e} | {r['ours_vs_ref_lse']:.1e} "
            f"| {r['ours_vs_sglang_out']:.1e} |"
        )
    if result["rows"] and "sweep_us" in result["rows"][0]:
        names = list(result["rows"][0]["sweep_us"])
        lines += ["", "Launch-configuration sweep (ours, us, do_bench median):", "",
                  "| B | H | top-k | extra | " + " | ".join(names) + " |",
                  "|---|---|---|---|" + "---|" * len(names)]  # fmt: skip
        for r in result["rows"]:
            lines.append(
                f"| {r['B']} | {r['H']} | {r['topk']} | {r['extra']} | "
                + " | ".join(f"{r['sweep_us'][n]:.1f}" for n in names) + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the raw results as JSON here")
    ap.add_argument("--markdown", type=Path, help="write the results table here")
    ap.add_argument("--sweep", action="store_true", help="also time the alternative launch configurations")
    ap.add_argument("--quick", action="store_true", help="B in {1, 32} only")
    ap.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timings")
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
