"""The render targets' registry (bundle/targets/registry.py): every registered target offers what the
verbs ask of it (the protocol), a launch of one target never shares a compose project with another's
launch of the same topology, and no module below the registry compares a target's name."""

from __future__ import annotations

import inspect

import pytest

from bundle.cli import main

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.errors import BundleError
from bundle.targets import registry as targets
from tests.test_topology_registry import comparisons_outside, name_comparisons


@pytest.mark.parametrize("name", targets.NAMES)
def test_every_target_offers_the_protocol(name):
    target = targets.get(name)
    assert target.name == name and target.help
    params = inspect.signature(target.renderer.for_target).parameters
    assert list(params)[:2] == ["dep", "rendered"]
    assert ("mode" in params) == (target.takes_mode and target.writes_folder), \
        "a folder target that takes a no-GPU mode gets it in for_target"
    if target.rules is not None:
        assert callable(target.rules.check) and callable(target.rules.problems) and target.rules.CHECKED
    if target.launcher is not None:
        assert list(inspect.signature(target.launcher.launch).parameters) == ["request", "dep", "reporter"]
        assert target.stack is not None, "what a target launches, the verbs after launch must reach"
        assert isinstance(target.project("sglang-bundle-pd"), str)


def test_an_unknown_target_is_a_usage_error():
    with pytest.raises(BundleError) as caught:
        targets.get("nomad")
    assert caught.value.exit_code == 2 and f"known: {', '.join(targets.TARGETS)}" in caught.value.message


@pytest.mark.parametrize("topology", registry.NAMES)
def test_two_targets_launching_one_topology_never_share_a_project(topology):
    """The collision: a Slurm rehearsal of pd once ran as the compose project of a compose launch of
    pd, so `bundle down` of the Slurm one counted the volumes compose keeps by design (and failed)."""
    base = load_config(None).project_name(topology)
    projects = targets.launched_projects(base)
    assert len(projects) == len(targets.LAUNCHABLE) and set(projects.values()) == set(targets.LAUNCHABLE)
    assert projects[base] == targets.DEFAULT  # compose keeps the deployment's own name


def test_no_target_name_is_compared_outside_the_registry():
    found = comparisons_outside("targets/registry.py", set(targets.NAMES))
    assert not found, "behaviour keyed on a target's name; put it in its registry entry:\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    'if record.target == "slurm":\n    pass\n',
    'writes = args.target in ("k8s", "slurm")\n',
])
def test_the_target_name_check_finds_a_planted_comparison(code):
    assert name_comparisons(code, "commands/planted.py", {"k8s", "slurm"})  # the names it looks for


def test_a_dry_run_asked_of_a_target_without_one_is_refused_not_ignored(capsys, runs_dir):
    """Once, `--kubectl-dry-run` on the compose render did nothing, silently."""
    offered = [t.name for t in targets.TARGETS.values() if t.dry_run]
    try:
        code = main(["render", "pd", "--kubectl-dry-run"])
    except SystemExit as exc:  # argparse's own refusal of a flag it does not know
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    if offered:  # the flag exists: compose's render has no dry run
        assert "--kubectl-dry-run runs an outside tool on written manifests; the compose render offers no such" in err
    else:  # no target offers one: the flag is not offered either
        assert "unrecognized arguments: --kubectl-dry-run" in err
