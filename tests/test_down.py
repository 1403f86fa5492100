"""`bundle down` answers only for what its own launch made: the volumes recorded in launch.json.
A volume compose keeps by design (the JIT cache, Prometheus' data) or one another target's launch
made under the same project name is named as left alone, never a failure (issue #33: compose pd
with monitoring, down, then the Slurm rehearsal's pd and its down exited 1)."""

from __future__ import annotations

import argparse

import pytest

from bundle import topology as registry
from bundle.commands import down
from bundle.service import finding
from bundle.stack import docker, engine, runstate


class _Stack:
    def __init__(self, removes_volumes: bool):
        self.removes_volumes = removes_volumes

    def down(self, *, volumes=False, timeout=None):
        return self.removes_volumes or volumes


looked_up: list = []  # every lookup of the launched projects down made (one a run: _run checks it)


def _run(monkeypatch, capsys, *, created, present, removes_volumes=True):
    looked_up.clear()
    record = runstate.LaunchRecord(project="p-pd", topology="pd", compose_files=[], env_file="", mode=True,
                                   config="<embedded defaults>", started_at=0, run_dir="", target="slurm",
                                   env={"X": "1"}, created_volumes=created)
    target = finding.Candidate("p-pd", registry.get("pd"), record, ("p-pd-node-1",), targets=None)
    monkeypatch.setattr(finding.Candidate, "stack", lambda self: _Stack(removes_volumes))
    monkeypatch.setattr(finding, "candidates", lambda request: looked_up.append(request) or [target])
    monkeypatch.setattr(engine, "require_engine", lambda: None)
    monkeypatch.setattr(engine, "require_compose", lambda: None)
    monkeypatch.setattr(docker, "project_containers", lambda project: [])
    monkeypatch.setattr(docker, "project_networks", lambda project: [])
    monkeypatch.setattr(docker, "project_volumes", lambda project: sorted(present))
    code = down.run(argparse.Namespace(topology=None, config=None, volumes=False, timeout=None))
    assert len(looked_up) == 1, "down looks the launched projects up once"
    return code, capsys.readouterr().out


KEPT = ["sglang-bundle-jit-abc", "p-pd_prometheus-data"]  # compose's launch made these, its down kept them


def test_volumes_another_targets_launch_made_are_left_alone_not_a_failure(monkeypatch, capsys):
    code, out = _run(monkeypatch, capsys, created=["p-pd_slurm-state"], present=KEPT)
    assert code == 0
    assert "left alone (not made by this launch): p-pd_prometheus-data, sglang-bundle-jit-abc" in out


def test_a_volume_its_own_launch_made_that_survives_down_is_still_a_failure(monkeypatch, capsys):
    code, out = _run(monkeypatch, capsys, created=["p-pd_slurm-state"], present=KEPT + ["p-pd_slurm-state"])
    assert code == 1 and "still present after down: p-pd_slurm-state" in out


@pytest.mark.parametrize("present", [[], KEPT])
def test_a_down_that_keeps_volumes_never_counts_them(monkeypatch, capsys, present):
    code, out = _run(monkeypatch, capsys, created=KEPT, present=present, removes_volumes=False)
    assert code == 0 and "(cache volume kept)" in out and "left alone" not in out
