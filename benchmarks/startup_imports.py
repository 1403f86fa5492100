"""What the bytecode compiled into the images saves at every process start.

Each SGLang server process (and each TP rank it spawns) imports torch and SGLang before it serves. The
images write no bytecode at run time (PYTHONDONTWRITEBYTECODE=1), so that import runs from the .pyc
files compiled at install (UV_COMPILE_BYTECODE=1, docker/base.Dockerfile) or, without them, compiles
every module from source at every start. Measured in one run, interleaved, on the same image:

  compiled: `python -c "import <modules>"` as the image runs it
  peer:     the same with PYTHONPYCACHEPREFIX pointing at an empty folder, so Python finds no .pyc and
            compiles from source (as an image built without UV_COMPILE_BYTECODE does)

The modules are what `python -m sglang.launch_server` imports before it parses its arguments, plus
the HTTP server and the scheduler. Prints medians and the peer/compiled ratio and appends one JSON
line to runs/benchmarks/startup_imports.jsonl.

    .venv/bin/python benchmarks/startup_imports.py [--image TAG] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODULES = "torch, sglang.srt.server_args, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler"


def _timed_import(image: str, *, compiled: bool) -> float:
    env = [] if compiled else ["-e", "PYTHONPYCACHEPREFIX=/tmp/no-bytecode-here"]
    cmd = ["docker", "run", "--rm", "--network", "none", *env, "-e", "SGLANG_USE_CPU_ENGINE=1", image,
           "python", "-c", f"import time; t = time.perf_counter(); import {MODULES}; "
                           "print(time.perf_counter() - t)"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"import failed in {image}: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", help="the image to measure (default: the rehearsal image, built if missing)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    image = args.image
    if image is None:
        from bundle.rehearsal.shared import image as rehearsal

        image = rehearsal.ensure_image()
    print(f"image {image}; imports: {MODULES}", flush=True)
    _timed_import(image, compiled=True)  # warm-up: page cache, the container runtime
    compiled, source = [], []
    for n in range(1, args.rounds + 1):
        source.append(_timed_import(image, compiled=False))
        compiled.append(_timed_import(image, compiled=True))
        print(f"round {n}/{args.rounds}: from source {source[-1]:.1f} s, from bytecode {compiled[-1]:.1f} s",
              flush=True)
    ratios = [s / c for s, c in zip(source, compiled)]
    result = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "image": image, "modules": MODULES,
              "rounds": args.rounds, "bytecode_s_median": statistics.median(compiled),
              "source_s_median": statistics.median(source), "ratio_source_over_bytecode": statistics.median(ratios)}
    print(f"median import: from bytecode {result['bytecode_s_median']:.1f} s, from source "
          f"{result['source_s_median']:.1f} s: {result['ratio_source_over_bytecode']:.2f}x slower without "
          "the compiled bytecode")
    out = REPO / "runs" / "benchmarks" / "startup_imports.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
