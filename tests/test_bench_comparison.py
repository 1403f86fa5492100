"""Bench never compares unlike runs in percent: a rehearsal is tabled only against earlier runs of the
same rehearsal mode, target and lengths; the GPU baseline only beside GPU runs at its 256/256; anything
else gets a row saying why there is no comparison, and a gate against an unlike run is an error."""

from __future__ import annotations

import argparse
import io
from dataclasses import asdict

import pytest
from rich.console import Console

from bundle.commands import bench as bench_command
from bundle.config.loader import load_config
from bundle.errors import BundleError
from bundle.verify import bench, comparable, runstore, tables

BASELINE = asdict(load_config(None).bench.baseline)


def run(run_id: str, *, topology="pd", rehearsal=None, target="compose", lengths=(256, 256), tput=10.0) -> dict:
    metrics = {"completed": 4, "output_throughput": tput, "total_throughput": tput * 2, "mean_ttft_ms": 800.0,
               "median_ttft_ms": 800.0, "mean_tpot_ms": 90.0, "median_tpot_ms": 90.0, "mean_itl_ms": 90.0}
    return {"kind": "bench", "run_id": run_id, "topology": topology, "rehearsal": rehearsal, "target": target,
            "label": None, "config": {"input_len": lengths[0], "output_len": lengths[1]},
            "image": {"id": "sha256:1"}, "lock_hash": "abc",
            "levels": [{"concurrency": 1, "status": "ok", "failed_requests": 0, "reason": None, "metrics": metrics}]}


def text(table) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_a_cpu_engine_rehearsal_prints_no_percentage_against_the_gpu_baseline():
    now = run("now", rehearsal="engine", lengths=(32, 32), tput=7.96)
    out = text(tables.comparison_table(now, BASELINE, None))
    assert "no comparison: this run is a CPU engine rehearsal; the baseline is a GPU run at 256 in / 256 out" in out
    assert "%" not in out and "10.22" not in out


def test_a_simulator_rehearsal_at_the_baselines_lengths_is_still_not_compared_with_it():
    out = text(tables.comparison_table(run("now", rehearsal="sim"), BASELINE, None))
    assert "no comparison: this run is a simulator rehearsal" in out and "%" not in out


def test_a_gpu_run_at_256_256_is_compared_with_the_baseline_in_percent():
    out = text(tables.comparison_table(run("now", tput=20.44), BASELINE, None))
    assert "no comparison" not in out
    assert any("output_throughput" in line and "10.22" in line and "+100.0%" in line for line in out.splitlines())


def test_an_engine_pd_bench_on_compose_is_not_tabled_against_a_simulator_pd_bench_on_slurm():
    earlier = run("sim-slurm", rehearsal="sim", target="slurm", lengths=(32, 32), tput=50.0)
    now = run("engine-compose", rehearsal="engine", lengths=(32, 32), tput=7.0)
    history = [earlier]
    assert runstore.previous_bench(history, now) is None
    unlike = comparable.latest_unlike(history, now)
    assert unlike["run_id"] == "sim-slurm"
    out = text(tables.comparison_table(now, BASELINE, None, unlike_previous=unlike))
    assert ("no comparison: this run is a CPU engine rehearsal of pd on compose at 32 in / 32 out; run sim-slurm "
            "is a simulator rehearsal of pd on slurm at 32 in / 32 out") in out
    assert "%" not in out


@pytest.mark.parametrize("changed", [{"topology": "tp4"}, {"rehearsal": "sim"}, {"target": "slurm"},
                                     {"lengths": (64, 32)}, {"rehearsal": None}])
def test_any_one_difference_makes_runs_unlike(changed):
    base = dict(rehearsal="engine", lengths=(32, 32))
    assert comparable.unlike(run("now", **base), run("then", **base)) is None
    assert comparable.unlike(run("now", **base), run("then", **(base | changed))) is not None


def test_like_runs_are_compared_in_percent_and_the_latest_like_one_is_chosen():
    history = [run("a", rehearsal="engine", lengths=(32, 32), tput=5.0),
               run("b", rehearsal="sim", lengths=(32, 32), tput=99.0)]
    now = run("now", rehearsal="engine", lengths=(32, 32), tput=10.0)
    previous = runstore.previous_bench(history, now)
    assert previous["run_id"] == "a"
    out = text(tables.comparison_table(now, BASELINE, previous))
    assert any("previous run a" in line and "output_throughput" in line and "+100.0%" in line
               for line in out.splitlines())


