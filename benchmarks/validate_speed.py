"""How long `bundle validate` takes on the default config, against a named peer in the same run.

Peer: `docker compose config` of the same rendered topology, i.e. compose's own parse and
validation of the files, which every launch pays anyway. Both are run as fresh processes, as a
user runs them, N times each, interleaved so that machine noise hits both alike.

    .venv/bin/python benchmarks/validate_speed.py [--runs 15] [--verbs]

With --verbs, also each verb's start-up: `bundle VERB --help` (the command line, the verb's module and
what it imports at the top, its parser; nothing of its work), against the same peer.

With --against TREE (another checkout of this repository, e.g. a `git worktree` of the last release),
every bundle subject is timed a second time with that tree's code (PYTHONPATH=TREE, same interpreter),
interleaved with the rest: a before/after pair measured in one run, against one peer.

Prints a table and appends one JSON line to runs/benchmarks/validate.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# As a user runs them: Python keeps its bytecode cache. (A shell that sets PYTHONDONTWRITEBYTECODE, as
# the development machine's does, would make every run compile the driver from source.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env=env or ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--verbs", action="store_true", help="also time `bundle VERB --help` for every verb")
    parser.add_argument("--against", metavar="TREE", help="also time every bundle subject with TREE's code")
    args = parser.parse_args()
    bundle = str(Path(sys.executable).parent / "bundle")
    subprocess.run([bundle, "render", "pd"], check=True, capture_output=True, cwd=REPO)
    env_file = REPO / "runs" / "sglang-bundle-pd" / "bundle.env"
    subjects = {
        "bundle validate (tp4 + pd)": [bundle, "validate"],
        "bundle validate pd": [bundle, "validate", "pd"],
        "docker compose config (pd, peer)": ["docker", "compose", "--env-file", str(env_file),
                                             "-f", "compose/pd.yaml", "config", "--quiet"],
    }
    if args.verbs:
        sys.path.insert(0, str(REPO))
        from bundle.cli import verb_names

        subjects |= {f"bundle {verb} --help": [bundle, verb, "--help"] for verb in verb_names()}
    envs: dict[str, dict[str, str]] = {name: ENV | {"PYTHONPATH": str(REPO)} for name in subjects}
    if args.against:
        tree = str(Path(args.against).resolve())
        for name, cmd in list(subjects.items()):
            if name.startswith("bundle"):
                subjects[f"{name} [{Path(tree).name}]"] = cmd
                envs[f"{name} [{Path(tree).name}]"] = ENV | {"PYTHONPATH": tree}
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    for name, cmd in subjects.items():  # one warm-up each: page cache, not what we measure
        timed(cmd, envs[name])
    for _ in range(args.runs):
        for name, cmd in subjects.items():
            samples[name].append(timed(cmd, envs[name]))
    peer = statistics.median(samples["docker compose config (pd, peer)"])
    result = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node(), "runs": args.runs,
              "median_s": {n: round(statistics.median(s), 4) for n, s in samples.items()},
              "max_s": {n: round(max(s), 4) for n, s in samples.items()}}
    width = max(38, *(len(name) for name in samples))
    print(f"{'subject':{width}} {'median':>9} {'max':>9} {'x peer':>8}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:{width}} {median * 1000:7.0f}ms {max(values) * 1000:7.0f}ms {median / peer:8.2f}")
    out = REPO / "runs" / "benchmarks" / "validate.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    floor = 0.5
    verdict = "under" if result["median_s"]["bundle validate (tp4 + pd)"] < floor else "OVER"
    print(f"bundle validate (both topologies): {verdict} the {floor} s floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
