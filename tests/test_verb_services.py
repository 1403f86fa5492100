"""The running and release verbs' services driven through their typed requests, no argparse: status,
down, logs and top against a stand-in for the target's view of the stack (a StackView that answers
`compose exec` with scripted curl output or a curl failure), build, sign, lock and model against the
checkout's lock or a copy of it. What the verbs print from these results is held by the CLI tests
(tests/test_running_verbs.py, tests/test_down.py, tests/test_release.py, tests/test_build.py)."""

from __future__ import annotations

import argparse
import shutil
import socket

import pytest

from bundle import topology as registry
from bundle.commands._common import add_rehearsal_argument
from bundle.errors import BundleError, EnvironmentProblem, InputError, UsageError
from bundle.images import signature
from bundle.rehearsal import registry as rehearsal
from bundle.service import build, down, lock, logs, model, sign, status, top
from bundle.service.prepare import load
from bundle.service.running import Launched
from bundle.stack import docker, engine, runstate
from bundle.stack.docker import ContainerState
from bundle.stack.workers import _STATUS_MARK
from tests.conftest import REPO, write_config

pytestmark = pytest.mark.usefixtures("runs_dir")


class Stack:
    """A target's view of a project: its containers' states, and `exec` answering a server's curl with
    `replies[service]` (text: the body with HTTP 200; an exception: curl's failure)."""

    def __init__(self, project: str, states: list[ContainerState], replies=None, logs=""):
        self.project = project
        self._states = states
        self.replies = replies or {}
        self._logs = logs
        self.asked: list[str] = []  # the services exec was run in
        self.downs: list[dict] = []

    def states(self):
        return self._states

    def exec(self, service, command):
        self.asked.append(service)
        reply = self.replies.get(service, "")
        if isinstance(reply, Exception):
            raise reply
        return reply + _STATUS_MARK + "200"

    def logs(self, service=None, **options):
        self.asked.append(f"logs {service}")
        return self._logs

    def down(self, *, volumes=False, timeout=None):
        self.downs.append({"volumes": volumes, "timeout": timeout})
        return volumes


def _state(service: str, state: str = "running") -> ContainerState:
    return ContainerState(name=f"t-pd-{service}-1", service=service, state=state, health="", exit_code=None,
                          restart_count=0, ports={})


def _record(project: str, topology: str, **extra) -> runstate.LaunchRecord:
    fields = dict(project=project, topology=topology, compose_files=[], env_file="", mode=None,
                  config="<embedded defaults>", started_at=0, run_dir="", env={"X": "1"})
    return runstate.LaunchRecord(**(fields | extra))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dep(tmp_path):
    """A config whose front door is a closed port: it refuses at once, so the door is 'not serving'."""
    return load(str(write_config(tmp_path, f"project: t\nnetwork:\n  front_port: {_closed_port()}\n")))


# ---- status -------------------------------------------------------------------------------------
def test_status_names_a_paused_server_and_a_hung_one_and_asks_neither_a_frozen_one(dep):
    timed_out = BundleError("curl: (28) Operation timed out after 5001 milliseconds with 0 bytes received")
    stack = Stack("t-pd", [_state("prefill", "paused"), _state("decode"), _state("router")],
                  replies={"decode": timed_out})
    target = Launched("t-pd", registry.get("pd"), _record("t-pd", "pd"), ("a", "b", "c"), stack, dep)
    report = status.status(status.StatusRequest(target, processes=lambda name: ["python3"]))
    problems = {c.service: c.problem for c in report.containers}
    assert problems["prefill"].startswith("paused: its processes are frozen")
    assert problems["decode"] == f"hung: /health gave no answer within {status.WORKER_PROBE_SECONDS} s"
    assert problems["router"] is None  # not a server: only a paused one would be named
    assert "prefill" not in stack.asked  # a frozen container could not answer
    assert report.front_door.serving is False and report.front_door.status is None
    assert "status" not in report.to_dict()["front_door"]  # no generation was asked of a door that refused


def test_status_of_a_project_with_no_containers_asks_nothing_and_reads_an_old_record():
    # A record of an older driver stored True for the simulator; the project is down, so no stack, no config.
    target = Launched("t-tp4", registry.get("tp4"), _record("t-tp4", "tp4", mode=True))
    report = status.status(status.StatusRequest(target, target_name="slurm",
                                                target_status=lambda project: {"queue": f"{project} queued"}))
    assert report.to_dict() == {"topology": "tp4", "project": "t-tp4", "rehearsal": "sim", "containers": [],
                                "front_door": {"url": None, "serving": False, "detail": "not running"},
                                "slurm": {"queue": "t-tp4 queued"}}


# ---- down ---------------------------------------------------------------------------------------
def test_down_with_nothing_up_is_the_nothing_to_take_down_result():
    result = down.down(down.DownRequest(None))
    assert result is down.NOTHING_UP and result.project is None and result.ok


def test_down_answers_for_its_own_volumes_and_leaves_the_others_alone(monkeypatch):
    stack = Stack("t-pd", [])
    record = _record("t-pd", "pd", created_volumes=["t-pd_own"])
    target = Launched("t-pd", registry.get("pd"), record, ("t-pd-prefill-1", "t-pd-decode-1"), stack)
    monkeypatch.setattr(docker, "project_containers", lambda project: [])
    monkeypatch.setattr(docker, "project_networks", lambda project: [])
    monkeypatch.setattr(docker, "project_volumes", lambda project: ["t-pd_own", "sglang-bundle-jit-x"])
    result = down.down(down.DownRequest(target, volumes=True, timeout=7))
    assert stack.downs == [{"volumes": True, "timeout": 7}]
    assert not result.ok and result.left == ("t-pd_own",) and result.alone == ("sglang-bundle-jit-x",)
    assert result.removed == 2