def test_the_gate_skips_unlike_runs_and_refuses_one_named_with_against(tmp_path):
    history = [run("engine-1", rehearsal="engine", lengths=(32, 32)), run("sim-1", rehearsal="sim", lengths=(32, 32))]
    now = run("now", rehearsal="engine", lengths=(32, 32))
    assert bench.gate_reference(history, now)["run_id"] == "engine-1"
    assert bench.gate_reference(history[1:], now) is None
    args = argparse.Namespace(against="sim-1", gate=5.0)
    with pytest.raises(BundleError) as caught:
        bench_command._gate(args, history, now, tmp_path, Console(file=io.StringIO()))
    assert "no comparison: this run is a CPU engine rehearsal" in str(caught.value)
    assert not (tmp_path / "gate.json").exists()


def test_recorded_runs_carry_their_target_and_an_engine_run_after_a_slurm_sim_run_prints_no_percent(
        tmp_path, runs_dir):
    """Two real records from bench.run (a scripted engine stands in for bench_serving's container):
    a simulator run on Slurm, then a CPU engine run on compose of the same topology and lengths."""
    from bundle import topology as registry
    from tests.test_bench import KEY, FakeStack

    dep = load_config(None)
    env = {"WORKER_PORT": "30000", "MODEL_HOST_PATH": str(tmp_path), "BUNDLE_LOCK_HASH": "abc123"}
    plan = bench.plan(dep, registry.get("tp4"), env, concurrency=[1])
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    records = [bench.run(FakeStack({1: "ok"}), plan, project="compare-unit", mode=mode, env=env, target=target,
                         api_key_file=str(key_file), redact=lambda t: t.replace(KEY, "***"))[0]
               for mode, target in (("sim", "slurm"), ("engine", "compose"))]
    history = runstore.read_jsonl(runs_dir / "compare-unit" / runstore.BENCH_HISTORY)
    assert [(r["rehearsal"], r["target"]) for r in history] == [("sim", "slurm"), ("engine", "compose")]
    now, earlier = records[1], history[:1]
    assert runstore.previous_bench(earlier, now) is None
    out = text(tables.comparison_table(now, BASELINE, None,
                                       unlike_previous=comparable.latest_unlike(earlier, now)))
    assert "no comparison: this run is a CPU engine rehearsal; the baseline" in out
    assert f"run {records[0]['run_id']} is a simulator rehearsal of tp4 on slurm" in out and "%" not in out


def test_a_run_at_another_range_ratio_is_named_not_compared_in_percent():
    """The report that started this: a 0.0 range-ratio run tabled against a 1.0 one as +298.9%."""
    then = run("ratio-1", rehearsal="engine", lengths=(32, 32), tput=100.0)
    now = run("ratio-0", rehearsal="engine", lengths=(32, 32), tput=398.9)
    then["config"]["range_ratio"], now["config"]["range_ratio"] = 1.0, 0.0
    assert runstore.previous_bench([then], now) is None
    out = text(tables.comparison_table(now, BASELINE, None, unlike_previous=comparable.latest_unlike([then], now)))
    assert "no comparison: run ratio-1 differs: range ratio 1.0 vs 0.0" in out and "%" not in out


@pytest.mark.parametrize("key, then, now, named", [
    ("dataset", "/model/a.json", "/model/b.json", "dataset /model/a.json vs /model/b.json"),
    ("prompts_per_concurrency", 4, 8, "prompts per concurrency 4 vs 8"),
    ("seed", 42, 7, "seed 42 vs 7"),
    ("concurrency", [1, 8], [16], "concurrency 1 8 vs 16"),
])
def test_each_difference_of_method_is_named(key, then, now, named):
    a, b = run("then", rehearsal="engine"), run("now", rehearsal="engine")
    a["config"][key], b["config"][key] = then, now
    assert named in comparable.unlike(b, a)


def test_other_gpus_or_another_image_are_unlike_and_a_key_an_older_record_lacks_is_not():
    a, b = run("then"), run("now")
    a["gpus"], b["gpus"] = ["NVIDIA H200"] * 2, ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 4
    assert "GPUs 2x NVIDIA H200 vs 4x NVIDIA RTX PRO 6000" in comparable.unlike(b, a)
    c, d = run("then"), run("now")
    d["image"] = {"id": "sha256:2"}
    assert "image sha256:1" in comparable.unlike(d, c)
    e, f = run("then"), run("now")
    f["config"]["seed"] = 42  # an older record has no seed: unknown, not different
    assert comparable.unlike(f, e) is None
