"""The Docker boundary's promise: no DockerException leaks out of bundle/stack/docker.py or engine.py;
every failure of the engine comes back as one BundleError (or a value the function documents)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from python_on_whales.exceptions import DockerException, NoSuchContainer

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


class _Container:
    """What compose.ps hands back: an id whose every attribute is read by an inspect, as
    python-on-whales' Container does; one removed since the listing raises NoSuchContainer there."""

    def __init__(self, name, removed):
        self.id, self._name, self._removed = f"{name}-id", name, removed

    def __getattr__(self, attr):
        if self._removed:
            raise NoSuchContainer(["docker", "container", "inspect", self.id], 1, stdout=b"",
                                  stderr=f"Error: No such container: {self.id}".encode())
        if attr == "name":
            return self._name
        if attr == "state":
            return SimpleNamespace(status="running", health=None, exit_code=0)
        if attr == "config":
            return SimpleNamespace(labels={"com.docker.compose.service": self._name,
                                           "com.docker.compose.config-hash": "h-" + self._name})
        if attr == "network_settings":
            return SimpleNamespace(ports={})
        return {"restart_count": 0, "image": "sha256:1"}[attr]


class _RecreatingCompose:
    """A compose project in which `prefill` is recreated right after the first `ps`: the first
    listing names a container that is gone when it is inspected, the second lists its successor."""

    def __init__(self, vanish_every_time=False):
        self.listings = 0
        self.vanish_every_time = vanish_every_time

    def ps(self, all=False):
        self.listings += 1
        old = self.listings == 1 or self.vanish_every_time
        return [_Container("decode", False), _Container("prefill", removed=old)]


def _stack_with(monkeypatch, compose):
    monkeypatch.setattr(engine, "client", lambda **settings: SimpleNamespace(compose=compose))
    return docker.Stack("p", [Path("a.yaml")], Path("a.env"))


def test_a_container_removed_between_ps_and_inspect_is_listed_again_not_a_crash(monkeypatch):
    compose = _RecreatingCompose()
    states = _stack_with(monkeypatch, compose).states()
    assert compose.listings == 2
    assert [(s.service, s.state, s.config_hash) for s in states] == [
        ("decode", "running", "h-decode"), ("prefill", "running", "h-prefill")]


def test_containers_that_keep_vanishing_give_one_bundle_error(monkeypatch):
    compose = _RecreatingCompose(vanish_every_time=True)
    with pytest.raises(BundleError) as raised:
        _stack_with(monkeypatch, compose).states()
    assert compose.listings == docker.STATE_READ_ATTEMPTS
    assert "kept changing" in raised.value.message


def test_the_funnel_names_dockers_exit_code_in_one_line():
    with pytest.raises(BundleError) as raised:
        with engine.docker_errors("cannot start"):
            raise DockerException(["docker", "x"], 125, stdout=b"", stderr=b"boom\nmore detail")
    assert raised.value.message == "cannot start: boom (docker exit code 125)"


def test_a_container_removed_between_listing_and_reading_its_name_is_listed_again(monkeypatch):
    listings = []

    def listing(all=False, filters=()):
        listings.append(1)
        return [_Container("decode", False), _Container("prefill", removed=len(listings) == 1)]

    monkeypatch.setattr(engine, "client", lambda **settings: SimpleNamespace(
        container=SimpleNamespace(list=listing)))
    assert docker.project_containers("p") == ["decode", "prefill"] and len(listings) == 2