# ---- logs ---------------------------------------------------------------------------------------
def test_logs_refuses_a_service_the_topology_lacks_before_reading_any():
    stack = Stack("t-pd", [])
    target = Launched("t-pd", registry.get("pd"), None, ("x",), stack)
    with pytest.raises(UsageError, match="pd has no service 'server'; its services: prefill, decode, router"):
        logs.logs(logs.LogsRequest(target, "server"))
    assert stack.asked == []


def test_logs_gives_a_progress_bar_as_its_last_state():
    stack = Stack("t-tp4", [], logs="server-1  | 10%\r50%\r100%\nserver-1  | ready\n")
    target = Launched("t-tp4", registry.get("tp4"), None, ("x",), stack)
    assert list(logs.logs(logs.LogsRequest(target))) == [["server-1  | 100%", "server-1  | ready"]]


# ---- top ----------------------------------------------------------------------------------------
def test_top_refuses_no_interval():
    with pytest.raises(UsageError, match="--interval 0: must be above 0 seconds"):
        top.check_interval(0)


def test_top_reads_only_running_servers_and_a_silent_one_has_no_figures(dep):
    stack = Stack("t-pd", [_state("prefill"), _state("decode", "paused"), _state("router")],
                  replies={"prefill": BundleError("curl: (7) Failed to connect")})
    target = Launched("t-pd", registry.get("pd"), None, ("x",), stack, dep)
    reading = next(top.readings(top.TopRequest(target, interval=0.01)))
    (row,) = reading.rows
    assert row.service == "prefill" and row.tokens_per_s is None and row.kv_use is None
    assert stack.asked == ["prefill", "prefill"]  # two readings of the one running server, none of the router


# ---- build, sign, lock, model -------------------------------------------------------------------
def test_build_plan_of_an_unknown_layer_suggests_one():
    with pytest.raises(BundleError, match="did you mean 'overlay'"):
        build.plan(build.BuildRequest(layers=("overlai",)))


def test_build_plan_without_an_engine_says_nothing_of_what_is_built(monkeypatch):
    def refuse():
        raise EnvironmentProblem("no Docker engine answers")

    monkeypatch.setattr(engine, "require_engine", refuse)
    planned = build.plan(build.BuildRequest(standin=True, layers=("runtime",)))
    assert [lp.name for lp in planned.layers] == ["runtime"] and planned.states == {}


def test_sign_refuses_a_tag_and_a_missing_sbom_before_cosign_runs(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(signature, "sign", lambda *a, **k: ran.append(a))
    with pytest.raises(InputError, match="'latest' is not a digest"):
        sign.sign(sign.SignRequest("latest"), reporter=None)
    with pytest.raises(InputError, match="no such file"):
        sign.sign(sign.SignRequest("sha256:" + "0" * 64, sbom=tmp_path / "sbom.json"), reporter=None)
    assert ran == []


def test_set_digest_records_it_once(tmp_path):
    path = tmp_path / "lock.toml"
    shutil.copy(REPO / "docker" / "lock.toml", path)
    digest = "sha256:" + "1" * 64
    first = lock.set_digest(lock.SetDigestRequest(digest, lock=str(path)))
    again = lock.set_digest(lock.SetDigestRequest(digest, lock=str(path)))
    assert first.changed and not again.changed and again.lock.published_digest == digest


def test_model_identify_refuses_a_v41_folder_before_comparing(tmp_path):
    folder = tmp_path / "v41"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "deepseek_v41"}')
    identified = model.identify(model.ModelRequest(path=folder))
    assert identified.checkpoint.folder == folder and "V4.1" in identified.refused


def test_model_compare_against_an_unpinned_checkpoint_names_the_pin_to_run(tmp_path):
    shutil.copytree(REPO / "bundle" / "images" / "audit" / "deepseek_v4_flash", tmp_path / "m")
    request = model.ModelRequest(path=tmp_path / "m")
    identified = model.identify(request)
    if identified.checkpoint.pin.pinned:
        pytest.skip("this checkout's lock pins the model")
    with pytest.raises(InputError, match="model.revision is not pinned") as err:
        model.compare(request, identified)
    assert "bundle model pin --checkpoint original" in err.value.hint


# ---- the rehearsal's bare flag, typed -------------------------------------------------------------
def test_rehearsal_given_bare_is_a_typed_value_the_registry_resolves():
    parser = argparse.ArgumentParser()
    add_rehearsal_argument(parser, help="r")
    bare = parser.parse_args(["--rehearsal"]).rehearsal
    assert bare is rehearsal.BARE_FLAG
    assert rehearsal.parse(bare) is rehearsal.get(rehearsal.BARE)
    assert rehearsal.parse(bare, knobs=True) is rehearsal.get(rehearsal.BARE_WITH_KNOBS)
    assert rehearsal.parse(bare, tuning=True).tunable
    with pytest.raises(UsageError, match="unknown rehearsal 'default'"):
        rehearsal.parse("default")  # the old string sentinel is no mode


@pytest.mark.parametrize("stored, expected", [(None, None), (False, None), (True, "sim"), ("engine", "engine"),
                                              ("sim", "sim")])
def test_launch_records_old_and_new_read_back_as_their_mode(stored, expected):
    mode = rehearsal.from_record(stored)
    assert rehearsal.name_of(mode) == expected
