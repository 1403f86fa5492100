"""bundle tune's pieces without Docker: the search-space file refused with file, line and key path;
candidates from the levers; least disruptive first; the estimate from what runs/ recorded; the
objective and ranking; the resume key; skips with reasons (SGLang's parser, the image audit, the
budget); the simulator's speed rules and refusals in a real simulator process."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import requests

from bundle.config.source import DEFAULTS_NAME, Source, parse_yaml
from bundle.errors import ConfigError
from bundle.rehearsal.simulator import speed
from bundle.rehearsal.simulator.knobs import Knobs
from bundle.tune import plan as planner
from bundle.tune import results
from bundle.tune.space import Candidate, Objective, Space, candidates, load_space
from bundle.verify import runstore, tables
from bundle.rehearsal import registry as modes
from tests.conftest import write_config
from tests.sim_process import launch_command, simulator, REPO


def _space(tmp_path, text: str):
    return load_space(write_config(tmp_path, text, name="space.yaml"))


# ---- the space file ----------------------------------------------------------------------------
def test_a_bad_space_file_names_file_line_key_path_and_what_is_allowed(tmp_path):
    with pytest.raises(ConfigError) as err:
        _space(tmp_path, "levers:\n  moe_runer: [triton]\n  speculative: [mtp-heavy]\n"
                         "candidates:\n  - name: a\n    overrides: {levers: {kv_cache_dtyp: bf16}}\n"
                         "budget: soon\n")
    text = str(err.value)
    assert "space.yaml: 4 problems; nothing was started" in text
    assert "space.yaml:2: levers.moe_runer: unknown key; did you mean 'moe_runner'?" in text
    assert 'space.yaml:3: levers.speculative[0]: "mtp-heavy" is not allowed; use one of "none", "mtp", "mtp-light"' in text
    assert "space.yaml:6: candidates[0].overrides.levers.kv_cache_dtyp: unknown key; did you mean 'kv_cache_dtype'?" in text
    assert 'space.yaml:7: budget: "soon" is not a duration' in text


def test_two_candidates_with_one_name_are_refused(tmp_path):
    with pytest.raises(ConfigError) as err:
        _space(tmp_path, "candidates:\n  - {name: a, overrides: {levers: {speculative: mtp}}}\n"
                         "  - {name: a, overrides: {levers: {speculative: none}}}\n")
    assert "space.yaml:3: candidates[1].name: 'a' is also candidates[0]'s name" in str(err.value)


def test_default_candidates_are_each_lever_value_that_differs_from_the_config():
    base = planner.merged_config(parse_yaml("levers: {speculative: mtp}\ntp4: {extra_args: [--enable-metrics]}\n",
                                            "bundle.yaml"), load_space(None))
    cands = {c.name: c for c in candidates(load_space(None), base, "tp4")}
    assert "speculative=mtp" not in cands and "speculative=none" in cands  # the config's own value is "defaults"
    assert cands["defaults"].overrides == {}
    assert cands["moe_runner=marlin"].overrides == {"levers": {"moe_runner": "marlin"}}
    # A graph cap keeps the server's own extra_args (lists replace, so the overlay carries them).
    assert cands["cuda_graph_max_bs=16"].overrides == {
        "tp4": {"extra_args": ["--enable-metrics", "--cuda-graph-max-bs-decode", "16"]}}
    pd = {c.name: c for c in candidates(load_space(None), base, "pd")}
    assert set(pd["cuda_graph_max_bs=64"].overrides["pd"]) == {"prefill", "decode"}


def test_a_space_file_narrows_the_levers_and_adds_explicit_candidates(tmp_path):
    space = _space(tmp_path, "include_defaults: false\nlevers:\n  moe_runner: [auto, triton]\n"
                             "candidates:\n  - {name: both, overrides: {levers: {speculative: mtp, moe_runner: marlin}}}\n")
    names = [c.name for c in candidates(space, planner.merged_config(None, space), "tp4")]
    assert names == ["moe_runner=triton", "both"]


# ---- ordering, estimate -------------------------------------------------------------------------
def test_candidates_run_least_disruptive_first():
    cands = [Candidate("moe", {"levers": {"moe_runner": "triton"}}, "x"),
             Candidate("other", {"pd": {"bootstrap_port": 9000}}, "x"),
             Candidate("graphs", {"tp4": {"extra_args": ["--cuda-graph-max-bs-decode", "8"]}}, "x"),
             Candidate("mtp", {"levers": {"speculative": "mtp"}}, "x"),
             Candidate("defaults", {}, "x"),
             Candidate("p2p", {"levers": {"pcie_safe_collectives": True}}, "x")]
    assert [c.name for c in planner.order(cands)] == ["defaults", "p2p", "graphs", "mtp", "moe", "other"]


def test_the_estimate_comes_from_recorded_launches_and_benches_else_is_assumed(runs_dir):
    method = {"input_len": 16, "output_len": 8, "concurrency": [1], "prompts_per_concurrency": 2}
    assumed = planner.estimate("p-tp4", no_gpu=False, levels=2, method=method)
    assert assumed.launch_s == 900 and assumed.bench_s == 360 and "assumed (GPU host)" in assumed.source
    project = runs_dir / "p-tp4"
    for n, seconds in enumerate((20, 30, 100)):
        (project / f"2026120{n}-launch").mkdir(parents=True)
        (project / f"2026120{n}-launch" / "ready.json").write_text(json.dumps({"seconds": seconds}))
    runstore.append_jsonl(project / "bench.jsonl", {"kind": "bench", "ok": True, "config": method,
                                                  "levels": [{"seconds": 12.0}, {"seconds": 8.0}]})
    runstore.append_jsonl(project / "bench.jsonl", {"kind": "bench", "ok": True, "config": {**method, "output_len": 9},
                                                  "levels": [{"seconds": 500.0}]})
    est = planner.estimate("p-tp4", no_gpu=False, levels=2, method=method)
    assert est.launch_s == 30 and est.bench_s == 20  # medians; the other method's run does not count
    assert "3 recorded launches" in est.source and "1 recorded bench runs" in est.source
    results.append("p-tp4", {"key": "k", "status": "ok", "seconds": {"launch": 7, "smoke": 1, "bench": 2, "down": 1}})
    assert planner.estimate("p-tp4", no_gpu=False, levels=2, method=method).per_candidate_s == 11


# ---- objective, ranking, resume key --------------------------------------------------------------
def _run(name, status="ok", levels=()):
    return {"name": name, "status": status, "levels": [
        {"concurrency": c, "metrics": {"output_throughput": t, "mean_tpot_ms": p, "mean_ttft_ms": f}}
        for c, t, p, f in levels]}


def test_throughput_at_a_tpot_bound_and_tpot_at_c1_rank_differently():
    a = _run("a", levels=[(1, 50.0, 20.0, 100.0), (8, 300.0, 60.0, 400.0)])
    b = _run("b", levels=[(1, 60.0, 15.0, 100.0), (8, 250.0, 40.0, 300.0)])
    broken = _run("broken", status="failed")
    plain = results.rank([dict(a), dict(b), dict(broken)], Objective("throughput"))
    assert [r["name"] for r in plain] == ["a", "b", "broken"] and plain[0]["score_at"] == "C=8"
    bounded = results.rank([dict(a), dict(b)], Objective("throughput", max_tpot_ms=50))
    assert [(r["name"], r["score"]) for r in bounded] == [("b", 250.0), ("a", 50.0)]
    assert results.rank([dict(a), dict(b)], Objective("tpot"))[0]["name"] == "b"
    none = results.rank([dict(a)], Objective("throughput", max_ttft_ms=10))
    assert none[0]["score"] is None and none[0]["score_at"] == "no level within the bound"


def test_the_resume_key_changes_with_the_overrides_the_config_the_method_and_the_knobs():
    args = dict(topology="tp4", overrides={"levers": {"speculative": "mtp"}}, config={"project": "p"},
                bench={"concurrency": [1]}, mode="sim", sim={}, lock_hash="abc")
    key = results.resume_key(**args)
    assert key == results.resume_key(**json.loads(json.dumps(args))) and len(key) == 12
    for change in ({"overrides": {}}, {"config": {"project": "q"}}, {"bench": {"concurrency": [8]}},
                   {"sim": {"SIM_TPOT_MS": "5"}}, {"lock_hash": "def"}, {"topology": "pd"}):
        assert results.resume_key(**{**args, **change}) != key, change


# ---- the plan: skips with reasons ---------------------------------------------------------------
def _plan(tmp_path, space_text: str, *, budget_s=None, config="project: p\n"):
    user = parse_yaml(config, str(tmp_path / "bundle.yaml"))
    space = _space(tmp_path, space_text)
    return planner.make_plan(space, user, topology="tp4", mode=modes.get("sim"), sim={}, budget_s=budget_s,
                             lock_hash="abc")


def test_candidates_sglang_rejects_are_skipped_before_any_launch(tmp_path, runs_dir):
    plan = _plan(tmp_path, "candidates:\n  - name: ambiguous\n    overrides: {tp4: {extra_args: [--cuda-graph-max-bs, '16']}}\n"
                           "  - name: repeats-a-lever\n    overrides: {tp4: {extra_args: [--moe-runner-backend, triton]}}\n")
    skips = {p.candidate.name: p.candidate.skip for p in plan.items}
    assert skips["defaults"] is None
    assert "rejected before launch" in skips["ambiguous"] and "SGLang's parser" in skips["ambiguous"]
    assert "ambiguous option" in skips["ambiguous"] or "cuda-graph-max-bs" in skips["ambiguous"]
    assert "--moe-runner-backend is set by the bundle itself" in skips["repeats-a-lever"]
    assert [p.candidate.name for p in plan.to_run] == ["defaults"]
    assert any("no image audit report of this lock under runs/" in n for n in plan.notes)


def test_the_image_audit_skips_a_kernel_without_sm120_code(tmp_path, runs_dir):
    (runs_dir / "audit" / "lock-abc").mkdir(parents=True)
    (runs_dir / "audit" / "lock-abc" / "latest.json").write_text(json.dumps({"lock_hash": "abc", "libraries": [
        {"path": "/opt/venv/lib/python3.12/site-packages/sgl_kernel/sm100/common_ops.abi3.so", "runs_on_sm120": False}]}))
    plan = _plan(tmp_path, "levers:\n  moe_runner: [marlin, triton]\n")
    skips = {p.candidate.name: p.candidate.skip for p in plan.items}
    assert "moe_runner_backend=marlin needs sgl_kernel/sm100/common_ops.abi3.so" in skips["moe_runner=marlin"]
    assert skips["moe_runner=triton"] is None
    assert any("from the image audit" in n for n in plan.notes)


def test_the_budget_stops_before_the_estimate_exceeds_it(tmp_path, runs_dir):
    plan = _plan(tmp_path, "levers:\n  speculative: [mtp, mtp-light]\n", budget_s=270)  # 130 s each assumed (2 levels)
    assert [p.candidate.name for p in plan.to_run] == ["defaults", "speculative=mtp"]
    assert plan.items[2].candidate.skip.startswith("over budget")


def test_finished_candidates_are_resumed_not_run_again(tmp_path, runs_dir):
    first = _plan(tmp_path, "levers:\n  speculative: [mtp]\n")
    results.append("p-tp4", {"key": first.items[0].candidate.key, "name": "defaults", "status": "ok"})
    again = _plan(tmp_path, "levers:\n  speculative: [mtp]\n")
    assert again.items[0].previous is not None and [p.candidate.name for p in again.to_run] == ["speculative=mtp"]
    changed = _plan(tmp_path, "levers:\n  speculative: [mtp]\n", config="project: p\nsmoke: {max_tokens: 16}\n")
    assert len(changed.to_run) == 2  # another config: nothing is reused


# ---- the simulator's speed rules ----------------------------------------------------------------
def test_speed_rules_match_parsed_and_resolved_arguments():
    knobs = Knobs()
    lines = speed.apply_speed_rules(knobs, {"moe_runner_backend": "auto", "speculative_algorithm": "EAGLE"},
                                    {"moe_runner_backend": "flashinfer_mxfp4"},
                                    "moe_runner_backend=flashinfer_mxfp4:tpot*0.5,ttft=20;speculative_algorithm=eagle:tpot*0.5;"
                                    "kv_cache_dtype=bf16:tpot*9")
    assert knobs.tpot_ms == 2.5 and knobs.ttft_ms == 20 and len(lines) == 3 and "SIMULATED" in lines[0]
    assert speed.refused({"kv_cache_dtype": "bf16"}, {}, "kv_cache_dtype=bf16") == "kv_cache_dtype=bf16"
    assert speed.refused({"kv_cache_dtype": "auto"}, {}, "kv_cache_dtype=bf16") is None
    with pytest.raises(SystemExit, match="tpot\\*F"):
        speed.parse_rules("moe_runner_backend=triton:speed*2")


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_simulator_process_takes_its_speed_from_its_own_arguments_or_refuses_to_start(tmp_path):
    env = {"SIM_SPEED_RULES": "moe_runner_backend=triton:tpot*3", "SIM_TPOT_MS": "10"}
    with simulator(tmp_path, env=env) as (base, _proc, log):  # its command line says --moe-runner-backend auto
        assert requests.get(base + "/sim/faults", timeout=5).json()["tpot_ms"] == 10
    cmd = [sys.executable, "-m", "bundle.rehearsal.simulator", *launch_command(1, "--kv-cache-dtype", "bf16")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "SIM_ARG_PARSER": "fallback",
                               "SIM_REFUSE_ARGS": "kv_cache_dtype=bf16", "SIM_LOAD_SECONDS": "0"})
    assert done.returncode == 1 and "refusing to start with kv_cache_dtype=bf16 (SIM_REFUSE_ARGS" in done.stderr + done.stdout


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_simulator_whose_arguments_match_a_rule_runs_at_the_simulated_speed(tmp_path):
    env = {"SIM_SPEED_RULES": "moe_runner_backend=auto:tpot*3", "SIM_TPOT_MS": "10"}
    with simulator(tmp_path, env=env) as (base, _proc, log):
        assert requests.get(base + "/sim/faults", timeout=5).json()["tpot_ms"] == 30
        time.sleep(0.2)
        assert "simulated speed rule moe_runner_backend=auto: tpot_ms 10 -> 30 (SIMULATED)" in log.read_text()


# ---- the comparison names the defaults' run -----------------------------------------------------
def test_the_bench_comparison_names_the_run_and_its_label():
    level = {"concurrency": 1, "metrics": {"output_throughput": 20.0, "mean_ttft_ms": 5.0, "mean_tpot_ms": 4.0}}
    record = {"config": {"input_len": 16, "output_len": 8}, "levels": [level]}
    then = {"run_id": "20261201-090000-bench", "label": "tune defaults", "config": {"input_len": 16, "output_len": 8},
            "levels": [{"concurrency": 1, "metrics": {"output_throughput": 10.0, "mean_ttft_ms": 5.0, "mean_tpot_ms": 8.0}}]}
    table = tables.comparison_table(record, None, then, previous_name="run")
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "run 20261201-090000-bench (tune defaults)" in text and "+100.0%" in text


def test_no_config_file_means_the_embedded_defaults_as_the_base():
    base = planner.merged_config(Source(DEFAULTS_NAME, {}), Space(None, {}, []))
    assert base["project"] == "sglang-bundle" and base["levers"]["speculative"] == "none"


def test_a_forced_collectives_value_that_auto_already_decides_is_not_run_twice(tmp_path, runs_dir):
    plan = _plan(tmp_path, "levers:\n  pcie_safe_collectives: [true, false]\n")
    skips = {p.candidate.name: p.candidate.skip for p in plan.items}
    assert "auto already decides true here" in skips["pcie_safe_collectives=true"]
    assert skips["pcie_safe_collectives=false"] is None  # a rehearsal: nothing to probe, P2P simulated


def test_the_sweep_stops_before_a_candidate_would_overrun_the_budget(tmp_path, runs_dir, monkeypatch):
    from rich.console import Console

    from bundle.tune import runner

    plan = _plan(tmp_path, "levers:\n  speculative: [mtp, mtp-light]\n")
    plan.budget_s = 300.0  # the plan fits all three at its assumed 130 s ... until they measure slower
    plan.items[0].estimate_s = plan.items[1].estimate_s = plan.items[2].estimate_s = 90.0
    ran = []

    def measured(item, plan_, sweep, console):  # each candidate takes 200 s of the sweep's clock
        ran.append(item.candidate.name)
        clock[0] += 200.0
        return {"status": "ok", "seconds": {"total": 200.0}, "phase": "done"}

    clock = [0.0]
    monkeypatch.setattr(runner, "run_candidate", measured)
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    runner.run_sweep(plan, runner.Sweep(config=None, mode=modes.get("sim")), Console(file=open("/dev/null", "w")),
                     started=0.0)
    assert ran == ["defaults"]  # 200 s spent + 200 s measured per candidate > 300 s
    assert plan.items[1].candidate.skip.startswith("over budget: 3.3 min spent")
