"""P2P decided per host and small all-reduces timed: the all-reduce probe script (run for real: without a GPU its workers fail and its
hang bound kills them), its parser on probe outputs (tests/data/nccl), the decision, the doctor
check's verdict, and launch's decision without a GPU. The probe on real GPUs is marked `gpu`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bundle.config.levers import Collectives
from bundle.config.loader import load_config
from bundle.doctor import allreduce_latency, allreduce_runs, checks_collectives, nvidia_smi, p2p_decision
from bundle.findings import Level
from tests.conftest import require_module, write_config

DATA = Path(__file__).parent / "data" / "nccl"
SMI = Path(__file__).parent / "data" / "nvidia_smi"
GPUS = (0, 1, 2, 3)


def run_of(name: str, p2p: str, gpus=GPUS) -> allreduce_runs.AllReduceRun:
    return allreduce_runs.interpret((DATA / name).read_text(), gpus=gpus, p2p=p2p, where="sample")


def _levers(tmp_path, value: str):
    return load_config(write_config(tmp_path, f"levers:\n  pcie_safe_collectives: {value}\n")).levers


# ---- the parser ----------------------------------------------------------------------------------

def test_a_p2p_run_reads_bandwidth_transport_and_peer_access():
    run = run_of("pcie_p2p_on_ok.txt", "on")
    assert run.ok and not run.hung and run.kinds == {"P2P"}
    assert run.transports == ["P2P/CUMEM/read"] and run.busbw_gbps == pytest.approx(21.37)
    assert run.peer_access["0->3"] is True and run.nccl_version == "2.27.7"
    off = run_of("pcie_p2p_off_ok.txt", "off")
    assert off.ok and off.kinds == {"SHM"} and off.busbw_gbps == pytest.approx(14.89)


def test_a_hung_run_is_a_hang_not_a_pass():
    run = run_of("pcie_p2p_on_hung.txt", "on")
    assert not run.ok and run.hung and "hung" in run.describe()


def test_output_without_a_result_line_is_a_crash():
    run = allreduce_runs.interpret("Segmentation fault (core dumped)\n", gpus=GPUS, p2p="on", where="x")
    assert not run.ok and "no result line" in run.error


def test_missing_ranks_fail_the_run():
    text = (DATA / "pcie_p2p_on_ok.txt").read_text().splitlines()
    dropped = "\n".join(line for line in text if '"rank": 3' not in line)
    run = allreduce_runs.interpret(dropped, gpus=GPUS, p2p="on", where="x")
    assert not run.ok and "3 of 4 ranks reported" in run.error


# ---- the decision -------------------------------------------------------------------------------

def test_p2p_that_works_and_is_faster_is_chosen():
    decision = p2p_decision.decide({"prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"),
                                              "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is False and decision.source == "probe"
    assert "prefill: with P2P 21.4 GB/s" in decision.reason and "without 14.9 GB/s" in decision.reason
    assert decision.evidence["groups"]["prefill"]["on"]["transports"] == ["P2P/CUMEM/read"]


def test_a_p2p_hang_on_one_group_makes_the_host_pcie_safe():
    decision = p2p_decision.decide({
        "prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")},
        "decode": {"on": run_of("pcie_p2p_on_hung.txt", "on", (4, 5, 6, 7)),
                   "off": run_of("pcie_p2p_off_ok.txt", "off", (4, 5, 6, 7))}})
    assert decision.pcie_safe is True and decision.source == "probe"
    assert "decode (GPUs 4,5,6,7): all-reduce with P2P hung" in decision.reason
    assert "without P2P it 14.9 GB/s" in decision.reason


def test_p2p_slower_than_shared_memory_is_not_chosen():
    slow = run_of("pcie_p2p_on_ok.txt", "on")
    slow.busbw_gbps = 3.0
    decision = p2p_decision.decide({"tp4": {"on": slow, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "P2P is slower (3.0 GB/s)" in decision.reason


def test_nothing_probed_is_the_safe_fallback():
    assert p2p_decision.decide({}) == Collectives(True, "fallback", "no GPU group was probed: the safe setting",
                                                {"groups": {}, "links": {}})


# ---- the doctor check's verdict -------------------------------------------------------------------

def test_the_check_fails_when_nccl_fails_even_without_p2p():
    broken = allreduce_runs.interpret("boom\n", gpus=GPUS, p2p="off", where="x")
    result = checks_collectives.judge({"tp4": {"on": run_of("pcie_p2p_on_hung.txt", "on"), "off": broken}}, {}, "auto")
    assert result.status is Level.FAIL and "fails even with P2P off" in result.summary


def test_the_check_warns_when_the_config_forces_p2p_where_it_hangs():
    runs = {"tp4": {"on": run_of("pcie_p2p_on_hung.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")}}
    assert checks_collectives.judge(runs, {}, False).status is Level.WARN
    auto = checks_collectives.judge(runs, {}, "auto")
    assert auto.status is Level.OK and auto.summary.startswith("auto chooses the PCIe-safe setting")
    assert auto.details["decision"]["pcie_safe"] is True


def test_the_doctor_check_skips_without_a_gpu(monkeypatch):
    from bundle.doctor.context import HostContext

    monkeypatch.setenv("PATH", "/nonexistent")
    result = checks_collectives.nccl_allreduce(HostContext(gpu_groups={"tp4": GPUS}))
    assert result.status is Level.SKIP and "no GPU here" in result.summary


# ---- what launch decides -----------------------------------------------------------------------

def test_forced_values_are_not_probed(tmp_path):
    for value, safe in (("true", True), ("false", False)):
        decision = p2p_decision.decide_for_host(_levers(tmp_path, value), {"tp4": GPUS}, image=None,
                                               probe=lambda g: pytest.fail("probed"))
        assert decision.pcie_safe is safe and decision.source == "forced"


def test_auto_without_a_gpu_takes_the_safe_setting_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi, as on this CPU machine
    decision = p2p_decision.decide_for_host(_levers(tmp_path, "auto"), {"tp4": GPUS}, image=None)
    assert decision.pcie_safe is True and decision.source == "fallback"
    assert "no GPU facts here" in decision.reason and "nvidia-smi is not on PATH" in decision.reason
    rehearsal = p2p_decision.decide_for_host(_levers(tmp_path, "auto"), {"tp4": GPUS}, image=None, no_gpu=True)
    assert rehearsal.pcie_safe is True and "rehearsal" in rehearsal.reason


def test_auto_with_probe_results_decides_from_them_with_the_topology_as_evidence(tmp_path, monkeypatch):
    topo = nvidia_smi.parse_topology((SMI / "rtxpro6000x8_topo.txt").read_text())
    monkeypatch.setattr(nvidia_smi, "query_topology", lambda: topo)
    runs = {"prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")}}
    decision = p2p_decision.decide_for_host(_levers(tmp_path, "auto"), {"prefill": GPUS}, image=None,
                                           probe=lambda groups: runs)
    assert decision.pcie_safe is False and decision.evidence["links"]["prefill"][0].startswith("0-1 ")


def test_the_decision_reaches_the_rendered_flags_and_environment(tmp_path, runs_dir):
    from tests.conftest import render_for

    dep = load_config(write_config(tmp_path, "levers:\n  pcie_safe_collectives: auto\n"))
    p2p = render_for(dep, "pd", collectives=Collectives(False, "probe", "P2P works"))
    safe = render_for(dep, "pd")  # no decision: auto renders the safe setting
    assert p2p.env["NCCL_P2P_DISABLE"] == "0" and "--disable-custom-all-reduce" not in p2p.server_args("decode")
    assert safe.env["NCCL_P2P_DISABLE"] == "1" and "--disable-custom-all-reduce" in safe.server_args("decode")
    assert safe.collectives.source == "fallback"


# ---- the probe script itself ------------------------------------------------------------------

def _probe(*args, timeout=120):
    proc = subprocess.run([sys.executable, str(allreduce_runs.PROBE_PATH), *args], capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_probe_reports_failing_workers_as_data():
    """Run for real: without CUDA every worker fails; the parent still prints its result line."""
    require_module("torch")
    code, output = _probe("--gpus", "0,1", "--timeout", "90")
    run = allreduce_runs.interpret(output, gpus=(0, 1), p2p="on", where="host")
    if run.ok:
        pytest.skip("this machine has two working GPUs (the gpu test covers it)")
    assert code == 0 and not run.hung and run.error and "rank" in run.error


def test_the_hang_bound_kills_every_worker():
    """Workers that outlive the bound (here: still importing torch after 0.3 s) are killed, and the
    run is a hang."""
    require_module("torch")
    code, output = _probe("--gpus", "0,1", "--timeout", "0.3")
    run = allreduce_runs.interpret(output, gpus=(0, 1), p2p="on", where="host")
    assert code == 0 and run.hung and not run.ok and "within 0.3 s" in run.error


@pytest.mark.gpu
def test_a_real_all_reduce_over_two_gpus_with_p2p_on_and_off():
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    for p2p in ("on", "off"):
        _, output = _probe("--gpus", "0,1", "--p2p", p2p, "--timeout", "120", timeout=300)
        run = allreduce_runs.interpret(output, gpus=(0, 1), p2p=p2p, where="host")
        assert run.ok, output[-3000:]
        assert run.busbw_gbps and run.busbw_gbps > 0 and run.transports
        assert sorted(run.latency_s) == [8192 * 2 ** i for i in range(8)]  # decode's sizes, 8 KB to 1 MB
        if p2p == "off":
            assert "P2P" not in run.kinds


# ---- outputs captured on a real GPU (tests/data/nccl/README.md) -------------------------------------

def test_captured_one_gpu_runs_pass_with_nccls_real_log():
    for p2p in ("on", "off"):
        run = run_of(f"captured_h200x1_gpus0_p2p_{p2p}.txt", p2p, gpus=(0,))
        assert run.ok and not run.hung and run.nccl_version == "2.28.9", run.error
        assert run.transports == []  # one rank: NCCL's channels name no peer
    assert "NCCL_P2P_DISABLE set by environment to 1" in (DATA / "captured_h200x1_gpus0_p2p_off.txt").read_text()


def test_captured_cuda_error_of_a_rank_is_the_runs_error():
    run = run_of("captured_h200x1_gpus0_0_p2p_on.txt", "on", gpus=(0, 0))
    assert not run.ok and not run.hung
    # CUDA_VISIBLE_DEVICES=0,0 is an invalid list: both ranks fail, and the error says so
    assert run.error.startswith("rank 1: RuntimeError") and "invalid device ordinal" in run.error


def test_captured_hang_bound_on_a_real_gpu():
    run = run_of("captured_h200x1_hang_bound.txt", "on", gpus=(0,))
    assert run.hung and not run.ok and "within 1.5 s" in run.error


def test_p2p_without_peer_access_or_unused_by_nccl_is_not_chosen():
    denied = run_of("pcie_p2p_on_ok.txt", "on")
    denied.peer_access = dict(denied.peer_access, **{"1->2": False})
    decision = p2p_decision.decide({"tp4": {"on": denied, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "no peer access between GPUs 1->2" in decision.reason
    via_shm = run_of("pcie_p2p_on_ok.txt", "on")
    via_shm.transports = ["SHM/direct/direct"]
    decision = p2p_decision.decide({"tp4": {"on": via_shm, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "NCCL chose SHM even with P2P allowed" in decision.reason


@pytest.mark.parametrize("topo, gpus, p2p", [("h200x2_topo.txt", (0, 1), True),
                                             ("rtxpro6000x8_topo.txt", GPUS, False)])
def test_with_nothing_to_run_the_probe_in_nvlink_alone_allows_p2p(tmp_path, monkeypatch, topo, gpus, p2p):
    topology = nvidia_smi.parse_topology((SMI / topo).read_text())
    monkeypatch.setattr(nvidia_smi, "query_topology", lambda: topology)
    monkeypatch.setattr(p2p_decision, "where_to_probe", lambda image: None)
    decision = p2p_decision.decide_for_host(_levers(tmp_path, "auto"), {"tp4": gpus}, image=None)
    assert decision.pcie_safe is (not p2p)
    assert ("NVLink between every pair" in decision.reason) is p2p
    if not p2p:
        assert decision.source == "fallback" and "not all joined by NVLink" in decision.reason


# ---- small-message latency: decode's sizes, the record the bench reads ---------------------------------

def _rank_line(rank: int, latency: dict, **extra) -> str:
    import json

    from bundle.doctor.allreduce_probe import RANK_PREFIX

    return RANK_PREFIX + json.dumps({"rank": rank, "ok": True, "latency_s": latency, **extra})


def test_the_gloo_probe_times_every_decode_size_on_cpu_processes():
    """The probe's own workers, run for real as CPU processes (gloo): the same sweep a GPU host runs."""
    require_module("torch")
    from bundle.doctor.allreduce_probe import DECODE_SIZES

    code, output = _probe("--backend", "gloo", "--world", "2", "--mib", "0", "--lat-iters", "10",
                          "--timeout", "120", timeout=180)
    run = allreduce_runs.interpret(output, gpus=(0, 1), p2p="on", where="host gloo")
    assert code == 0 and run.ok, output[-2000:]
    assert sorted(run.latency_s) == list(DECODE_SIZES) == [8192 * 2 ** i for i in range(8)]
    assert all(0 < s < 1.0 for s in run.latency_s.values())  # a loopback all-reduce: micro- to milliseconds


