"""bench: planning levels from config and flags, reading bench_serving's own output file (a line
captured from SGLang 0.5.23's bench_serving against the rehearsal), and keeping what was measured
when a later level fails or runs out of time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundle import topology as registry
from bundle.verify import bench
from bundle.verify import bench_serving
from bundle.verify import runstore
from bundle.config.loader import load_config
from bundle.stack.docker import ToolRun
from tests.conftest import write_config

DATA = Path(__file__).parent / "data" / "bench"
KEY = "sk-bench-test-key"


def captured() -> dict:
    """One real bench_serving result line (tests/data/bench/README.md says how it was made)."""
    return bench_serving.parse_lines((DATA / "bench_serving_c1.jsonl").read_text())[-1]


def test_captured_line_has_the_fields_the_report_reads():
    line = captured()
    for key in ("completed", "output_throughput", "total_throughput", "mean_ttft_ms", "median_ttft_ms",
                "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "errors", "server_info"):
        assert key in line, key


def test_summary_keeps_metrics_counts_failures_and_drops_server_info():
    line = captured()
    summary = bench_serving.summarize(line, num_prompts=len(line["errors"]))
    assert summary["metrics"]["output_throughput"] == line["output_throughput"]
    assert summary["metrics"]["mean_tpot_ms"] == line["mean_tpot_ms"]
    assert summary["failed_requests"] == 0 and summary["error_samples"] == []
    assert "server_info" not in json.dumps(summary)
    # Failed requests are counted from the per-request errors, with distinct samples kept.
    line = dict(line, completed=1, errors=["", "HTTP 500: boom", "HTTP 500: boom", "timeout"])
    summary = bench_serving.summarize(line, num_prompts=4)
    assert summary["failed_requests"] == 3 and summary["error_samples"] == ["HTTP 500: boom", "timeout"]
    # Without --output-details, whatever did not complete failed.
    line.pop("errors")
    assert bench_serving.summarize(line, num_prompts=4)["failed_requests"] == 3


def test_plan_is_the_original_method_by_default(tmp_path):
    dep = load_config(None)
    plan = bench.plan(dep, registry.get("tp4"), {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path)})
    assert [(lv.concurrency, lv.num_prompts) for lv in plan.levels] == [(1, 4), (8, 32)]
    assert {(lv.input_len, lv.output_len) for lv in plan.levels} == {(256, 256)}
    assert plan.base_url == "http://server:30000"
    assert plan.levels[0].timeout_s == 30 * 60
    assert plan.dataset_path is None  # no shipped file: bench_serving downloads ShareGPT, as originally
    args = bench_serving.arguments(plan.levels[1], base_url=plan.base_url, tokenizer="/model",
                                   output_file="/bench-out/c8.jsonl", dataset_path=None)
    joined = " ".join(args)
    for part in ("--backend sglang", "--dataset-name random", "--random-input-len 256",
                 "--random-output-len 256", "--num-prompts 32", "--max-concurrency 8",
                 "--output-file /bench-out/c8.jsonl", "--tokenizer /model"):
        assert part in joined


def test_flags_override_config_and_pd_targets_the_router(tmp_path):
    (tmp_path / "bench-sharegpt.json").write_text("[]")
    dep = load_config(write_config(tmp_path, "bench:\n  concurrency: [2]\n  level_timeout: 90s\n"))
    plan = bench.plan(dep, registry.get("pd"), {"ROUTER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path)},
                      concurrency=[1, 4], output_len=64, prompts_per_concurrency=2, label="x")
    assert [(lv.concurrency, lv.num_prompts, lv.output_len, lv.timeout_s) for lv in plan.levels] == \
        [(1, 2, 64, 90.0), (4, 8, 64, 90.0)]
    assert plan.base_url == "http://router:30000"
    assert plan.dataset_path == "/model/bench-sharegpt.json"  # shipped with the model: offline


def test_behind_a_router_each_request_names_the_served_model_and_a_lone_server_is_not_sent_one(tmp_path):
    """pd's router routes by model (--enable-igw) and refuses a native /generate without one."""
    dep = load_config(None)
    env = {"ROUTER_PORT": "30000", "WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path),
           "SERVED_MODEL_NAME": "deepseek-v4-flash"}
    for name, model in (("pd", "deepseek-v4-flash"), ("dp", "deepseek-v4-flash"), ("tp4", None)):
        plan = bench.plan(dep, registry.get(name), env)
        assert plan.model == model
        args = bench_serving.arguments(plan.levels[0], base_url=plan.base_url, tokenizer="/model",
                                       output_file="/o.jsonl", dataset_path=None, model=plan.model)
        body = args[args.index("--extra-request-body") + 1] if "--extra-request-body" in args else None
        assert body == (json.dumps({"model": model}) if model else None)


