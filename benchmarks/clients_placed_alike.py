"""Two benchmark clients placed alike: inference-perf and SGLang's bench_serving against ONE CPU engine pd
rehearsal, the same workload, alternating, several rounds each.

docs/reading-a-bench.md once set inference-perf (on the host, through the router's published port) at
240-286 output tok/s beside `bundle bench`'s 490-635 (bench_serving in a container on the stack's
network) and put the gap down to where each client runs. This measures it with the placement held equal:

  inference-perf   host, published port          .venv-inference-perf, as tests/e2e/test_engine_e2e.py
  bench_serving    host network, published port  the rehearsal image's own SGLang, `docker run --network
                                                 host` (the project's .venv has SGLang but no transformers,
                                                 which bench_serving imports, so it cannot run there)
  bench_serving    Docker network, front service  the same command on the stack's network, as `bundle
                                                 bench` places it (the third column: placement alone)

Workload for all three: /v1/completions, streamed, EOS ignored, 32 in / 32 out (fixed lengths), C=8,
32 requests, offline (HF_HUB_OFFLINE=1, the rehearsal model's own tokenizer folder). Every container on
this host shares the same cores, so "host network" and "host" differ only in the process's namespace.

    .venv/bin/python benchmarks/clients_placed_alike.py [--rounds 3] [--keep-up]

Launches `bundle launch pd --rehearsal engine` under a project of its own (a free front port), always
takes it down at the end (its cache volume too), prints a table and the ratio of medians, and writes
benchmarks/records/clients_placed_alike-<UTC stamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import inference_perf_client as iperf  # noqa: E402  (the client exactly as the suite runs it)

BUNDLE = str(Path(sys.executable).parent / "bundle")
RECORDS = REPO / "benchmarks" / "records"
LAUNCH_TIMEOUT = "12m"
RUN_TIMEOUT_S = 300
SEED = 42
DATASET = "bench-sharegpt.json"  # the rehearsal model folder's ShareGPT file (random prompts are cut from it)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bundle(*args: str) -> None:
    subprocess.run([BUNDLE, *args], cwd=REPO, check=True)


def stack_facts(project: str, front_port: int) -> dict:
    """The launched pd's served model name, model folder, front service, port and network."""
    from bundle import topology as registry
    from bundle.stack import runstate

    env = runstate.load(f"{project}-pd").env
    topology = registry.get("pd")
    networks = subprocess.run(["docker", "network", "ls", "-q", "--filter",
                               f"label=com.docker.compose.project={project}-pd", "--format", "{{.Name}}"],
                              capture_output=True, text=True, check=True).stdout.split()
    if len(networks) != 1:
        raise SystemExit(f"expected one network for {project}-pd, found {networks}")
    return {"model": env["SERVED_MODEL_NAME"], "model_dir": env["MODEL_HOST_PATH"],
            "image": env["REHEARSAL_IMAGE"], "front_service": topology.front_service,
            "service_port": env.get(topology.front_port_variable) or "30000",
            "host_port": front_port, "network": networks[0]}


def run_inference_perf(facts: dict, work: Path, *, requests: int, concurrency: int, input_len: int,
                       output_len: int) -> dict:
    out = work / "reports"
    cfg = iperf.config(base_url=f"http://127.0.0.1:{facts['host_port']}", model=facts["model"],
                       tokenizer=facts["model_dir"], out=out, stages=[(requests, concurrency)],
                       input_len=input_len, output_len=output_len)
    done = iperf.run(cfg, work, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"inference-perf failed:\n{(done.stdout + done.stderr)[-3000:]}")
    report = iperf.reports(out)["stage_0_lifecycle_metrics.json"]
    stage, duration = report["successes"], report["benchmark_time_seconds"]
    # Its output tok/s counts the tokens of the returned text as its own tokenizer reads it again
    # (output_len); the server's usage count (output_tokens) is kept beside it.
    return {"completed": stage["count"], "output_tok_s": stage["throughput"]["output_tokens_per_sec"],
            "mean_ttft_ms": stage["latency"]["time_to_first_token"]["mean"] * 1000,
            "mean_tpot_ms": stage["latency"]["time_per_output_token"]["mean"] * 1000,
            "duration_s": duration, "output_tokens_counted": stage["output_len"]["mean"] * stage["count"],
            "output_tokens_usage": stage["output_tokens"]["total"],
            "output_tok_s_usage": stage["output_tokens"]["total"] / duration}


