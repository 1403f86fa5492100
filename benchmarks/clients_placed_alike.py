"""Two benchmark clients placed alike: SGLang's bench_serving and inference-perf 0.7.0, both from the
host through the router's published port, against one CPU engine rehearsal pd, alternating in one run;
`bundle bench` (bench_serving in a container on the project's Docker network) beside them.

bench_serving from the host runs in a throw-away container of the rehearsal image with the host's network
(`docker run --network host`: its requests take the same path as inference-perf's, loopback to the
published port; its process competes for the same cores); inference-perf runs from `.venv-inference-perf`
(tests/inference_perf_client.py). Each round: the three clients at C=8, 32 prompts, 32 in / 32 out,
output tokens/s from each client's own report. Ratios are against bench_serving from the host, in the
same round.

    .venv/bin/python benchmarks/clients_placed_alike.py [--rounds 3]

Prints a table and appends one JSON line to runs/benchmarks/clients_placed_alike.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bundle.cli import main  # noqa: E402
from bundle.config.loader import load_config  # noqa: E402
from bundle.images import rehearsal as rehearsal_image  # noqa: E402
from bundle.stack import engine, runstate  # noqa: E402
from bundle.verify import bench_serving  # noqa: E402
from tests import inference_perf_client as client  # noqa: E402
from tests.sim_process import free_port  # noqa: E402

IN, OUT, PROMPTS, C = 32, 32, 32, 8


def host_bench_serving(image: str, port: int, env: dict, out_dir: Path) -> float:
    level = bench_serving.Level(concurrency=C, num_prompts=PROMPTS, input_len=IN, output_len=OUT,
                                range_ratio=1.0, timeout_s=600)
    model = env["MODEL_HOST_PATH"]
    name = f"host-{time.monotonic_ns()}.jsonl"
    args = bench_serving.arguments(level, base_url=f"http://127.0.0.1:{port}", tokenizer=model,
                                   output_file=f"/out/{name}", dataset_path=None, model=env["SERVED_MODEL_NAME"])
    run = engine.run_throwaway(image, ["python3", "-m", "sglang.bench_serving", *args], purpose="clients",
                               timeout=600, env={"HF_HUB_OFFLINE": "1"}, networks=["host"],
                               volumes=[(model, model, "ro"), (out_dir, "/out", "rw")])
    lines = bench_serving.parse_lines((out_dir / name).read_text()) if (out_dir / name).is_file() else []
    if not lines:
        raise SystemExit(f"bench_serving from the host gave no result:\n{run.output[-3000:]}")
    return float(lines[-1]["output_throughput"])


def host_inference_perf(port: int, env: dict, work: Path) -> float:
    out = work / f"iperf-{time.monotonic_ns()}"
    cfg = client.config(base_url=f"http://127.0.0.1:{port}", model=env["SERVED_MODEL_NAME"],
                        tokenizer=env["MODEL_HOST_PATH"], out=out, stages=[(PROMPTS, C)], input_len=IN,
                        output_len=OUT)
    done = client.run(cfg, work, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"inference-perf failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return float(client.reports(out)["stage_0_lifecycle_metrics.json"]["successes"]["throughput"]
                 ["output_tokens_per_sec"])


def network_bundle_bench(config: Path, work: Path) -> float:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["bench", "pd", "-c", str(config), "--input-len", str(IN), "--output-len", str(OUT),
                     "--concurrency", str(C), "--prompts-per-concurrency", str(PROMPTS // C), "--json"])
    if code != 0:
        raise SystemExit(f"bundle bench exited {code}")
    return float(json.loads(buffer.getvalue())["levels"][0]["metrics"]["output_throughput"])


def run(rounds: int) -> dict:
    import os

    work = Path(tempfile.mkdtemp(prefix="clients-"))
    os.environ["BUNDLE_RUNS_DIR"] = str(work / "runs")
    port = free_port()
    project = f"clients{os.getpid()}"
    config = work / "bundle.yaml"
    config.write_text(f"project: {project}\nnetwork:\n  front_port: {port}\n")
    assert main(["launch", "pd", "-c", str(config), "--rehearsal", "engine", "--timeout", "720s"]) == 0
    rows = []
    try:
        dep = load_config(config)
        env = runstate.load(dep.project_name("pd")).env
        image = rehearsal_image.image_tag()
        out_dir = work / "out"
        out_dir.mkdir()
        out_dir.chmod(0o777)  # the image's user writes bench_serving's file there
        for n in range(1, rounds + 1):
            # alternate which client goes first, so neither always meets a warmer server
            order = ["host bench_serving", "host inference-perf", "network bench_serving"]
            if n % 2 == 0:
                order.reverse()
            row = {}
            for which in order:
                if which == "host bench_serving":
                    row[which] = host_bench_serving(image, port, env, out_dir)
                elif which == "host inference-perf":
                    row[which] = host_inference_perf(port, env, work)
                else:
                    row[which] = network_bundle_bench(config, work)
            rows.append(row)
            print(f"round {n}: " + ", ".join(f"{k} {v:.1f} tok/s" for k, v in row.items()), flush=True)
    finally:
        main(["down", "pd", "-c", str(config)])
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    peer = medians["host bench_serving"]
    return {"rounds": rows, "median_output_tok_s": medians,
            "ratio_to_host_bench_serving": {k: round(v / peer, 3) for k, v in medians.items()},
            "shape": {"input_len": IN, "output_len": OUT, "prompts": PROMPTS, "concurrency": C},
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    result = run(parser.parse_args().rounds)
    for k, v in result["median_output_tok_s"].items():
        print(f"{k:<24} {v:8.1f} output tok/s (median)  x{result['ratio_to_host_bench_serving'][k]:.2f}")
    out = REPO / "runs" / "benchmarks" / "clients_placed_alike.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(json.dumps(result) + "\n")
