"""`bundle doctor` end to end on this machine: no GPU, a real Docker engine, a real NIXL transfer."""

from __future__ import annotations

import glob
import json
import shutil
import subprocess

import pytest

from bundle.cli import main


def run_json(capsys, *argv) -> tuple[int, dict]:
    code = main(["doctor", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict:
    return {c["name"]: c for c in report["checks"]}


def test_without_a_gpu_the_gpu_checks_skip_with_the_reason(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")  # no nvidia-smi on it, as on this machine
    code, report = run_json(capsys, "--only", "driver", "--only", "gpus", "--only", "p2p")
    assert code == 0 and report["ok"] is True
    for check in report["checks"]:
        assert check["status"] == "SKIP" and "nvidia-smi" in check["summary"]


def test_exit_code_is_nonzero_exactly_when_a_check_fails(capsys, tmp_path):
    code, report = run_json(capsys, "--model-path", str(tmp_path / "missing"), "--only", "model",
                            "--only", "memlock")
    assert by_name(report)["model"]["status"] == "FAIL" and code == 1
    code, report = run_json(capsys, "--only", "memlock", "--only", "shm")
    assert code == 0 and {c["status"] for c in report["checks"]} <= {"OK", "WARN"}


def test_the_nixl_check_moves_a_real_buffer_and_names_its_transport(capsys):
    _, report = run_json(capsys, "--only", "nixl", "--image", "sglang-bundle/not-built:none")
    nixl = by_name(report)["nixl"]
    assert nixl["status"] in ("OK", "WARN"), nixl
    assert nixl["details"]["bytes_equal"] is True and nixl["details"]["state"] == "DONE"
    assert nixl["details"]["transports"] and "via UCX" in nixl["summary"]
    assert "host python" in nixl["summary"]  # it says where it ran: no image here


def test_a_port_given_on_the_command_line_is_checked(capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code, report = run_json(capsys, "--only", "ports", "--port", str(port))
    ports = by_name(report)["ports"]
    assert code == 1 and ports["status"] == "FAIL" and str(port) in ports["summary"]


@pytest.mark.docker
def test_docker_check_reads_the_real_engine(capsys):
    _, report = run_json(capsys, "--only", "docker", "--only", "nvidia-runtime")
    docker = by_name(report)["docker"]
    assert docker["status"] == "OK" and docker["details"]["engine"]
    runtime = by_name(report)["nvidia-runtime"]
    assert "runc" in " ".join(runtime["details"]["runtimes"])
    # The verdict this host must get, from what the engine and the host say themselves.
    engine_runtimes = json.loads(subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"],
                                                capture_output=True, text=True, check=True).stdout)
    gpu_host = shutil.which("nvidia-smi") is not None or glob.glob("/dev/nvidia[0-9]*")
    if "nvidia" in engine_runtimes:
        assert runtime["status"] == "OK", runtime
    elif not gpu_host and not runtime["details"]["cdi_specs"] and not runtime["details"]["toolkit"]:
        # This CI machine: no GPU, no toolkit: nothing to run GPU containers with, and nothing wrong.
        assert runtime["status"] == "SKIP" and "no GPU here" in runtime["summary"], runtime
    else:  # GPUs or NVIDIA's tooling without a registered runtime: not OK, and said why
        assert runtime["status"] in ("WARN", "FAIL") or runtime["details"]["cdi_specs"], runtime


def test_table_output_ends_with_a_summary(capsys, tmp_path):
    code = main(["doctor", "--only", "memlock", "--only", "model", "--model-path", str(tmp_path)])
    out = capsys.readouterr().out
    assert "2 checks:" in out and "FAIL" in out and code == 1
