"""Host checks on this machine's real state: ports (with the owning process), model folder,
/dev/shm, memlock, disk."""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket

from bundle.doctor import port_owners
from bundle.doctor import checks_host, checks_model, checks_ports
from bundle.doctor.context import HostContext
from bundle.findings import Level


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen()
    return sock


def test_a_taken_port_fails_and_names_this_process():
    sock = listening_socket()
    port = sock.getsockname()[1]
    try:
        result = checks_ports.ports(HostContext(ports=[("127.0.0.1", port, "pd front door")]))
    finally:
        sock.close()
    assert result.status is Level.FAIL
    assert f"port {port} is taken" in result.summary
    assert f"pid {os.getpid()}" in result.summary
    assert "front_port" in result.remediation


def test_a_wildcard_listener_blocks_a_loopback_bind_and_vice_versa():
    sock = listening_socket("0.0.0.0")
    port = sock.getsockname()[1]
    try:
        assert port_owners.conflicts("127.0.0.1", port)
    finally:
        sock.close()
    sock = listening_socket("127.0.0.1")
    port = sock.getsockname()[1]
    try:
        assert port_owners.conflicts("0.0.0.0", port)
    finally:
        sock.close()


def test_a_free_port_passes():
    sock = listening_socket()
    port = sock.getsockname()[1]
    sock.close()  # now free
    result = checks_ports.ports(HostContext(ports=[("127.0.0.1", port, "front door")]))
    assert result.status is Level.OK and f"127.0.0.1:{port}" in result.summary


def test_proc_net_tcp_lines_decode_to_addresses_and_ports():
    text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
            "   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 4242 1\n"
            "   1: 00000000:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 4343 1\n"
            "   2: 0100007F:9C40 0100007F:7530 01 00000000:00000000 00:00000000 00000000  0  0 4444 1\n")
    found = port_owners.parse_proc_net_tcp(text)
    assert [(x.address, x.port, x.inode) for x in found] == [("127.0.0.1", 30000, 4242), ("0.0.0.0", 9000, 4343)]
    six = ("  sl  local_address                         remote_address                        st\n"
           "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A "
           "00000000:00000000 00:00000000 00000000     0        0 5151 1\n")
    (item,) = port_owners.parse_proc_net_tcp(six)
    assert (item.address, item.port) == ("::1", 8080)


def make_model(tmp_path, shards=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
               present=None, tokenizer=True):
    root = tmp_path / "model"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "deepseek_v4"}))
    weight_map = {f"layer.{i}.weight": shard for i, shard in enumerate(shards)}
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for shard in present if present is not None else shards:
        (root / shard).write_bytes(b"\0" * 1024)
    if tokenizer:
        (root / "tokenizer.json").write_text("{}")
    return root


def test_a_complete_model_folder_passes(tmp_path):
    result = checks_model.model_files(HostContext(model_path=str(make_model(tmp_path))))
    assert result.status is Level.OK and "deepseek_v4: 2 shards" in result.summary
    assert result.details["bytes"] == 2048


def test_a_missing_shard_fails_and_names_it(tmp_path):
    root = make_model(tmp_path, present=["model-00001-of-00002.safetensors"])
    result = checks_model.model_files(HostContext(model_path=str(root)))
    assert result.status is Level.FAIL and "model-00002-of-00002.safetensors" in result.summary


def test_missing_folder_or_config_fails_and_missing_tokenizer_warns(tmp_path):
    assert checks_model.model_files(HostContext(model_path=str(tmp_path / "nope"))).status is Level.FAIL
    bare = tmp_path / "bare"
    bare.mkdir()
    assert "config.json" in checks_model.model_files(HostContext(model_path=str(bare))).summary
    root = make_model(tmp_path, tokenizer=False)
    assert checks_model.model_files(HostContext(model_path=str(root))).status is Level.WARN


GIB = 1024**3


