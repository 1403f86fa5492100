"""The Docker boundary's promise: no DockerException leaks out of bundle/stack/docker.py or engine.py;
every failure of the engine comes back as one BundleError (or a value the function documents)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from python_on_whales.exceptions import DockerException, NoSuchContainer
from python_on_whales.utils import get_docker_exception_type

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


class _PsFailing(_RecreatingCompose):
    """compose ps whose own inspect of what it listed fails the first `times` times, as the daemon answers
    when compose recreates a container meanwhile (CI, 2026-12-03: a reconcile recreating decode)."""

    def __init__(self, times: int, stderr: bytes = b"Error response from daemon: No such container: bf021a5e82a0"):
        super().__init__()
        self.times, self.stderr, self.calls = times, stderr, 0

    def ps(self, all=False):
        self.calls += 1
        if self.calls <= self.times:
            raise get_docker_exception_type(self.stderr)(["docker", "compose", "ps"], 1, b"", self.stderr)
        return [_Container("decode", False), _Container("prefill", False)]


def test_a_container_vanishing_inside_compose_ps_itself_lists_again(monkeypatch):
    monkeypatch.setattr(docker, "STATE_READ_PAUSE_S", 0)
    compose = _PsFailing(times=2)
    states = _stack_with(monkeypatch, compose).states()
    assert compose.calls == 3 and [s.service for s in states] == ["decode", "prefill"]


def test_any_other_failure_of_compose_ps_is_one_bundle_error_at_once(monkeypatch):
    monkeypatch.setattr(docker, "STATE_READ_PAUSE_S", 0)
    compose = _PsFailing(times=1, stderr=b"Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
    with pytest.raises(BundleError, match="docker compose ps failed for project 'p':\\nCannot connect"):
        _stack_with(monkeypatch, compose).states()
    assert compose.calls == 1


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


# ---- the docker CLI itself, where python-on-whales has no call for it: still inside engine.py ----

def _cli(monkeypatch, script: str):
    """A client whose docker command is a shell running `script` (the real arguments follow as $1...)."""
    config = SimpleNamespace(docker_cmd=["sh", "-c", script, "docker"])
    monkeypatch.setattr(engine, "client", lambda **settings: SimpleNamespace(client_config=config))


def test_container_processes_reads_the_names_and_gives_nothing_when_docker_fails(monkeypatch):
    _cli(monkeypatch, 'test "$1 $2 $3 $4" = "top srv -eo comm" && printf "COMMAND\\nsglang::scheduler\\npython3\\n"')
    assert engine.container_processes("srv") == ["sglang::scheduler", "python3"]
    _cli(monkeypatch, "echo 'Error: No such container: srv' >&2; exit 1")
    assert engine.container_processes("srv") == []


def test_exec_with_input_feeds_stdin_and_a_hang_is_one_bundle_error(monkeypatch):
    _cli(monkeypatch, 'test "$1 $2 $3 $4 $5" = "exec -i -w /shared ctl" && shift 5 && echo "$@" && cat')
    done = engine.exec_with_input("ctl", ["sbatch", "--parsable"], stdin="#!/bin/bash\n", workdir="/shared",
                                  timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (0, "sbatch --parsable\n#!/bin/bash\n", "")
    _cli(monkeypatch, "sleep 5")
    with pytest.raises(BundleError, match="sinfo in ctl gave no answer within 1 s"):
        engine.exec_with_input("ctl", ["sinfo"], stdin=None, workdir=None, timeout=1)


def test_run_streamed_on_a_refusing_engine_is_a_bundle_error(refusing):
    with pytest.raises(BundleError, match="Cannot connect to the Docker daemon"):
        engine.run_streamed("x:1", ["python", "-V"], name="n", volumes=[], on_line=print)


SUBCOMMANDS = {"run", "exec", "top", "build", "ps", "inspect", "kill", "rm", "logs", "compose", "image", "container",
               "network", "volume", "pull", "push", "tag", "cp", "stop", "start", "wait", "buildx", "system"}


def _docker_cli_calls(root: Path) -> list[str]:
    """Each list or tuple literal under `root` that starts with "docker" and one of its subcommands: a
    docker CLI command line built by hand."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, (ast.List, ast.Tuple)) and node.elts and isinstance(node.elts[0], ast.Constant)
                    and node.elts[0].value == "docker" and len(node.elts) > 1
                    and isinstance(node.elts[1], ast.Constant) and node.elts[1].value in SUBCOMMANDS):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_but_the_engines_builds_a_docker_command_line(tmp_path):
    root = Path(engine.__file__).resolve().parents[1]
    # engine.py's `docker build` streams BuildKit's lines, which python-on-whales' legacy build cannot.
    assert [c for c in _docker_cli_calls(root) if not c.startswith("stack/engine.py:")] == []
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "client.py").write_text('ARGV = ("docker", "exec", "-i", "ctl")\n')
    assert _docker_cli_calls(tmp_path) == ["slurm/client.py:1"]
