"""`bundle score`: a figure measured anywhere, scored without a GPU against the floor `bundle bench` uses,
with the same table and verdict.

    bundle score --gpu "NVIDIA RTX PRO 6000 Blackwell Server Edition" --tp 4 -C 1 --tpot-ms 94.13
    bundle score tp4 --gpu "..." -C 8 --tok-s 24      (the layout of tp4 as the config deploys it)
"""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "score a measured tok/s or TPOT against the floor, without a GPU (the seeds' run, a vendor's figure)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the layout given by --tp/--ep")
    add_config_argument(parser)
    parser.add_argument("--gpu", required=True, metavar="NAME", help="the GPU as nvidia-smi names it")
    parser.add_argument("--tp", type=int, help="tensor-parallel size of a decoding server (default: the "
                                               "topology's, else 4)")
    parser.add_argument("--ep", type=int, help="expert parallelism: 1 (off, default) or the TP size")
    parser.add_argument("--dp-attention", action="store_true", help="the attention is data parallel")
    parser.add_argument("--servers", type=int, help="decoding servers the concurrency spreads over (default: "
                                                    "the topology's, else 1)")
    parser.add_argument("-C", "--concurrency", type=int, default=1)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=256)
    measured = parser.add_mutually_exclusive_group(required=True)
    measured.add_argument("--tpot-ms", type=float, help="the measured mean TPOT")
    measured.add_argument("--tok-s", type=float, help="the measured output tok/s (TPOT taken as C / tok/s)")
    parser.add_argument("--speculative", choices=("none", "mtp", "mtp-light", "dspark"),
                        help="the speculative lever (default: the config's with a topology, else none)")
    parser.add_argument("--draft-tokens", type=int, help="draft tokens per step (default: the lever's)")
    parser.add_argument("--accept-length", type=float, help="measured acceptance length (tokens per step)")
    parser.add_argument("--power-limit", type=float, metavar="W", help="the GPUs' power cap, if capped")
    graphs = parser.add_mutually_exclusive_group()
    graphs.add_argument("--cuda-graphs", dest="cuda_graphs", action="store_true", default=None,
                        help="the run decoded with CUDA graphs")
    graphs.add_argument("--eager", dest="cuda_graphs", action="store_false", help="it ran without CUDA graphs")
    parser.add_argument("--fp8-wo-a", action="store_true", help="SGLANG_OPT_FP8_WO_A_GEMM was set")
    parser.add_argument("--model-config", metavar="PATH", help="the model's config.json or its folder "
                                                               "(default: DeepSeek-V4-Flash's, the audit's copy)")
    parser.add_argument("--attestation", metavar="FILE", help="the run's attestation.json, if it has one")
    parser.add_argument("--label", default="a measured figure")
    parser.add_argument("--json", action="store_true", help="print the scored figure as JSON")


def _json_file(path: str | None) -> dict | None:
    from pathlib import Path

    from bundle.errors import InputError

    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read it as JSON ({exc})", hint="give the attestation.json a launch wrote") \
            from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.service import score as service
    from bundle.verify import tables

    tp, servers, ep, speculative, label = args.tp or 4, args.servers or 1, args.ep or 1, args.speculative, args.label
    if args.topology:
        layout = service.topology_layout(args.topology, args.config)
        tp, servers = args.tp or layout.tp, args.servers or layout.servers
        ep = args.ep or layout.ep
        speculative = speculative or layout.speculative
        label = f"{label} ({layout.what})"
    request = service.ScoreRequest(
        gpu=args.gpu, tp=tp, ep=ep, dp_attention=args.dp_attention, servers=servers, concurrency=args.concurrency,
        input_len=args.input_len, output_len=args.output_len, tpot_ms=args.tpot_ms, output_tok_s=args.tok_s,
        speculative=speculative or "none", draft_tokens=args.draft_tokens, accept_length=args.accept_length,
        power_limit_w=args.power_limit, cuda_graphs=args.cuda_graphs, fp8_wo_a=args.fp8_wo_a,
        model_config=args.model_config, label=label, attestation=_json_file(args.attestation))
    scored = service.score(request)
    if args.json:
        print(json.dumps(scored.as_dict(), indent=2))
        return 0
    console = Console(highlight=False)
    console.print(tables.bench_table(scored.record()))
    for line in scored.lines():
        console.print(line, markup=False)
    console.print(f"TPOT from {scored.tpot_from}; model {scored.described.get('config')}: "
                  + "; ".join(scored.model_notes), markup=False)
    return 0