def _statvfs(size: int, free: int):
    return os.statvfs_result((4096, 4096, size // 4096, free // 4096, free // 4096, 0, 0, 0, 0, 255))


def test_shm_of_32_gib_or_more_is_ok_and_smaller_warns_with_the_remount(monkeypatch):
    sizes = {}

    def fake(path):
        assert path == "/dev/shm"
        return _statvfs(*sizes["now"])

    monkeypatch.setattr(checks_host.os, "statvfs", fake)
    sizes["now"] = (64 * GIB, 60 * GIB)
    big = checks_host.shared_memory(HostContext())
    assert big.status is Level.OK and big.details["size_bytes"] == 64 * GIB
    assert big.summary == "/dev/shm 64.0 GiB (60.0 GiB free)"
    sizes["now"] = (32 * GIB, GIB)  # the minimum itself is enough
    assert checks_host.shared_memory(HostContext()).status is Level.OK
    sizes["now"] = (8 * GIB, 2 * GIB)  # Docker's default-sized host /dev/shm of a small VM
    small = checks_host.shared_memory(HostContext())
    assert small.status is Level.WARN and "/dev/shm is 8.0 GiB" in small.summary
    assert "remount,size=64G" in small.remediation


def test_shm_not_mounted_fails(monkeypatch):
    def missing(path):
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(checks_host.os, "statvfs", missing)
    assert checks_host.shared_memory(HostContext()).status is Level.FAIL


def test_memlock_unlimited_is_ok_and_a_limit_warns_with_both_values(monkeypatch):
    limits = {}
    monkeypatch.setattr(checks_host.resource, "getrlimit",
                        lambda which: limits["now"] if which == resource.RLIMIT_MEMLOCK else (0, 0))
    limits["now"] = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    unlimited = checks_host.memlock(HostContext())
    assert unlimited.status is Level.OK and unlimited.details == {"soft": None, "hard": None}
    limits["now"] = (8 * 1024 * 1024, 8 * 1024 * 1024)  # the common 8 MiB default
    limited = checks_host.memlock(HostContext())
    assert limited.status is Level.WARN and limited.details == {"soft": 8 * 1024 * 1024, "hard": 8 * 1024 * 1024}
    assert "memlock 8192 KiB (hard 8192 KiB)" in limited.summary and "ulimit -l unlimited" in limited.remediation


def test_disk_counts_the_model_only_when_it_is_not_there(tmp_path):
    absent = checks_host.disk_space(HostContext(model_path=str(tmp_path / "not-yet")))
    present = checks_host.disk_space(HostContext(model_path=str(make_model(tmp_path))))
    need = lambda r: sum(fs["need"] for fs in r.details["filesystems"])
    assert need(absent) - need(present) == checks_host.MODEL_BYTES


def test_disk_fails_naming_the_filesystem_only_when_free_space_is_short(monkeypatch, tmp_path):
    free = {}
    monkeypatch.setattr(checks_host.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(10**15, 10**15 - free["now"], free["now"]))
    ctx = HostContext(model_path=str(tmp_path / "not-yet"))
    free["now"] = 2000 * GIB
    plenty = checks_host.disk_space(ctx)
    assert plenty.status is Level.OK
    free["now"] = min(fs["need"] for fs in plenty.details["filesystems"]) - 1
    short = checks_host.disk_space(ctx)
    assert short.status is Level.FAIL and short.summary.startswith("not enough disk:")
    assert "model checkpoint" in short.remediation


def _engine_ctx(version: str):
    from bundle.stack.engine import EngineInfo

    class Ctx:
        engine = EngineInfo(server_version=version, runtimes=("runc",), default_runtime="runc", root_dir="/x")
    return Ctx()


def test_the_docker_check_passes_a_current_engine_and_compose_and_fails_an_old_engine(monkeypatch):
    from bundle.doctor import checks_docker
    from bundle.stack import engine

    monkeypatch.setattr(engine, "engine_versions", lambda: {"compose": "v2.40.3"})
    good = checks_docker.docker_versions(_engine_ctx("28.2.2"))
    assert good.status == Level.OK and good.details == {"engine": "28.2.2", "compose": "v2.40.3"}
    old = checks_docker.docker_versions(_engine_ctx("19.03.1"))
    assert old.status == Level.FAIL and "19.03.1 is older than" in old.summary


def test_the_docker_check_fails_without_compose_and_names_the_plugin(monkeypatch):
    from bundle.doctor import checks_docker
    from bundle.stack import engine

    monkeypatch.setattr(engine, "engine_versions", lambda: {"compose": ""})
    result = checks_docker.docker_versions(_engine_ctx("28.2.2"))
    assert result.status == Level.FAIL and "docker-compose-plugin" in result.remediation
