"""What the census and the offline scorer cost, each against a named peer measured in the same run.

- The census (bundle/verify/census.py: SGLang's DeepSeek-V4 model built on the meta device inside the
  rehearsal image, one rank counted per layout) against its floor: a container of the same image that only
  imports SGLang's DeepSeek-V4 model module, which the census cannot avoid. Reported: seconds for one layout
  (TP4) and for all seven, and the ratio over the import.
- The offline scorer (`bundle score`'s service: config.json read, the closed form, the floor, the verdict)
  against rendering the bench table of the figure it scores (what `bundle score` prints anyway).

    .venv/bin/python benchmarks/bench_census.py [--rounds 200] [--no-census]

Prints the medians and ratios and appends one JSON line to runs/benchmarks/bench_census.jsonl. The census
needs the rehearsal image (`make rehearsal-image`, or `python -m bundle.rehearsal.shared.image image`).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bundle import modes  # noqa: E402
from bundle.rehearsal import registry as rehearsal_modes  # noqa: E402
from bundle.service import score as scorer  # noqa: E402
from bundle.verify import census, cost_model, tables  # noqa: E402

modes.install(rehearsal_modes)  # an entry point, like bundle/cli.py: the tables name the no-GPU modes

SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
SEEDS = scorer.ScoreRequest(gpu=SERVER, tp=4, concurrency=1, input_len=256, output_len=256, tpot_ms=94.13,
                            label="the original deployment")


def time_scorer(rounds: int) -> dict:
    scoring, table = [], []
    for _ in range(rounds):  # interleaved, so machine noise hits both alike
        t0 = time.perf_counter()
        scored = scorer.score(SEEDS)
        t1 = time.perf_counter()
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(tables.bench_table(scored.record()))
        t2 = time.perf_counter()
        scoring.append((t1 - t0) * 1000)
        table.append((t2 - t1) * 1000)
    return {"score_ms_median": round(statistics.median(scoring), 3),
            "table_ms_median": round(statistics.median(table), 3),
            "ratio_score_over_table": round(statistics.median(scoring) / statistics.median(table), 3)}


def time_census(image: str) -> dict:
    from bundle.stack import engine

    config = census.config_in_use(None)
    t0 = time.perf_counter()
    run = engine.run_audit_container(image, ["python3", "-c", "import sglang.srt.models.deepseek_v4"], volumes=[],
                                     env={}, timeout=900)
    import_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        census.run_in_image(image, config, Path(tmp) / "one", layouts=(cost_model.Layout(4),))
        one_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        census.run_in_image(image, config, Path(tmp) / "all")
        all_s = time.perf_counter() - t0
    return {"import_s": round(import_s, 1), "import_exit": run.returncode, "census_tp4_s": round(one_s, 1),
            "census_all_s": round(all_s, 1), "layouts": len(census.LAYOUTS),
            "ratio_tp4_over_import": round(one_s / import_s, 2), "ratio_all_over_import": round(all_s / import_s, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--no-census", action="store_true", help="time the scorer only")
    args = parser.parse_args(argv)
    result = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rounds": args.rounds} | time_scorer(args.rounds)
    print(f"offline scorer: median {result['score_ms_median']:.2f} ms a figure; rendering its table "
          f"{result['table_ms_median']:.2f} ms; ratio {result['ratio_score_over_table']:.2f}")
    if not args.no_census:
        from bundle.rehearsal.shared import image as rehearsal
        from bundle.stack import engine

        image = rehearsal.image_tag()
        if engine.image_exists(image):
            result |= time_census(image)
            print(f"census: TP4 {result['census_tp4_s']:.1f} s, all {result['layouts']} layouts "
                  f"{result['census_all_s']:.1f} s; importing SGLang's model module alone {result['import_s']:.1f} s; "
                  f"ratios {result['ratio_tp4_over_import']:.2f} and {result['ratio_all_over_import']:.2f}")
        else:
            print(f"census: not timed: no rehearsal image {image} here")
    out = REPO / "runs" / "benchmarks" / "bench_census.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
