"""The rehearsal Slurm cluster's files, without starting it: slurm.conf and gres.conf agree with the
node entrypoint's stand-in devices, the MUNGE key is made per cluster (owner-only, never in the env
file), and compose's own resolved view of the cluster project has a controller and two nodes, only the
first node publishing the front door."""

from __future__ import annotations

import json
import re
import stat

import pytest

from bundle import modes
from bundle import topology as registry
from bundle.paths import docker_dir
from bundle.targets.slurm import cluster as clusters
from bundle.targets.slurm import image as slurm_image
from bundle.targets.slurm import job as jobs

pytestmark = pytest.mark.usefixtures("runs_dir")


def _write(project: str, tmp_path):
    c = clusters.Cluster(project)
    c.write(image="sglang-bundle/slurm-node:test", topology=registry.get("pd"), front_port=31234,
            front_target_port=8000, mode_env={"MODEL_HOST_PATH": str(tmp_path)}, host_address="127.0.0.1",
            gres="gpu")
    return c


def test_the_config_declares_both_nodes_with_their_gpus_and_a_short_down_timeout():
    conf = clusters.slurm_conf(clusters.CLUSTER_NAME)
    assert "NodeName=node-[1-2] CPUs=4 RealMemory=8000 Gres=gpu:8 State=UNKNOWN" in conf
    assert f"SlurmdTimeout={clusters.SLURMD_TIMEOUT_S}" in conf and "AuthType=auth/munge" in conf
    assert "GresTypes=gpu" in conf and "SlurmctldHost=slurmctld" in conf


def test_gres_conf_names_exactly_the_devices_the_node_entrypoint_makes():
    files = re.search(rf"File={clusters.GPU_DEVICES}\[0-(\d+)\]", clusters.gres_conf()).group(1)
    assert int(files) + 1 == clusters.NODE_GPUS
    entry = (docker_dir() / "slurm" / "node-entrypoint.sh").read_text()
    assert f'"{clusters.GPU_DEVICES}$i"' in entry and f"${{REHEARSAL_GPUS:-{clusters.NODE_GPUS}}}" in entry


def test_each_cluster_gets_its_own_owner_only_munge_key_kept_out_of_the_env_file(tmp_path):
    a, b = _write("one-pd", tmp_path), _write("two-pd", tmp_path)
    key_a, key_b = (a.dir / "munge.key").read_bytes(), (b.dir / "munge.key").read_bytes()
    assert len(key_a) == 1024 and key_a != key_b
    assert stat.S_IMODE((a.dir / "munge.key").stat().st_mode) == 0o400
    _write("one-pd", tmp_path)  # written again while the cluster exists: the same key
    assert (a.dir / "munge.key").read_bytes() == key_a
    env = a.env_file.read_text()
    assert "MUNGE_KEY_FILE=" in env and key_a.hex()[:16] not in env


def test_compose_resolves_a_controller_two_nodes_and_one_published_front_door(tmp_path):
    from tests.conftest import missing
    import shutil
    import subprocess

    if shutil.which("docker") is None or subprocess.run(["docker", "compose", "version"],
                                                          capture_output=True).returncode:
        missing("docker compose is not installed")
    c = _write("three-pd", tmp_path)
    resolved = c.stack().config()
    services = resolved["services"]
    assert {"slurmctld", "node-1", "node-2"} <= set(services)
    assert [s for s in services if services[s].get("ports")] == ["node-1"]
    (port,) = services["node-1"]["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("127.0.0.1", "31234", 8000)
    assert "router" in services["node-1"]["networks"]["cluster"]["aliases"]
    assert all(not services[s].get("restart") for s in ("node-1", "node-2"))


def test_the_node_image_names_its_repository_and_follows_the_rehearsal_image_under_it():
    assert slurm_image.image_tag("p:1").startswith("sglang-bundle/slurm-node:")
    assert slurm_image.image_tag("p:1") != slurm_image.image_tag("p:2")


def test_a_job_record_keeps_the_key_its_modes_define_so_older_drivers_read_it_and_it_reads_theirs():
    jobs.save(jobs.JobRecord("p-pd-slurm", "7", ["node-1"], {"router": ["node-1"]}, "/logs", "sim"))
    assert json.loads(jobs.path("p-pd-slurm").read_text())[modes.record_key()] == "sim"
    assert jobs.load("p-pd-slurm").mode == "sim"
