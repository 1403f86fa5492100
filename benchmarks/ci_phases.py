"""CI's wall time by phase: a whole `.ci/run` on a fresh clone, cold or warm, into one table.

CI has 90 minutes and a new machine starts with an empty Docker engine, so every change spends from
one budget. This runs `.ci/run` exactly as CI does (a fresh clone of HEAD, CI=true) with
BUNDLE_CI_RECORD set: `.ci/run` records install, lint, docs and test; each tier of `make test` records
itself and each of its modules (tests/tier_clock.py); the image layers are read from the run's own
output (`[2/3] framework built ... in 189 s`, the background build's `[chain]` lines included).

    python benchmarks/ci_phases.py run --cold      # prunes the engine and the builder cache first (asks no
                                                  # question: it removes every image, container and volume)
    python benchmarks/ci_phases.py run             # warm: the engine as it is
    python benchmarks/ci_phases.py table A.json [B.json ...]   # the markdown table, one column a record
    python benchmarks/ci_phases.py baseline A.json # benchmarks/ci_baseline.json from a record (the tier clock's table)
    python benchmarks/ci_phases.py counts [TREE ...]           # tests and asserts per module, per tree

A run writes benchmarks/records/ci-<cold|warm>-<UTC time>.json and prints the table. The peer is the
earlier record: the table sets the runs side by side.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "benchmarks" / "records"
BASELINE = REPO / "benchmarks" / "ci_baseline.json"
# `\s+` before "in": a console writing to a file wraps at 80 columns, so the time may start the next line.
LAYER_LINE = re.compile(r"\[\d+/\d+\] (?P<name>[\w-]+)\s+built\s+\S+\s+in (?P<seconds>\d+) s")
REHEARSAL_LINE = re.compile(r"rehearsal: built (?P<tag>\S+) in (?P<seconds>\d+) s")


def _sh(*cmd: str, cwd: Path | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def _prune() -> None:
    """An empty engine, as a new machine has: every container, image, volume and build cache gone."""
    ids = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True).stdout.split()
    if ids:
        _sh("docker", "rm", "-f", *ids)
    _sh("docker", "system", "prune", "-af", "--volumes")
    _sh("docker", "buildx", "prune", "-af")
    # And uv's download cache (`make install` goes through uv): a new machine has none.
    _sh(str(REPO / ".venv" / "bin" / "uv"), "cache", "clean", "--force")


def layers_from_output(text: str) -> dict[str, int]:
    """Each image layer's build time as the build printed it (reused layers print no time)."""
    found: dict[str, int] = {}
    for match in LAYER_LINE.finditer(text):
        found[f"image:{match['name']}"] = int(match["seconds"])
    for match in REHEARSAL_LINE.finditer(text):
        found["image:rehearsal"] = int(match["seconds"])
    return found


