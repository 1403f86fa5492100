"""The tables of docs/reading-a-bench.md that are scores, generated when the site is built from the offline
scorer (`bundle score`'s service, bundle/service/score.py) and the cost model, so the page cannot drift
from the code: a marker line in the page is replaced by its table (docsgen/hooks.py's on_page_markdown).

    <!-- generated: public-figures -->   the seeds' run and the public figures, scored, with their
                                          configuration and source (docsgen/public_figures.json)
    <!-- generated: floors -->           the floors of the topologies at C=1 and C=8, with their parts
    <!-- generated: bytes-by-class -->   one step's bytes per GPU by weight class, TP 1/2/4/8 and EP
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bundle.service import score as scorer
from bundle.verify import cost_model

ROOT = Path(__file__).resolve().parents[1]
FIGURES = Path(__file__).resolve().with_name("public_figures.json")
SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
WORKSTATION = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
# The topologies as the default config deploys them (the decoding servers): name, TP, servers.
TOPOLOGIES = (("tp4", 4, 1), ("pd (decode TP4)", 4, 1), ("dp (2 x TP4)", 4, 2))


def public_runs() -> list[dict]:
    return json.loads(FIGURES.read_text())["runs"]


def scored_run(run: dict, gpu: str = SERVER) -> scorer.Scored:
    """One public figure through the offline scorer, as `bundle score` would score it."""
    return scorer.score(scorer.ScoreRequest(
        gpu=gpu, tp=run["tp"], ep=run.get("ep", 1), concurrency=run["concurrency"], input_len=256, output_len=256,
        tpot_ms=run.get("tpot_ms"), output_tok_s=None if run.get("tpot_ms") else run["output_tok_s"],
        speculative=run.get("speculative", "none"), power_limit_w=run.get("power_limit_w"),
        cuda_graphs=run.get("cuda_graphs"), label=run["name"], source=run["source"]))


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def public_figures() -> str:
    """Two tables, a run's row in each: what was run and measured, then how it scores. One table of both
    (12 columns) scrolled sideways even at desktop width."""
    runs = [(run, scored_run(run, SERVER), scored_run(run, WORKSTATION)) for run in public_runs()]
    measured = [_row(("run", "TP", "EP", "C", "speculative", "power cap", "tok/s", "TPOT ms")), _row(("---",) * 8)]
    scored = [_row(("run", "floor ms", "of the floor (Server)", "of the floor (Workstation)", "verdict and first causes")),
              _row(("---",) * 5)]
    for run, server, workstation in runs:
        limit, v = server.limit, server.limit["verdict"]
        causes = "; ".join(c["name"] + ("" if c["seen"] else " (not checked)") for c in v["causes"][:3])
        spec = run.get("speculative", "none") + (" (acceptance unknown)" if v["acceptance_unknown"] else "")
        name = f"{run['name']} C={run['concurrency']}"
        measured.append(_row((run["name"], run["tp"], run.get("ep", 1), run["concurrency"], spec,
                              f"{run['power_limit_w']} W" if run.get("power_limit_w") else "not stated",
                              run["output_tok_s"], f"{server.tpot_ms:.2f}")))
        scored.append(_row((name, f"{limit['floor_tpot_ms']:.2f}", f"{limit['floor_share'] * 100:.1f}%",
                            f"{workstation.limit['floor_share'] * 100:.1f}%", f"{v['band']}: {causes}")))
    sources = "Sources: " + "; ".join(f"{r['name']} C={r['concurrency']}: {r['source']}" for r in public_runs())
    return "\n".join([*measured, "", "How each scores:", "", *scored, "", sources])


def floors() -> str:
    model = cost_model.model_shape(_config())
    lines = [_row(("topology", "C", "bytes per GPU per step", "floor (Server)", "its parts (Server)",
                   "ceiling (Server)", "floor (Workstation)", "ceiling (Workstation)")), _row(("---",) * 8)]
    for name, tp, servers in TOPOLOGIES:
        for c in (1, 8):
            per = -(-c // servers)
            run = cost_model.RunShape(tp, per, 256, 256)
            s = cost_model.score(model, run, cost_model.gpu(SERVER), 1.0)
            w = cost_model.score(model, run, cost_model.gpu(WORKSTATION), 1.0)
            lines.append(_row((name, c, f"{s.bytes_per_gpu / 1e9:.2f} GB", f"{s.floor_tpot_ms:.2f} ms",
                               s.parts.line(), f"{c / s.floor_tpot_ms * 1000:,.0f} tok/s", f"{w.floor_tpot_ms:.2f} ms",
                               f"{c / w.floor_tpot_ms * 1000:,.0f} tok/s")))
    return "\n".join(lines)


LAYOUTS = (cost_model.Layout(1), cost_model.Layout(2), cost_model.Layout(4), cost_model.Layout(8),
           cost_model.Layout(4, 4), cost_model.Layout(8, 8))


def bytes_by_class() -> str:
    """One C=1 step's bytes per GPU by weight class (GB), the busiest rank under EP."""
    model = cost_model.model_shape(_config())
    costs = [cost_model.step_cost(model, cost_model.RunShape(lay.tp, 1, 256, 256, ep=lay.ep)) for lay in LAYOUTS]
    lines = [_row(("weight class", "dtype", "laid out", *(lay.name() for lay in LAYOUTS))), _row(("---",) * (3 + len(LAYOUTS)))]
    for g in model.groups:
        lines.append(_row((g.name, g.dtype, g.split + ("" if g.read == cost_model.EVERY_STEP else f", {g.read}"),
                           *(f"{c.bytes_by_class[g.name] / 1e9:.3f}" for c in costs))))
    lines.append(_row(("KV and indexer caches (384-token context)", "fp8/bf16", "whole on every rank",
                       *(f"{c.kv_bytes / 1e9:.3f}" for c in costs))))
    lines.append(_row(("the sampler's read of the logits", "fp32", "whole on every rank",
                       *(f"{c.sampler_bytes / 1e9:.4f}" for c in costs))))
    lines.append(_row(("**all**", "", "", *(f"**{c.bytes_per_gpu / 1e9:.2f}**" for c in costs))))
    return "\n".join(lines)


def _config() -> dict:
    return json.loads((ROOT / scorer.AUDIT_CONFIG).read_text())


TABLES = {"public-figures": public_figures, "floors": floors, "bytes-by-class": bytes_by_class}


def expand(markdown: str) -> str:
    """The page with each marker replaced by its table (an unknown marker names the known ones)."""
    def table(match: re.Match) -> str:
        make = TABLES.get(match.group(1))
        if make is None:
            raise ValueError(f"unknown generated table {match.group(1)!r}: {', '.join(TABLES)}")
        return make()

    return MARKER.sub(table, markdown)
