"""A small collective's cost on a host (bundle/verify/collective_latency.py): the cited figures by host
class, interpolation by message size, and doctor's measured table taking their place through
collectives.json (the hook doctor's collectives probe fills)."""

from __future__ import annotations

import pytest

from bundle.verify import collective_latency as cl


def test_the_cited_four_gpu_figures_are_read_back_and_interpolated_on_a_log_size_scale():
    four = cl.for_group(4)
    assert "one NUMA node" in four.source and not four.measured_here
    assert four.seconds(8192) == pytest.approx(13.9e-6)
    assert four.seconds(1024) == pytest.approx(13.2e-6)  # below the smallest: no faster than it
    assert 13.9e-6 < four.seconds(12000) < 14.7e-6
    assert four.seconds(65536) > 15.6e-6  # past the largest: the slope of the last two points
    assert cl.for_group(8).seconds(8192) == pytest.approx(24e-6)
    assert cl.for_group(2).source == four.source  # the 4-GPU figure bounds 2 GPUs from above


def test_a_measured_table_replaces_the_cited_one_and_a_link_takes_over_past_it():
    measured = cl.CollectiveLatency.measured({"8192": 40e-6, 65536: 60e-6}, source="doctor, this host",
                                             link_gb_s=10.0)
    assert cl.for_group(4, measured) is measured and measured.measured_here
    assert measured.seconds(1 << 20) == pytest.approx(60e-6 + ((1 << 20) - 65536) / 10e9)
    with pytest.raises(ValueError):
        cl.CollectiveLatency.measured({8192: 0.0}, source="x")


def test_collectives_json_carries_doctors_table_as_the_servers_run_p2p():
    collectives = {"pcie_safe": True, "evidence": {"runs": [
        {"latency": {"p2p": "on", "seconds_by_bytes": {"8192": 9e-6}}},
        {"latency": {"p2p": "off", "seconds_by_bytes": {"8192": 31e-6, "1048576": 90e-6},
                     "source": "doctor: NCCL all-reduce, P2P off"}}]}}
    table = cl.from_collectives(collectives)
    assert table.source == "doctor: NCCL all-reduce, P2P off" and table.seconds(8192) == pytest.approx(31e-6)
    assert cl.from_collectives({"pcie_safe": False, "evidence": {}}) is None
    assert cl.from_collectives(None) is None
    assert cl.from_collectives({"latency": {"seconds_by_bytes": {"x": "y"}}}) is None  # damaged: left out
