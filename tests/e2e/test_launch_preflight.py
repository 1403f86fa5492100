"""Launch refuses bad input before anything starts: nothing created, nothing running touched."""

from __future__ import annotations

import os
import socket

import pytest

from bundle.stack import docker
from bundle.cli import main
from bundle.errors import EXIT_CONFIG, EXIT_ENVIRONMENT
from tests.conftest import write_config

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("runs_dir")]


def _listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_port_already_in_use_is_named_before_anything_starts(tmp_path, capsys):
    sock = _listener()
    port = sock.getsockname()[1]
    try:
        path = write_config(tmp_path, f"project: preflight-port\nnetwork:\n  front_port: {port}\n")
        assert main(["launch", "tp4", "--rehearsal", "sim", "-c", str(path)]) == EXIT_ENVIRONMENT
    finally:
        sock.close()
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port} (network.front_port) is already in use" in err
    assert f"pid {os.getpid()}" in err  # the owner is named
    assert docker.project_containers("preflight-port-tp4") == []


@pytest.mark.parametrize("text", [
    "project: preflight-bad\nlevers:\n  moe_runer: marlin\n",
    "project: preflight-bad\npd:\n  decode:\n    gpus: [2, 3, 4, 5]\n",
    "project: preflight-bad\nmodel: {path: [\n",
])
def test_a_malformed_config_starts_nothing(tmp_path, capsys, text):
    path = write_config(tmp_path, text)
    assert main(["launch", "pd", "--rehearsal", "sim", "-c", str(path)]) == EXIT_CONFIG
    assert "nothing was started" in capsys.readouterr().err
    assert docker.project_containers("preflight-bad-pd") == []
    assert not (tmp_path / "runs" / "preflight-bad-pd").exists()


def test_a_missing_image_is_named_with_the_fix(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    path = write_config(tmp_path, f"project: preflight-img\nmodel:\n  path: {model}\n"
                                  f"image:\n  ref: sglang-bundle/absent:nope\n")
    assert main(["launch", "tp4", "-c", str(path)]) == EXIT_ENVIRONMENT
    err = capsys.readouterr().err
    assert "image sglang-bundle/absent:nope is not on this host" in err and "make image" in err
    assert docker.project_containers("preflight-img-tp4") == []


def test_launch_without_a_model_folder_fails_for_a_real_launch(tmp_path, capsys):
    path = write_config(tmp_path, f"project: preflight-model\nmodel:\n  path: {tmp_path}/absent\n")
    assert main(["launch", "tp4", "-c", str(path)]) == EXIT_CONFIG
    assert "model.path" in capsys.readouterr().err


def test_a_model_folder_that_differs_from_the_pinned_checkpoint_is_refused(tmp_path, capsys, monkeypatch):
    import hashlib
    import shutil
    from pathlib import Path

    from bundle.images import model
    from bundle.lock import load_lock

    repo = Path(__file__).resolve().parents[2]
    home = tmp_path / "home"
    for folder in ("docker", "compose"):
        shutil.copytree(repo / folder, home / folder)
    monkeypatch.setenv("BUNDLE_HOME", str(home))
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text('{"model_type": "deepseek_v4"}')
    (weights / "model-00001-of-00001.safetensors").write_bytes(b"\1" * 100)
    config_sha = hashlib.sha256((weights / "config.json").read_bytes()).hexdigest()
    model.write_pin(load_lock(), "0123456789abcdef0123456789abcdef01234567",
                    {"config.json": f"sha256:{config_sha}", "model-00001-of-00001.safetensors": "size:4096"})
    path = write_config(tmp_path, f"project: preflight-pin\nmodel:\n  path: {weights}\n")
    assert main(["launch", "tp4", "-c", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "model-00001-of-00001.safetensors: size 100 != 4096" in err
    assert "bundle model fetch" in err
    assert docker.project_containers("preflight-pin-tp4") == []
