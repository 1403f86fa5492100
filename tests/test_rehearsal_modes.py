"""The rehearsal modes' registry (bundle/rehearsal/registry.py): `--rehearsal` is parsed once into a
mode, no module below the registry compares a mode's name, and a third mode made here from one entry
plus its overlay renders for every topology through the path launch takes (service.prepare)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import yaml

from bundle import topology as registry
from bundle.commands._common import add_rehearsal_arguments, resolve_rehearsal, sim_knobs
from bundle.errors import BundleError
from bundle.rehearsal import registry as rehearsal
from bundle.service.prepare import prepare
from bundle.stack.docker import stack_of
from tests.test_topology_registry import comparisons_outside, name_comparisons


def _args(*argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_rehearsal_arguments(parser, rehearsal_help="r", sim_help="s")
    return parser.parse_args(list(argv))


def test_the_flag_is_parsed_once_into_a_mode():
    args = _args("--rehearsal", "sim", "--sim", "SIM_TPOT_MS=20")
    mode = resolve_rehearsal(args)
    assert mode is rehearsal.get("sim") and args.rehearsal is mode
    assert resolve_rehearsal(args) is mode and sim_knobs(args) == {"SIM_TPOT_MS": "20"}
    # A launch record of an older driver stored True for the simulator, and False for none.
    assert rehearsal.from_record(True) is rehearsal.get("sim") and rehearsal.from_record(False) is None
    with pytest.raises(BundleError, match="unknown rehearsal 'gpu'"):
        rehearsal.parse("gpu")


def test_no_mode_name_is_compared_outside_the_registry():
    found = comparisons_outside("rehearsal/registry.py", set(rehearsal.NAMES))
    assert not found, "behaviour keyed on a rehearsal mode's name; put it in its entry:\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    'if request.rehearsal == "engine":\n    pass\n',
    'simulated = mode in ("sim",)\n',
])
def test_the_mode_name_check_finds_a_planted_comparison(code):
    assert name_comparisons(code, "service/planted.py", set(rehearsal.NAMES))


@pytest.fixture
def slow(tmp_path, monkeypatch):
    """A third mode: the simulator at a GPU-like decode speed, from one entry and one overlay per
    topology (the simulator's own, with its speed fixed in the overlay, as a new mode would write it)."""
    sim = rehearsal.get("sim")
    for name in registry.NAMES:
        topology = registry.get(name)
        overlay = yaml.safe_load(sim.overlay_file(topology).read_text().replace("!reset {}", "{}"))
        for service in overlay["services"].values():
            if "environment" in service:
                service["environment"]["SIM_TPOT_MS"] = "35"
        text = yaml.safe_dump(overlay, sort_keys=False).replace("deploy: {}", "deploy: !reset {}")
        (tmp_path / f"rehearsal-slow-{name}.yaml").write_text(text)
    mode = dataclasses.replace(sim, name="slow", summary="slow simulated workers",
                               description="the simulator at 35 ms per output token",
                               overlay=str(tmp_path / "rehearsal-slow-{topology}.yaml"), tunable=False)
    monkeypatch.setitem(rehearsal.MODES, "slow", mode)
    monkeypatch.setattr(rehearsal, "NAMES", tuple(rehearsal.MODES))
    return mode


@pytest.mark.parametrize("topology", registry.NAMES)
def test_a_third_mode_renders_for_every_topology(slow, topology, runs_dir):
    args = _args("--rehearsal", "slow")
    mode = resolve_rehearsal(args)
    assert mode is slow
    rendered = prepare(topology, mode=mode).rendered
    assert rendered.compose_files[1] == slow.overlay_file(registry.get(topology))
    rendered.write()
    services = stack_of(rendered).config()["services"]  # compose's own resolved view
    for server in registry.get(topology).servers:
        if server.name in services:
            assert services[server.name]["environment"]["SIM_TPOT_MS"] == "35"
            assert "deploy" not in services[server.name] or not services[server.name]["deploy"].get("resources")