class FakeStack:
    """Stands in for docker.Stack.run_tool only: writes what bench_serving wrote at each level."""

    def __init__(self, outcomes: dict[int, str]):
        self.outcomes = outcomes  # concurrency -> "ok" | "timeout" | "nothing"
        self.calls = []

    def run_tool(self, service, command, *, name, timeout, volumes, env, user, on_line):
        self.calls.append({"service": service, "command": command, "name": name, "volumes": volumes})
        concurrency = int(command[command.index("--max-concurrency") + 1])
        out_dir = Path(volumes[0][0])
        outcome = self.outcomes[concurrency]
        if outcome == "ok":
            prompts = int(command[command.index("--num-prompts") + 1])
            line = dict(captured(), max_concurrency=concurrency, completed=prompts, errors=[""] * prompts)
            line["server_info"] = {"api_key": KEY}
            (out_dir / f"c{concurrency}.jsonl").write_text(json.dumps(line) + "\n")
            return ToolRun(0, f"Output token throughput (tok/s): {line['output_throughput']}", False)
        if outcome == "timeout":
            return ToolRun(137, "Starting warmup with 1 sequences...", True)
        if outcome == "short":
            return ToolRun(3, f"{bench_serving.DATASET_SHORT} supplied=3 wanted=4", False)
        if outcome == "gone":  # the warm-up, 3 completed, 1 failed; then the router was removed
            progress = out_dir / Path(env["BUNDLE_BENCH_PROGRESS"]).name
            lines = [{"ok": True, "error": ""}] * 4 + [{"ok": False, "error": "ConnectionRefusedError"}]
            progress.write_text("".join(json.dumps(x) + "\n" for x in lines))
            return ToolRun(1, "Traceback (most recent call last):\nrequests.exceptions.ConnectionError", False)
        if outcome == "warmup-aborted":  # the server aborted the warm-up (decode's KV transfer failed)
            progress = out_dir / Path(env["BUNDLE_BENCH_PROGRESS"]).name
            progress.write_text(json.dumps({"ok": False, "error": "aborted by the server: Decode handshake "
                                                                  "failed for request rank=0"}) + "\n")
            return ToolRun(1, "ValueError: Warmup failed - Please make sure ...", False)
        return ToolRun(1, "Traceback ...\nRuntimeError: Warmup failed - Please make sure ...", False)


def run_plan(tmp_path, dep, outcomes, concurrency):
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path), "BUNDLE_LOCK_HASH": "abc123"}
    plan = bench.plan(dep, registry.get("tp4"), env, concurrency=concurrency)
    stack = FakeStack(outcomes)
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    record, run_dir = bench.run(stack, plan, project="bench-unit", mode=True, env=env,
                                api_key_file=str(key_file), redact=lambda t: t.replace(KEY, "***"))
    return record, run_dir, stack


def test_a_timed_out_level_keeps_the_measured_ones_and_skips_the_rest(tmp_path, runs_dir):
    record, _run_dir, stack = run_plan(tmp_path, load_config(None), {1: "ok", 8: "timeout", 16: "ok"},
                                      [1, 8, 16])
    assert [lv["status"] for lv in record["levels"]] == ["ok", "timeout", "skipped"]
    assert record["levels"][0]["metrics"]["output_throughput"] == captured()["output_throughput"]
    assert "only this level's container was killed" in record["levels"][1]["reason"]
    assert len(stack.calls) == 2 and not record["ok"]
    # Each level is its own one-off container of the compose `bench` service, uniquely named.
    assert {c["service"] for c in stack.calls} == {"bench"}
    assert len({c["name"] for c in stack.calls}) == 2
    # One JSON line per run in the project's history, with provenance.
    history = runstore.read_jsonl(runs_dir / "bench-unit" / runstore.BENCH_HISTORY)
    assert len(history) == 1 and history[0]["run_id"] == record["run_id"]
    assert history[0]["lock_hash"] == "abc123" and history[0]["driver_version"] == "none (rehearsal)"


def test_the_key_never_reaches_runs(tmp_path, runs_dir):
    record, run_dir, stack = run_plan(tmp_path, load_config(None), {1: "ok"}, [1])
    assert record["ok"]
    # The key travels as a mounted file, never as an argument or environment variable.
    call = stack.calls[0]
    assert KEY not in json.dumps(call["command"]) and (str(tmp_path / "key"), bench.KEY_MOUNT, "ro") in call["volumes"]
    for path in runs_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(), path
    stored = json.loads((run_dir / "c1.jsonl").read_text())
    assert "removed by the bundle" in stored["server_info"]