def run(cold: bool, workdir: Path | None) -> Path:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ci-phases-"))
    clone = workdir / "clone"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    _sh("git", "clone", "-q", str(REPO), str(clone))
    if cold:
        _prune()
    record_lines = workdir / "phases.jsonl"
    log = workdir / "ci.log"
    env = {**os.environ, "CI": "true", "BUNDLE_CI_RECORD": str(record_lines)}
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", ".ci/run"], cwd=clone, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        for line in proc.stdout:  # shown as it comes (minutes of it), and kept
            sys.stdout.write(line)
            out.write(line)
        rc = proc.wait()
    total = time.monotonic() - start
    phases = [json.loads(line) for line in record_lines.read_text().splitlines()] if record_lines.exists() else []
    record = {"kind": "cold" if cold else "warm", "head": head, "exit": rc, "seconds": round(total),
              "at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "cores": os.cpu_count(),
              "phases": {p["phase"]: p for p in phases},
              "layers": layers_from_output(log.read_text())}
    RECORDS.mkdir(parents=True, exist_ok=True)
    path = RECORDS / f"ci-{record['kind']}-{time.strftime('%Y%m%dT%H%M', time.gmtime())}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nrecord: {path} (the whole log: {log})")
    print(table([record]))
    return path


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def table(records: list[dict], top_modules: int = 12) -> str:
    """One row a phase, one column a record: the whole run, install, lint, docs, the fast tier, each
    image layer built, the Docker tier, and its longest modules (by the first record's order)."""
    def phase(rec, name):
        return rec["phases"].get(name, {}).get("seconds")

    rows: list[tuple[str, list]] = [("whole `.ci/run`", [r["seconds"] for r in records])]
    for name in ("install", "lint", "docs"):
        rows.append((name, [phase(r, name) for r in records]))
    rows.append(("fast tier", [phase(r, "tier:fast") for r in records]))
    layers = []
    for rec in records:
        layers += [name for name in rec["layers"] if name not in layers]
    for name in layers:
        rows.append((name.replace("image:", "image layer: "), [r["layers"].get(name) for r in records]))
    rows.append(("Docker tier (wall)", [phase(r, "tier:docker") for r in records]))
    modules = records[0]["phases"].get("tier:docker", {}).get("modules", {})
    for path in list(modules)[:top_modules]:
        rows.append((f"  {path}", [r["phases"].get("tier:docker", {}).get("modules", {}).get(path) for r in records]))
    head = "| phase | " + " | ".join(f"{r['kind']} {r['at']} ({r['head']}, exit {r['exit']})" for r in records) + " |"
    lines = [head, "|---|" + "---|" * len(records)]
    lines += [f"| {name} | " + " | ".join(_minutes(v) for v in values) + " |" for name, values in rows]
    counts = [r["phases"].get("tier:docker", {}).get("tests") for r in records]
    lines.append("| Docker-tier tests | " + " | ".join("" if c is None else str(c) for c in counts) + " |")
    return "\n".join(lines)


def write_baseline(record: dict, margin: float = 0.25) -> None:
    tiers = {}
    for name, phase in record["phases"].items():
        if name.startswith("tier:"):
            tiers[name.split(":", 1)[1]] = {"seconds": phase["seconds"], "tests": phase.get("tests"),
                                            "measured": f"{record['kind']} {record['at']} ({record['head']})",
                                            "modules": phase.get("modules", {})}
    BASELINE.write_text(json.dumps({"margin": margin, "tiers": tiers}, indent=1) + "\n")
    print(f"wrote {BASELINE}")


def counts(tree: Path) -> dict[str, tuple[int, int]]:
    """Per test module: (test functions, assert statements), read from the source (no collection)."""
    found = {}
    for path in sorted((tree / "tests").rglob("test_*.py")):
        module = ast.parse(path.read_text())
        tests = sum(1 for node in ast.walk(module)
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"))
        asserts = sum(1 for node in ast.walk(module) if isinstance(node, ast.Assert))
        found[str(path.relative_to(tree))] = (tests, asserts)
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run_p = sub.add_parser("run", help="a whole .ci/run on a fresh clone of HEAD, timed by phase")
    run_p.add_argument("--cold", action="store_true", help="empty the engine and the builder cache first")
    run_p.add_argument("--workdir", type=Path, help="where the clone and the log go (default: a temp folder)")
    table_p = sub.add_parser("table", help="the markdown table of one or more records")
    table_p.add_argument("records", nargs="+", type=Path)
    base_p = sub.add_parser("baseline", help="write benchmarks/ci_baseline.json from a record")
    base_p.add_argument("record", type=Path)
    base_p.add_argument("--margin", type=float, default=0.25)
    count_p = sub.add_parser("counts", help="tests and asserts per module, for each tree given")
    count_p.add_argument("trees", nargs="*", type=Path, default=[REPO])
    args = parser.parse_args(argv)
    if args.verb == "run":
        run(args.cold, args.workdir)
    elif args.verb == "table":
        print(table([json.loads(p.read_text()) for p in args.records]))
    elif args.verb == "baseline":
        write_baseline(json.loads(args.record.read_text()), args.margin)
    else:
        per_tree = [counts(t) for t in args.trees]
        names = sorted(set().union(*per_tree))
        print("| module | " + " | ".join(f"{t} tests / asserts" for t in args.trees) + " |")
        print("|---|" + "---|" * len(args.trees))
        for name in names:
            print(f"| {name} | " + " | ".join("%d / %d" % c[name] if name in c else "-" for c in per_tree) + " |")
        totals = [tuple(map(sum, zip(*c.values()))) for c in per_tree]
        print("| **total** | " + " | ".join("%d / %d" % t for t in totals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
