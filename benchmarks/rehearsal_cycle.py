"""The full rehearsal cycle per topology, and the driver's overhead against plain compose.

For tp4 and pd, on this machine's Docker engine:
  driver cycle: `bundle launch X --rehearsal` -> `bundle smoke X` -> `bundle bench X` (C=1, 4 prompts,
                32 in / 32 out) -> `bundle down X`
  peer:         `docker compose --env-file E -f compose/X.yaml -f compose/rehearsal-X.yaml up -d --wait`
                -> `docker compose ... down`, the same files and env the driver rendered.
Overhead compares like with like: (launch + down) against the peer's (up --wait + down). The
driver does more (true readiness: router pairing and one generation; attestation), which is the
overhead being measured. Runs are interleaved, peer first, N rounds.

    .venv/bin/python benchmarks/rehearsal_cycle.py [--rounds 2] [--topology tp4 pd]

Prints a table and appends one JSON line to runs/benchmarks/rehearsal_cycle.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLE = str(Path(sys.executable).parent / "bundle")


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def driver_cycle(topology: str, config: Path, env: dict[str, str]) -> dict[str, float]:
    c = ["-c", str(config)]
    return {
        "launch": timed([BUNDLE, "launch", topology, "--rehearsal", *c], env),
        "smoke": timed([BUNDLE, "smoke", topology, *c], env),
        "bench": timed([BUNDLE, "bench", topology, *c, "--concurrency", "1", "--prompts-per-concurrency", "4",
                        "--input-len", "32", "--output-len", "32"], env),
        "down": timed([BUNDLE, "down", topology, *c], env),
    }


def peer_cycle(topology: str, project: str, env: dict[str, str], runs: Path) -> dict[str, float]:
    record = json.loads((runs / project / "launch.json").read_text())
    compose = ["docker", "compose", "-p", project, "--env-file", record["env_file"]]
    for f in record["compose_files"]:
        compose += ["-f", f]
    return {"up_wait": timed(compose + ["up", "-d", "--wait"], env),
            "down": timed(compose + ["down"], env)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--topology", nargs="+", default=["tp4", "pd"])
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="cycle-runs-"))
    env = dict(os.environ, BUNDLE_RUNS_DIR=str(runs))
    results = {}
    for topology in args.topology:
        config = runs / f"{topology}.yaml"
        config.write_text("project: cycle\nnetwork:\n  front_port: 31977\n")
        project = f"cycle-{topology}"
        drivers, peers = [], []
        # One untimed launch/down first: builds the rehearsal image if needed and renders the env.
        timed([BUNDLE, "launch", topology, "--rehearsal", "-c", str(config)], env)
        timed([BUNDLE, "down", topology, "-c", str(config)], env)
        for _ in range(args.rounds):
            peers.append(peer_cycle(topology, project, env, runs))
            drivers.append(driver_cycle(topology, config, env))
        med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
        cycle = statistics.median(sum(r.values()) for r in drivers)
        driver_up_down = med(drivers, "launch") + med(drivers, "down")
        peer_up_down = med(peers, "up_wait") + med(peers, "down")
        results[topology] = {
            "driver_s": {k: round(med(drivers, k), 1) for k in drivers[0]},
            "peer_s": {k: round(med(peers, k), 1) for k in peers[0]},
            "cycle_s": round(cycle, 1),
            "overhead_vs_compose": round(driver_up_down / peer_up_down - 1, 3),
        }
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "rounds": args.rounds, "nproc": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2), "results": results}
    print(f"{'topology':9} {'cycle':>7} {'launch':>7} {'smoke':>6} {'bench':>6} {'down':>5} | "
          f"{'up --wait':>9} {'down':>5} | overhead")
    for topology, r in results.items():
        d, p = r["driver_s"], r["peer_s"]
        print(f"{topology:9} {r['cycle_s']:6.1f}s {d['launch']:6.1f}s {d['smoke']:5.1f}s {d['bench']:5.1f}s "
              f"{d['down']:4.1f}s | {p['up_wait']:8.1f}s {p['down']:4.1f}s | {r['overhead_vs_compose']:+.0%}")
    out = REPO / "runs" / "benchmarks" / "rehearsal_cycle.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