def test_each_size_reads_the_slowest_ranks_latency_and_custom_ar_says_why_it_is_off():
    from bundle.doctor.allreduce_probe import RESULT_PREFIX

    output = "\n".join([
        _rank_line(0, {"8192": 1.3e-05, "16384": 1.4e-05}, custom_ar={"on": False, "reason": "4 GPUs not all joined by NVLink"}),
        _rank_line(1, {"8192": 1.5e-05, "16384": 1.2e-05}),
        RESULT_PREFIX + '{"ok": true, "hung": false, "exit_codes": [0, 0]}'])
    run = allreduce_runs.interpret(output, gpus=(0, 1), p2p="on", where="x")
    assert run.ok and run.latency_s == {8192: 1.5e-05, 16384: 1.4e-05}
    assert run.custom_ar == {"on": False, "reason": "4 GPUs not all joined by NVLink"}


def _latency_run(p2p: str, latency: dict[int, float], custom_ar: dict | None = None) -> allreduce_runs.AllReduceRun:
    return allreduce_runs.AllReduceRun(GPUS, p2p, "x", ok=True, latency_s=latency, custom_ar=custom_ar or {})


def test_the_record_gives_the_floor_the_latency_of_the_setting_the_servers_run(tmp_path):
    nccl_p2p = {8192: 13.9e-6, 16384: 14.7e-6, 1048576: 60e-6}
    runs = {"tp4": {"on": _latency_run("on", nccl_p2p, {"on": True, "latency_s": {8192: 6.4e-6, 16384: 7.0e-6}}),
                    "off": _latency_run("off", {8192: 20e-6, 16384: 22e-6, 1048576: 90e-6})}}
    path = allreduce_latency.write(allreduce_latency.record_of(runs), tmp_path / "doctor" / "latency.json")
    record = allreduce_latency.load(path)
    safe = allreduce_latency.latency_for(record, 4, pcie_safe=True)
    assert safe.setting == "nccl no p2p" and safe.seconds_by_bytes[8192] == pytest.approx(20e-6)
    fast = allreduce_latency.latency_for(record, 4, pcie_safe=False)
    assert fast.setting == "custom all-reduce, nccl p2p from 1 MiB"
    assert fast.seconds_by_bytes == {8192: 6.4e-6, 16384: 7.0e-6, 1048576: 60e-6}
    # a size between two measured ones costs the larger one's latency; beyond the sweep, scaled by size
    assert fast.seconds(12000) == pytest.approx(7.0e-6) and fast.seconds(2 * 1048576) == pytest.approx(120e-6)
    assert allreduce_latency.latency_for(record, 8, pcie_safe=False) is None  # no 8-GPU group measured
    assert allreduce_latency.load(tmp_path / "absent.json") is None


