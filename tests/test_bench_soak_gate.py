"""`bundle bench --soak` (a fixed duration at one concurrency: errors and latency drift, stored like
other runs) and `--gate PCT [--against RUN]` (exit 1 naming the metric that got worse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.stack.docker import ToolRun
from bundle.verify import bench, bench_serving, runstore, tables
from tests.test_bench import captured


class Clock:
    def __init__(self, now=1_800_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


class SoakStack:
    """run_tool for a soak: each round takes `round_s` of the clock and finishes `per_round`
    requests, whose latency grows by `growth_ms` per request (a server slowing down); `fail_in`
    makes one request of that round fail; each round's bench_serving takes `startup_s` to send its
    first request."""

    def __init__(self, clock, *, round_s=20.0, per_round=10, growth_ms=0.0, fail_in=None, supply=None,
                 startup_s=0.0):
        self.clock, self.round_s, self.per_round, self.growth, self.fail_in = clock, round_s, per_round, growth_ms, fail_in
        self.startup = startup_s
        self.supply = supply  # prompts the dataset holds (None: enough)
        self.calls, self.done = [], 0

    def run_tool(self, service, command, *, name, timeout, volumes, env, user, on_line):
        asked = int(command[command.index("--num-prompts") + 1])
        self.calls.append({"name": name, "timeout": timeout, "num_prompts": asked})
        if self.supply is not None and asked > self.supply:
            self.clock.now += 1.0
            return ToolRun(3, f"{bench_serving.DATASET_SHORT} supplied={self.supply} wanted={asked}", False)
        progress = Path(volumes[0][0]) / Path(env["BUNDLE_BENCH_PROGRESS"]).name
        cut = timeout < self.startup + self.round_s
        count = int(self.per_round * max(0.0, min(timeout - self.startup, self.round_s)) / self.round_s)
        start = self.clock.now + self.startup
        lines = [{"ok": True, "error": "", "t": start + 0.1, "latency": 0.1, "ttft": 0.01, "output_len": 10}  # warm-up
                 ] if timeout > self.startup else []
        for i in range(count):
            latency = 1.0 + self.growth * self.done / 1000
            self.done += 1
            bad = self.fail_in == len(self.calls) and i == 0
            lines.append({"ok": not bad, "error": "HTTP 500: simulated failure" if bad else "",
                          "t": start + (i + 1) * self.round_s / (self.per_round + 1), "latency": latency,
                          "ttft": 0.1, "output_len": 91})
        progress.write_text("".join(json.dumps(x) + "\n" for x in lines))
        self.clock.now += min(timeout, self.startup + self.round_s)
        if cut:
            return ToolRun(137, "killed", True)
        prompts = int(command[command.index("--num-prompts") + 1])
        line = dict(captured(), completed=prompts, errors=["HTTP 500" if self.fail_in == len(self.calls) else ""]
                    + [""] * (prompts - 1))
        (Path(volumes[0][0]) / f"c{command[command.index('--max-concurrency') + 1]}.jsonl").write_text(json.dumps(line) + "\n")
        return ToolRun(0, "", False)


def soak(tmp_path, stack, duration=60.0, project="soak-unit"):
    dep = load_config(None)
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path), "BUNDLE_LOCK_HASH": "abc"}
    plan = bench.plan(dep, registry.get("tp4"), env, concurrency=[8], prompts_per_concurrency=1)
    return bench.run_soak(stack, plan, duration_s=duration, project=project, mode=True, env=env,
                          api_key_file=None, redact=lambda t: t, clock=stack.clock)


def test_a_steady_soak_passes_and_is_stored_like_other_runs(tmp_path, runs_dir):
    clock = Clock()
    record, run_dir = soak(tmp_path, SoakStack(clock))
    assert record["ok"] and record["kind"] == "soak"
    assert [r["status"] for r in record["rounds"]] == ["ok", "ok", "ok"]
    s = record["soak"]
    # Windows are measured on the traffic (first to last finished request), a third of it here.
    assert s["completed"] == 30 and s["failed"] == 0 and 18 < s["window_s"] < 20
    assert s["drift"] == {"latency_pct": 0.0, "ttft_pct": 0.0, "tpot_pct": 0.0}
    assert s["first_window"]["mean_tpot_ms"] == pytest.approx(10.0)  # (1.0 - 0.1) / 90 s
    history = runstore.read_jsonl(runs_dir / "soak-unit" / runstore.BENCH_HISTORY)
    assert history[-1]["run_id"] == record["run_id"] and (run_dir / "soak.json").is_file()
    like = {"kind": "bench", "run_id": "next", "topology": "tp4", "rehearsal": record["rehearsal"],
            "config": {k: record["config"].get(k) for k in ("input_len", "output_len")}}
    assert runstore.previous_bench(history, like) is None  # a soak is not a bench to compare with


def test_latency_drift_from_the_first_minute_to_the_last_is_reported(tmp_path, runs_dir):
    record, _ = soak(tmp_path, SoakStack(Clock(), growth_ms=50.0), duration=180.0)
    s = record["soak"]
    assert 55 < s["window_s"] <= 60.0 and record["ok"]
    assert s["drift"]["latency_pct"] > 50 and s["drift"]["tpot_pct"] > 50
    assert s["last_window"]["mean_latency_ms"] > s["first_window"]["mean_latency_ms"]
    table = tables.soak_table(record)
    assert table.row_count == 4


def test_errors_during_a_soak_fail_it_and_a_cut_last_round_does_not(tmp_path, runs_dir):
    stack = SoakStack(Clock(), round_s=25.0, fail_in=2)
    record, _ = soak(tmp_path, stack)
    assert not record["ok"] and record["soak"]["failed"] == 1
    assert record["soak"]["error_samples"] == ["HTTP 500: simulated failure"]
    assert record["rounds"][1]["status"] == "failed"  # bench_serving counted the failure too
    clean, _ = soak(tmp_path, SoakStack(Clock(), round_s=25.0), project="soak-clean")
    assert [r["status"] for r in clean["rounds"]] == ["ok", "ok", "cut"] and clean["ok"]


def test_the_soak_counts_from_the_first_request_not_from_bench_servings_start(tmp_path, runs_dir):
    # bench_serving takes longer to start (45 s: a loaded host importing torch) than the soak lasts.
    stack = SoakStack(Clock(), round_s=20.0, startup_s=45.0)
    record, _ = soak(tmp_path, stack, duration=40.0)
    assert record["ok"], record["rounds"]
    assert [r["status"] for r in record["rounds"]] == ["ok", "cut"]  # 20 s left after the first: cut
    assert stack.calls[0]["timeout"] == 40.0 + bench.SOAK_START_ALLOWANCE_S
    assert record["soak"]["completed"] == 10 and record["soak"]["start_up_s"] == pytest.approx(45.0)
    assert "after bench_serving's 45 s start" in tables.soak_table(record).title
    # A bench_serving that sends nothing within the allowance fails the soak, as a timeout.
    never, _ = soak(tmp_path, SoakStack(Clock(), startup_s=1000.0), duration=40.0, project="soak-never")
    assert not never["ok"] and never["soak"]["completed"] == 0 and never["soak"]["start_up_s"] is None


def _run(run_id, *, tput, tpot, ttft, image="sha256:1", lock="abc", input_len=256, topology="tp4"):
    return {"kind": "bench", "run_id": run_id, "topology": topology, "image": {"id": image}, "lock_hash": lock,
            "config": {"input_len": input_len, "output_len": 256, "concurrency": [1], "base_url": "x"},
            "levels": [{"concurrency": 1, "status": "ok", "metrics": {
                "output_throughput": tput, "mean_tpot_ms": tpot, "mean_ttft_ms": ttft}}]}


def test_the_gate_names_the_metric_that_got_worse():
    then = _run("20261201-080000-bench", tput=100.0, tpot=10.0, ttft=500.0)
    now = _run("20261201-090000-bench", tput=96.0, tpot=10.9, ttft=505.0)
    result = bench.gate(now, then, 5)
    assert not result.ok and len(result.regressions) == 1
    assert result.regressions[0].startswith("C=1 TPOT (mean_tpot_ms): 10.00 -> 10.90 (+9.0%)")
    assert bench.gate(now, then, 10).ok
    slower = _run("x", tput=80.0, tpot=10.0, ttft=800.0)
    names = [line.split(" (")[0] for line in bench.gate(slower, then, 5).regressions]
    assert names == ["C=1 throughput", "C=1 TTFT"]


def test_the_gate_defaults_to_the_last_run_of_the_same_config_and_image():
    now = _run("20261201-120000-bench", tput=1, tpot=1, ttft=1)
    history = [_run("20261201-080000-bench", tput=1, tpot=1, ttft=1),
               _run("20261201-090000-bench", tput=1, tpot=1, ttft=1, image="sha256:other"),
               _run("20261201-100000-bench", tput=1, tpot=1, ttft=1, input_len=64),
               _run("20261201-103000-bench", tput=1, tpot=1, ttft=1, topology="pd"),
               {"kind": "soak", "run_id": "20261201-110000-soak", "topology": "tp4"}, now]
    assert bench.gate_reference(history, now)["run_id"] == "20261201-080000-bench"
    assert bench.gate_reference(history, now, "20261201-09")["run_id"] == "20261201-090000-bench"
    assert bench.gate_reference(history, now, "20261201-1") is None  # names two runs
    assert bench.gate_reference([now], now) is None


def test_gate_lines_say_pass_or_fail_and_why():
    then = _run("a", tput=100.0, tpot=10.0, ttft=500.0)
    lines = tables.gate_lines(bench.gate(_run("b", tput=50.0, tpot=10.0, ttft=500.0), then, 5))
    assert lines[0] == "gate 5% against run a: FAIL" and "throughput" in lines[1]


def test_rounds_are_sized_to_fill_the_time_left_at_the_measured_rate():
    lines = [{"t": 100.0 + 0.5 * i} for i in range(11)]  # 2 requests/s
    assert bench.next_round_prompts(lines, left_s=100.0, at_least=8, cap=None) == 241
    assert bench.next_round_prompts(lines, left_s=100.0, at_least=8, cap=64) == 64
    assert bench.next_round_prompts(lines[:1], left_s=100.0, at_least=8, cap=None) == 8  # no rate yet
    assert bench.next_round_prompts(lines, left_s=1.0, at_least=8, cap=None) == 8


def test_a_dataset_smaller_than_a_sized_round_resizes_it_without_failing_the_soak(tmp_path, runs_dir):
    stack = SoakStack(Clock(), supply=12)
    record, _ = soak(tmp_path, stack)
    asked = [c["num_prompts"] for c in stack.calls]
    assert asked[0] == 8 and asked[1] > 12 and set(asked[2:]) == {12}, asked
    assert [r["status"] for r in record["rounds"]][:2] == ["ok", "resized"] and record["ok"]
