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
    .venv/bin/python benchmarks/rehearsal_cycle.py --engine-vs-sim [--topology pd]

--engine-vs-sim: the CPU engine rehearsal's cycle (launch, smoke, down) against the simulator's, in
the same run: time to ready (the launch's own ready.json) and the project's peak memory (the sum over
its containers, `docker stats` sampled every 2 s), as engine/sim ratios. The image and the engine's
model are made by an untimed launch first.

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


def _mem_bytes(text: str) -> float:
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return 0.0


class PeakMemory:
    """The peak of the summed memory of one compose project's containers, sampled by `docker stats`."""

    def __init__(self, project: str):
        import threading

        self.project, self.peak, self._stop = project, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"],
                                 capture_output=True, text=True).stdout
            total = sum(_mem_bytes(line.split()[1]) for line in out.splitlines()
                        if line.startswith(self.project + "-") and len(line.split()) > 1)
            self.peak = max(self.peak, total)
            self._stop.wait(2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)


def ready_seconds(runs: Path, project: str) -> float:
    found = sorted((runs / project).glob("*-launch/ready.json"))
    return json.loads(found[-1].read_text())["seconds"]


def engine_vs_sim(topology: str, runs: Path, env: dict[str, str]) -> dict:
    out = {}
    for mode in ("sim", "engine"):
        config = runs / f"{mode}-{topology}.yaml"
        project = f"cycle-{mode}"
        config.write_text(f"project: {project}\nnetwork:\n  front_port: 31978\n")
        c = ["-c", str(config)]
        # Untimed: builds the image if its inputs changed and (engine) trains the model if missing.
        timed([BUNDLE, "launch", topology, "--rehearsal", mode, *c, "--timeout", "15m"], env)
        timed([BUNDLE, "down", topology, *c], env)
        with PeakMemory(f"{project}-{topology}") as mem:
            launch = timed([BUNDLE, "launch", topology, "--rehearsal", mode, *c, "--timeout", "15m"], env)
            smoke = timed([BUNDLE, "smoke", topology, *c], env)
        down = timed([BUNDLE, "down", topology, *c], env)
        out[mode] = {"ready_s": round(ready_seconds(runs, f"{project}-{topology}"), 1), "launch_s": round(launch, 1),
                     "smoke_s": round(smoke, 1), "down_s": round(down, 1), "peak_mem_gb": round(mem.peak / 1e9, 2)}
    out["engine_over_sim"] = {"ready": round(out["engine"]["ready_s"] / out["sim"]["ready_s"], 1),
                              "peak_mem": round(out["engine"]["peak_mem_gb"] / max(out["sim"]["peak_mem_gb"], 1e-9), 1)}
    return out


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def driver_cycle(topology: str, config: Path, env: dict[str, str]) -> dict[str, float]:
    c = ["-c", str(config)]
    return {
        "launch": timed([BUNDLE, "launch", topology, "--rehearsal", "sim", *c], env),
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
    parser.add_argument("--engine-vs-sim", action="store_true",
                        help="the CPU engine rehearsal's cycle against the simulator's (ready time, peak memory)")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="cycle-runs-"))
    env = dict(os.environ, BUNDLE_RUNS_DIR=str(runs))
    if args.engine_vs_sim:
        results = {t: engine_vs_sim(t, runs, env) for t in (args.topology if args.topology != ["tp4", "pd"] else ["pd"])}
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "kind": "engine_vs_sim", "nproc": os.cpu_count(),
                "load_avg_1m": round(os.getloadavg()[0], 2), "results": results}
        for topology, r in results.items():
            for mode in ("sim", "engine"):
                m = r[mode]
                print(f"{topology} {mode:6} ready {m['ready_s']:6.1f} s  launch {m['launch_s']:6.1f} s  "
                      f"smoke {m['smoke_s']:5.1f} s  down {m['down_s']:5.1f} s  peak {m['peak_mem_gb']:5.2f} GB")
            print(f"{topology} engine/sim: ready x{r['engine_over_sim']['ready']}, peak memory "
                  f"x{r['engine_over_sim']['peak_mem']}")
        _append(line)
        return 0
    results = {}
    for topology in args.topology:
        config = runs / f"{topology}.yaml"
        config.write_text("project: cycle\nnetwork:\n  front_port: 31977\n")
        project = f"cycle-{topology}"
        drivers, peers = [], []
        # One untimed launch/down first: builds the rehearsal image if needed and renders the env.
        timed([BUNDLE, "launch", topology, "--rehearsal", "sim", "-c", str(config)], env)
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
    _append(line)
    return 0


def _append(line: dict) -> None:
    out = REPO / "runs" / "benchmarks" / "rehearsal_cycle.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    sys.exit(main())
