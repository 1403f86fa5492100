"""nvidia-smi parsers on captured (H200) and documented-format (8x RTX PRO 6000) samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle.doctor import nvidia_smi
from bundle.doctor.nvidia_smi import parse_gpu_query, parse_topology

DATA = Path(__file__).parent / "data" / "nvidia_smi"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_rtx_pro_6000_box_reads_as_eight_sm120_gpus_on_driver_580():
    gpus = parse_gpu_query(read("rtxpro6000x8_query.csv"))
    assert [g.index for g in gpus] == list(range(8))
    assert {g.compute_cap for g in gpus} == {(12, 0)}
    assert {g.memory_total_mib for g in gpus} == {97887}
    assert {nvidia_smi.driver_major(g.driver_version) for g in gpus} == {580}
    assert gpus[0].name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert gpus[7].pci_bus_id == "00000000:BE:00.0"


def test_captured_h200_query_reads_as_sm90():
    gpus = parse_gpu_query(read("h200x2_query.csv"))
    assert [(g.name, g.compute_cap, g.memory_total_mib) for g in gpus] == [
        ("NVIDIA H200", (9, 0), 143771), ("NVIDIA H200", (9, 0), 143771)]
    assert gpus[1].driver_version == "580.159.04"
    assert gpus[0].uuid.startswith("GPU-")


def test_header_units_and_not_available_values_are_understood():
    text = ("index, name, uuid, pci.bus_id, driver_version, compute_cap, memory.total [MiB]\n"
            "0, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, [N/A], 00000000:01:00.0, 575.51.03, 12.0, 97887 MiB\n")
    (gpu,) = parse_gpu_query(text)
    assert gpu.uuid is None and gpu.memory_total_mib == 97887
    assert nvidia_smi.driver_major(gpu.driver_version) == 575


def test_a_line_with_the_wrong_number_of_values_names_the_line():
    with pytest.raises(ValueError, match="line 2: expected 7 values"):
        parse_gpu_query("0, A, u, b, 580.1, 12.0, 1\n1, B, u, b, 580.1\n")


def test_query_for_other_fields_maps_by_position():
    (gpu,) = parse_gpu_query("3, 12.0, NVIDIA X\n", fields=("index", "compute_cap", "name"))
    assert (gpu.index, gpu.compute_cap, gpu.name) == (3, (12, 0), "NVIDIA X")


def test_pcie_box_topology_has_no_nvlink_and_crosses_sockets_between_halves():
    topo = parse_topology(read("rtxpro6000x8_topo.txt"))
    assert topo.gpus == tuple(range(8))
    assert topo.pcie_only()
    assert topo.link(0, 1) == "PIX" and topo.link(0, 2) == "NODE" and topo.link(3, 4) == "SYS"
    assert topo.link(4, 3) == "SYS"
    assert {code for _, _, code in topo.pairs([0, 1, 2, 3])} == {"PIX", "NODE"}
    assert topo.numa_affinity[5] == "1" and topo.cpu_affinity[0] == "0-47,96-143"
    assert (0, 8) not in topo.links  # the NIC column is not a GPU


def test_captured_h200_topology_is_nvlink_despite_ansi_header():
    raw = read("h200x2_topo.txt")
    assert "\x1b[4m" in raw  # the capture really carries the escape codes
    topo = parse_topology(raw)
    assert topo.gpus == (0, 1)
    assert topo.link(0, 1) == "NV18" and not topo.pcie_only()
    assert topo.nvlink_pairs() == [(0, 1, "NV18")]


def test_topology_without_a_matrix_is_an_error():
    with pytest.raises(ValueError, match="no header line"):
        parse_topology("No devices were found\n")


def test_nvidia_smi_missing_is_reported_not_faked(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(nvidia_smi.NvidiaSmiUnavailable, match="not on PATH"):
        nvidia_smi.query_gpus()