def test_the_doctor_check_names_a_decode_all_reduces_latency_in_the_chosen_setting():
    runs = {"tp4": {"on": run_of("pcie_p2p_on_hung.txt", "on"),
                    "off": _latency_run("off", {8192: 15.2e-6, 16384: 16.0e-6})}}
    result = checks_collectives.judge(runs, {}, "auto", allreduce_latency.record_of(runs))
    assert result.status is Level.OK and "PCIe-safe" in result.summary
    assert "8 KiB all-reduce 15.2 us (nccl no p2p on 4 GPUs)" in result.summary
    assert result.details["latency"]["groups"]["tp4"]["settings"]["nccl no p2p"]["8192"] == pytest.approx(15.2e-6)


def test_captured_h100_latency_sweep_reads_every_size_and_why_custom_ar_was_off():
    on = run_of("captured_h100x1_latency_p2p_on.txt", "on", gpus=(0,))
    off = run_of("captured_h100x1_latency_p2p_off.txt", "off", gpus=(0,))
    for run in (on, off):
        assert run.ok and run.nccl_version == "2.28.9"
        assert sorted(run.latency_s) == [8192 * 2 ** i for i in range(8)]
        assert all(5e-6 < s < 1e-3 for s in run.latency_s.values())  # one rank: NCCL's call, tens of us
    assert on.custom_ar["on"] is False and "does not import here" in on.custom_ar["reason"]
    assert off.custom_ar == {}  # not asked for without P2P: SGLang's kernel needs it
