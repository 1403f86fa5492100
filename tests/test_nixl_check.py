"""A real NIXL transfer on this machine (DRAM, two agents in two processes, UCX backend), and the
UCX_PROTO_INFO reader on outputs captured here and on a 2x H200 host."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle.doctor import nixl_check

DATA = Path(__file__).parent / "data" / "nixl"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_real_dram_transfer_moves_equal_bytes_and_reports_its_transport():
    if not nixl_check.host_python_can_probe():
        pytest.fail("nixl_cu13 must import in the test environment (requirements/dev.txt pins it)")
    result = nixl_check.run_on_host(mem="DRAM", size=4096)
    assert result.error is None, result.output_tail
    assert result.state == "DONE" and result.backend == "UCX"
    assert result.bytes_equal and result.ok
    assert result.transports, f"no UCX transport found in the probe output:\n{result.output_tail}"
    assert result.ucx_config and "/" in result.ucx_config
    assert result.where.startswith("host python")


def test_a_larger_transfer_is_matched_to_the_size_range_that_covers_it():
    result = nixl_check.run_on_host(mem="DRAM", size=1 << 20)
    assert result.ok and result.size == 1 << 20
    assert result.transports


def test_captured_vram_transfer_between_two_h200s_used_cuda_ipc():
    result = nixl_check.interpret(read("h200x2_vram_gpu0_to_gpu1.txt"), where="h200", mem="VRAM", size=4096)
    assert result.ok and result.bytes_equal
    assert result.transports == ["cuda_ipc"] and result.ucx_protocol == "zero-copy"
    assert nixl_check.transport_verdict(result)[0] == "ok"


def test_captured_dram_outputs_used_cma():
    for name in ("h200x2_dram.txt", "cpu_vm_dram.txt"):
        result = nixl_check.interpret(read(name), where=name, mem="DRAM", size=4096)
        assert result.transports == ["cma"], name


def test_the_host_memory_table_is_not_mistaken_for_the_vram_write():
    rows = nixl_check.parse_proto_info(read("h200x2_vram_gpu0_to_gpu1.txt"))
    host_rows = [r for r in rows if "from host memory to cuda" in r.operation]
    assert host_rows and {t for r in host_rows for t in r.transports} == {"tcp"}
    chosen = nixl_check.write_selection(rows, "VRAM", 4096)
    assert chosen.config == "cuda_ipc/cuda"


def test_vram_over_tcp_is_a_warning():
    text = read("h200x2_vram_gpu0_to_gpu1.txt").replace("cuda_ipc/cuda   ", "tcp/lo          ")
    result = nixl_check.interpret(text, where="x", mem="VRAM", size=4096)
    assert result.transports == ["tcp"]
    verdict, why = nixl_check.transport_verdict(result)
    assert verdict == "warn" and "not cuda_ipc" in why


def test_a_probe_that_printed_no_result_is_a_failure_with_its_output():
    result = nixl_check.interpret("Segmentation fault\n", where="x", mem="DRAM", size=4096)
    assert not result.ok and "no result line" in result.error
    assert "Segmentation fault" in result.output_tail


def test_size_ranges():
    row = nixl_check.ProtoSelection("a", "intra-node", "op", "1..16515", "zero-copy", "tcp/lo")
    assert row.covers(1) and row.covers(16515) and not row.covers(0) and not row.covers(16516)
    assert nixl_check.ProtoSelection("a", "s", "op", "16516..inf", "d", "c").covers(10 ** 12)
    assert nixl_check.ProtoSelection("a", "s", "op", "0", "d", "c").covers(0)
    assert nixl_check.ProtoSelection("a", "s", "op", "8K..1M", "d", "c").covers(65536)