def run_bench_serving(facts: dict, work: Path, *, in_network: bool, requests: int, concurrency: int,
                      input_len: int, output_len: int) -> dict:
    if in_network:
        network, base_url = facts["network"], f"http://{facts['front_service']}:{facts['service_port']}"
    else:
        network, base_url = "host", f"http://127.0.0.1:{facts['host_port']}"
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o777)  # the image's user writes its result line here
    args = ["--backend", "sglang-oai", "--base-url", base_url, "--model", facts["model"],
            "--tokenizer", "/model", "--dataset-name", "random", "--dataset-path", f"/model/{DATASET}",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--random-range-ratio", "1.0", "--num-prompts", str(requests), "--max-concurrency",
            str(concurrency), "--seed", str(SEED), "--warmup-requests", "1", "--disable-tqdm",
            "--output-file", "/out/result.jsonl",
            # bench_serving's completions body carries "best_of": 1, which smg refuses on a stream
            # (400 best_of_not_supported_with_stream); null leaves it out of the router's reading.
            "--extra-request-body", json.dumps({"best_of": None})]
    command = ["docker", "run", "--rm", "--network", network, "--entrypoint", "python3",
               "-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1",
               "-v", f"{facts['model_dir']}:/model:ro", "-v", f"{work}:/out",
               facts["image"], "-m", "sglang.bench_serving", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    result_file = work / "result.jsonl"
    if done.returncode != 0 or not result_file.is_file():
        raise SystemExit(f"bench_serving failed ({network}):\n{(done.stdout + done.stderr)[-3000:]}")
    result = json.loads(result_file.read_text().splitlines()[-1])
    # Its output tok/s already counts the server's usage (total_output_tokens); the retokenized count
    # is its own second figure.
    return {"completed": result["completed"], "output_tok_s": result["output_throughput"],
            "mean_ttft_ms": result["mean_ttft_ms"], "mean_tpot_ms": result["mean_tpot_ms"],
            "duration_s": result["duration"], "output_tokens_counted": result["total_output_tokens"],
            "output_tokens_usage": result["total_output_tokens"],
            "output_tokens_retokenized": result.get("total_output_tokens_retokenized"),
            "output_tok_s_usage": result["total_output_tokens"] / result["duration"]}


def table(rows: list[dict]) -> str:
    lines = [f"{'client':<15} {'placement':<30} {'round':>5} {'out tok/s':>10} {'TTFT ms':>9} {'TPOT ms':>9} "
             f"{'dur s':>6} {'tokens':>7} {'usage tok/s':>12}"]
    for r in rows:
        lines.append(f"{r['client']:<15} {r['placement']:<30} {r['round']:>5} {r['output_tok_s']:>10.1f} "
                     f"{r['mean_ttft_ms']:>9.1f} {r['mean_tpot_ms']:>9.1f} {r['duration_s']:>6.2f} "
                     f"{r['output_tokens_counted']:>7.0f} {r['output_tok_s_usage']:>12.1f}")
    return "\n".join(lines)


def medians(rows: list[dict]) -> dict[str, dict[str, float]]:
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(f"{r['client']} / {r['placement']}", []).append(r)
    keys = ("output_tok_s", "output_tok_s_usage", "mean_ttft_ms", "mean_tpot_ms", "duration_s")
    return {key: {m: statistics.median(r[m] for r in group) for m in keys} for key, group in by.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--no-in-network", action="store_true", help="skip the third column")
    opts = parser.parse_args()
    if not iperf.EXECUTABLE.is_file():
        raise SystemExit(f"no inference-perf at {iperf.EXECUTABLE}: `make install` makes it")
    workload = {"requests": opts.requests, "concurrency": opts.concurrency, "input_len": opts.input_len,
                "output_len": opts.output_len}
    project = f"clients-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="clients-placed-alike-"))
    config, front_port = work / "bundle.yaml", free_port()
    config.write_text(f"project: {project}\nnetwork:\n  front_port: {front_port}\n")
    os.environ.setdefault("BUNDLE_RUNS_DIR", str(work / "runs"))
    clients = [("inference-perf", "host, published port", run_inference_perf, {}),
               ("bench_serving", "host network, published port", run_bench_serving, {"in_network": False})]
    if not opts.no_in_network:
        clients.append(("bench_serving", "Docker network, front service", run_bench_serving,
                        {"in_network": True}))
    rows: list[dict] = []
    started = time.monotonic()
    try:
        bundle("launch", "pd", "-c", str(config), "--rehearsal", "engine", "--timeout", LAUNCH_TIMEOUT)
        ready_s = time.monotonic() - started
        facts = stack_facts(project, front_port)
        for round_no in range(1, opts.rounds + 1):
            # Each round starts with the next client: none is always the first load after a pause.
            shift = (round_no - 1) % len(clients)
            for name, placement, run, extra in clients[shift:] + clients[:shift]:
                out = work / f"r{round_no}-{name}-{len(rows)}"
                out.mkdir()
                row = {"client": name, "placement": placement, "round": round_no,
                       **run(facts, out, **extra, **workload)}
                rows.append(row)
                print(table([row]).splitlines()[1], flush=True)
    finally:
        # --volumes: the project is this run's own, so its JIT cache volume goes with it
        subprocess.run([BUNDLE, "down", "pd", "-c", str(config), "--volumes"], cwd=REPO, check=False)
    summary = medians(rows)
    ip_m = summary["inference-perf / host, published port"]
    bs_m = summary["bench_serving / host network, published port"]
    ip, bs = ip_m["output_tok_s"], bs_m["output_tok_s"]
    ip_usage, bs_usage = ip_m["output_tok_s_usage"], bs_m["output_tok_s_usage"]
    print("\n" + table(rows) + "\n\nmedians:")
    for key, m in summary.items():
        print(f"  {key:<48} {m['output_tok_s']:7.1f} tok/s ({m['output_tok_s_usage']:7.1f} by usage)  "
              f"TTFT {m['mean_ttft_ms']:6.1f} ms  TPOT {m['mean_tpot_ms']:6.1f} ms  {m['duration_s']:.2f} s")
    print(f"bench_serving / inference-perf, both through the published port: {bs / ip:.2f} as each reports "
          f"it, {bs_usage / ip_usage:.2f} both counted by the server's usage")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RECORDS.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": "clients_placed_alike", "when": stamp, "host": socket.gethostname(),
              "cpus": os.cpu_count(), "stack": "bundle launch pd --rehearsal engine", "workload": {
                  **workload, "api": "/v1/completions, streamed, EOS ignored", "offline": True},
              "ready_s": round(ready_s, 1), "rows": rows, "medians": summary,
              "ratio_bench_serving_over_inference_perf_alike": round(bs / ip, 3),
              "ratio_by_server_usage": round(bs_usage / ip_usage, 3),
              "image": facts["image"]}
    path = RECORDS / f"clients_placed_alike-{stamp}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"record: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
