"""`bundle status`'s one line on where a stack stands (after a reboot: what came back, what did not, whether
it serves) and the command it names to bring it back, from the containers' states and the launch record.
The same words on a real engine restart: tests/e2e/test_reboot_e2e.py."""

from __future__ import annotations

from bundle import topology as registry
from bundle.targets import registry as targets
from bundle.config.source import DEFAULTS_NAME
from bundle.service.running import Launched
from bundle.service.status import ContainerStatus, FrontDoorState, relaunch_command, standing
from bundle.stack.runstate import LaunchRecord


def _container(service: str, state: str, health: str = "healthy", exit_code: int | None = 0) -> ContainerStatus:
    return ContainerStatus(service, f"p-{service}-1", state, health, 0, exit_code, {}, None, [])


def _door(serving: bool) -> FrontDoorState:
    return FrontDoorState("http://127.0.0.1:30000", serving=serving, detail="")


def _launched(**record) -> Launched:
    fields = dict(project="p-pd", topology="pd", compose_files=[], env_file="", mode=None, config=DEFAULTS_NAME,
                  started_at=0.0, run_dir="")
    return Launched("p-pd", registry.get("pd"), LaunchRecord(**{**fields, **record}))


def test_a_whole_serving_stack_names_no_command():
    where = standing([_container(s, "running") for s in ("router", "prefill", "decode")], _door(True), "cmd")
    assert where.words == "every service runs (decode, prefill, router) and the front door serves"
    assert where.command is None and where.not_running == []


def test_a_router_back_alone_is_named_with_what_did_not_come_back_and_the_command():
    where = standing([_container("router", "running"), _container("prefill", "exited"),
                      _container("decode", "exited", exit_code=137)], _door(False), "bundle launch pd")
    assert where.words == ("running: router; not running: decode (exited, exit code 137), prefill (exited, exit "
                           "code 0); the front door does not serve")
    assert where.command == "bundle launch pd"


def test_nothing_back_says_so():
    where = standing([_container(s, "exited") for s in ("router", "prefill", "decode")], _door(False), "c")
    assert where.words.startswith("none of its services runs (decode (exited, exit code 0), ")
    assert where.command == "c"


def test_all_running_but_still_starting_is_not_called_serving():
    where = standing([_container("router", "running", "starting"), _container("prefill", "running", "starting"),
                      _container("decode", "running")], _door(False), "c")
    assert where.words == ("every service runs (decode, prefill, router) but the front door does not serve yet "
                           "(prefill, router still starting)")
    assert where.command == "c"  # launch waits until it serves, with progress


def test_the_command_repeats_the_launch_config_rehearsal_target_and_monitoring():
    default = targets.DEFAULT  # what the status verb hands down: the target launch takes without --target
    assert relaunch_command(_launched(), default) == "bundle launch pd"
    assert relaunch_command(_launched(target=default), default) == "bundle launch pd"
    assert relaunch_command(_launched(config="/etc/b.yaml", mode="sim", profiles=["monitoring"]), default) == \
        "bundle launch pd -c /etc/b.yaml --rehearsal sim --monitoring"
    assert relaunch_command(_launched(mode=True, target="slurm"), default) == \
        "bundle launch pd --rehearsal sim --target slurm"  # an older record's True is the simulator
