"""The Docker boundary's promise: no DockerException leaks out of bundle/stack/docker.py or engine.py;
every failure of the engine comes back as one BundleError (or a value the function documents)."""

from __future__ import annotations

from pathlib import Path

import pytest
from python_on_whales.exceptions import DockerException

from bundle.errors import BundleError
from bundle.stack import docker
from bundle.stack import engine


class _Refusing:
    """A client whose every call fails as the docker CLI does when the engine refuses."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        raise DockerException(["docker", "x"], 1, stdout=b"", stderr=b"Cannot connect to the Docker daemon")


@pytest.fixture
def refusing(monkeypatch):
    monkeypatch.setattr(engine, "client", lambda **settings: _Refusing())
    monkeypatch.setattr(engine.shutil, "which", lambda name: "/usr/bin/docker")


CALLS = {
    "require_engine": lambda: engine.require_engine(),
    "require_compose": lambda: engine.require_compose(),
    "image_exists": lambda: engine.image_exists("x:1"),
    "engine_info": lambda: engine.engine_info(),
    "image_facts": lambda: engine.image_facts("x:1"),
    "pull_image": lambda: engine.pull_image("x:1"),
    "tag_image": lambda: engine.tag_image("x:1", "y:1"),
    "remove_image_ref": lambda: engine.remove_image_ref("x:1"),
    "push_image": lambda: engine.push_image("x:1"),
    "file_from_image": lambda: engine.file_from_image("x:1", "/etc/os-release"),
    "container_image": lambda: engine.container_image("c"),
    "project_containers": lambda: docker.project_containers("p"),
    "project_networks": lambda: docker.project_networks("p"),
    "stack.states": lambda: docker.Stack("p", [Path("a.yaml")], Path("a.env")).states(),
    "stack.up": lambda: docker.Stack("p", [Path("a.yaml")], Path("a.env")).up(),
}


@pytest.mark.parametrize("name", CALLS)
def test_an_engine_that_refuses_gives_a_bundle_error_naming_it(refusing, name):
    with pytest.raises(BundleError) as raised:
        CALLS[name]()
    assert "Cannot connect to the Docker daemon" in raised.value.message


def test_engine_answers_that_are_values_stay_values(refusing):
    assert engine.engine_versions() == {"engine": "", "compose": ""}
    assert engine.containers_publishing(30000) == []
    assert engine.buildx_available() is False
    assert engine.exec_in_container("c", ["true"]).returncode == 1
    probe = engine.run_probe_container("x:1", ["python3", "-c", "1"], probe_file=Path("/dev/null"),
                                       probe_target="/p", env={}, gpus=False, timeout=5)
    assert "Cannot connect" in probe and "(docker run exited 1)" in probe