def test_a_level_without_result_is_failed_with_the_tail_of_its_output(tmp_path, runs_dir):
    record, _, _ = run_plan(tmp_path, load_config(None), {1: "nothing", 8: "ok"}, [1, 8])
    first, second = record["levels"]
    assert first["status"] == "failed" and "Warmup failed" in first["reason"]
    assert second["status"] == "ok"  # a failure (not a timeout) does not stop later levels


@pytest.mark.parametrize("text", ["", "not json\n"])
def test_no_lines_from_an_empty_or_damaged_file(text):
    assert bench_serving.parse_lines(text) == []


def test_the_launchers_lines_account_for_every_request():
    observed = [{"ok": True, "error": ""}]  # the warm-up comes first
    observed += [{"ok": True, "error": ""}] * 3 + [{"ok": False, "error": "HTTP 502: upstream gone"}]
    counts = bench_serving.tally(observed, num_prompts=6)
    assert counts["metrics"]["completed"] == 3 and counts["failed_requests"] == 1 and counts["unsent"] == 2
    assert counts["error_samples"] == ["HTTP 502: upstream gone"]


def test_a_failed_warm_up_names_the_servers_error_and_counts_every_prompt_unsent(tmp_path, runs_dir):
    record, _, _ = run_plan(tmp_path, load_config(None), {2: "warmup-aborted"}, [2])
    (level,) = record["levels"]
    assert level["status"] == "failed" and not record["ok"]
    assert level["reason"] == ("the warm-up request failed (aborted by the server: Decode handshake failed for "
                               "request rank=0); none of the 8 requests was sent")
    assert (level["metrics"]["completed"], level["failed_requests"], level["unsent"]) == (0, 0, 8)


def test_a_dataset_too_small_for_the_prompts_fails_before_sending_with_the_fix(tmp_path, runs_dir):
    record, _, _ = run_plan(tmp_path, load_config(None), {1: "short"}, [1])
    (level,) = record["levels"]
    assert level["status"] == "failed" and not record["ok"]
    assert "supplies only 3 of the 4 prompts" in level["reason"] and "bench.dataset_path" in level["reason"]
    assert level["metrics"]["completed"] + level["failed_requests"] + level["unsent"] == 4


def test_a_stack_that_went_away_mid_run_is_said_so_and_every_request_is_counted(tmp_path, runs_dir):
    dep = load_config(None)
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path)}
    plan = bench.plan(dep, registry.get("tp4"), env, concurrency=[2])
    record, _ = bench.run(FakeStack({2: "gone"}), plan, project="bench-gone", mode=True, env=env,
                          api_key_file=None, redact=lambda t: t, stack_gone=lambda: "router is gone")
    (level,) = record["levels"]
    assert level["status"] == "failed" and "the stack went away during the run (router is gone)" in level["reason"]
    assert "Traceback" not in level["reason"]
    # 8 asked: 3 completed and 1 failed before the stack went, 4 never sent.
    assert (level["metrics"]["completed"], level["failed_requests"], level["unsent"]) == (3, 1, 4)


def test_after_the_stack_went_away_no_further_level_is_started(tmp_path, runs_dir):
    # A next level's `compose run` would bring back the network (and a container) `bundle down` removed.
    dep = load_config(None)
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path)}
    plan = bench.plan(dep, registry.get("tp4"), env, concurrency=[2, 4])
    stack = FakeStack({2: "gone", 4: "ok"})
    record, _ = bench.run(stack, plan, project="bench-gone-2", mode=True, env=env,
                          api_key_file=None, redact=lambda t: t,
                          stack_gone=lambda: "router is gone" if stack.calls else None)
    assert len(stack.calls) == 1
    first, second = record["levels"]
    assert first["status"] == "failed"
    assert second["status"] == "skipped" and "the stack went away (router is gone)" in second["reason"]
    assert not record["ok"]


def test_a_running_level_reports_requests_done_of_asked_from_the_launchers_progress_file(tmp_path):
    level = bench_serving.Level(concurrency=2, num_prompts=8, input_len=8, output_len=8, range_ratio=1.0,
                                timeout_s=60)
    progress_file = tmp_path / "c2.progress.jsonl"
    assert bench.read_progress(progress_file, level, 1.0).line() == "C=2: 0 of 8 requests done (1 s elapsed)"
    lines = [{"ok": True, "error": ""}] * 4 + [{"ok": False, "error": "HTTP 503"}]  # warm-up first
    progress_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert bench.read_progress(progress_file, level, 42.4).line() == \
        "C=2: 4 of 8 requests done, 1 failed (42 s elapsed)"
