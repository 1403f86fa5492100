"""GPU checks against nvidia-smi outputs: a stand-in `nvidia-smi` on PATH prints the captured or
documented-format samples, so the real subprocess call and parsers run; no GPU is faked as OK
where there is none (see the SKIP tests)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bundle.doctor import checks_gpu
from bundle.doctor.context import HostContext
from bundle.findings import Level

DATA = Path(__file__).parent / "data" / "nvidia_smi"
PD_GROUPS = {"prefill": (0, 1, 2, 3), "decode": (4, 5, 6, 7)}


def install_nvidia_smi(tmp_path: Path, monkeypatch, query: str, topo: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) cat '{query}' ;;
  topo) cat '{topo}' ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def rtx_box(tmp_path, monkeypatch):
    install_nvidia_smi(tmp_path, monkeypatch, DATA / "rtxpro6000x8_query.csv", DATA / "rtxpro6000x8_topo.txt")


@pytest.fixture
def h200_box(tmp_path, monkeypatch):
    install_nvidia_smi(tmp_path, monkeypatch, DATA / "h200x2_query.csv", DATA / "h200x2_topo.txt")


def test_rtx_pro_6000_box_passes_driver_and_gpu_checks(rtx_box):
    ctx = HostContext(gpu_groups=PD_GROUPS)
    driver = checks_gpu.driver(ctx)
    assert driver.status is Level.OK and "580.95.05" in driver.summary
    gpus = checks_gpu.gpus(ctx)
    assert gpus.status is Level.OK, gpus.summary
    assert "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition" in gpus.summary


def test_pcie_only_box_warns_unless_the_config_makes_collectives_safe(rtx_box):
    unsafe = checks_gpu.p2p_topology(HostContext(gpu_groups=PD_GROUPS, pcie_safe_collectives=False))
    assert unsafe.status is Level.WARN
    assert "NCCL_P2P_DISABLE=1" in unsafe.remediation and "--disable-custom-all-reduce" in unsafe.remediation
    assert unsafe.details["groups"]["prefill"]["links"] == ["NODE", "PIX"]
    safe = checks_gpu.p2p_topology(HostContext(gpu_groups=PD_GROUPS, pcie_safe_collectives=True))
    assert safe.status is Level.OK and "PCIe only" in safe.summary


def test_a_tp_group_spanning_both_sockets_lists_its_cross_socket_pairs(rtx_box):
    result = checks_gpu.p2p_topology(HostContext(gpu_groups={"tp4": (2, 3, 4, 5)}, pcie_safe_collectives=True))
    assert "3-4" in result.details["groups"]["tp4"]["cross_socket_pairs"]


def test_h200_is_refused_for_its_compute_capability_and_too_few_gpus_for_pd(h200_box):
    wrong_arch = checks_gpu.gpus(HostContext(gpu_groups={"tp": (0, 1)}))
    assert wrong_arch.status is Level.FAIL and "GPU0=9.0" in wrong_arch.summary
    too_few = checks_gpu.gpus(HostContext(gpu_groups=PD_GROUPS))
    assert too_few.status is Level.FAIL and "uses 8" in too_few.summary
    assert "9.0" in too_few.summary  # both problems are named, not just the first
    assert checks_gpu.p2p_topology(HostContext()).status is Level.OK  # NVLink


def test_old_driver_fails(tmp_path, monkeypatch):
    old = tmp_path / "old.csv"
    old.write_text((DATA / "rtxpro6000x8_query.csv").read_text().replace("580.95.05", "570.133.20"))
    install_nvidia_smi(tmp_path, monkeypatch, old, DATA / "rtxpro6000x8_topo.txt")
    result = checks_gpu.driver(HostContext())
    assert result.status is Level.FAIL and "570.133.20" in result.summary and ">= 580" in result.summary


def test_without_nvidia_smi_every_gpu_check_is_skip_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    ctx = HostContext(gpu_groups=PD_GROUPS)
    for check in (checks_gpu.driver, checks_gpu.gpus, checks_gpu.p2p_topology):
        result = check(ctx)
        assert result.status is Level.SKIP
        assert "nvidia-smi is not on PATH" in result.summary


def test_an_installed_but_failing_nvidia_smi_is_a_fail_with_its_message(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn''t "
                                        "communicate with the NVIDIA driver.'\nexit 9\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    result = checks_gpu.driver(HostContext())
    assert result.status is Level.FAIL and "exited 9" in result.summary and "NVIDIA driver" in result.summary
