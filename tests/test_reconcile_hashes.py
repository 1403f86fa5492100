"""What a relaunch recreates comes from compose's own config hashes (`docker compose config --hash`),
computed here on the files a real render writes (no container is started): dropping a simulator
knob changes the workers' hashes and leaves the router's as it was, so a reconcile recreates the
workers and keeps the router serving; the monitoring profile adds its services to the plan."""

from __future__ import annotations

import pytest

from bundle.rehearsal import registry as modes
from bundle.service.prepare import prepare
from bundle.stack import docker

# The docker CLI's compose plugin parses the files; the engine is not asked.
pytestmark = pytest.mark.docker


def _hashes(runs_dir, **kwargs) -> dict[str, str]:
    rendered = prepare("pd", mode=modes.get("sim"), **kwargs).rendered
    rendered.write()
    return docker.stack_of(rendered).config_hashes()


def test_a_dropped_sim_knob_changes_the_workers_hashes_and_not_the_routers(runs_dir):
    with_knob = _hashes(runs_dir, sim={"SIM_TPOT_MS": "40"})
    without = _hashes(runs_dir)
    assert set(with_knob) == {"prefill", "decode", "router"}
    assert with_knob["prefill"] != without["prefill"] and with_knob["decode"] != without["decode"]
    assert with_knob["router"] == without["router"]
    assert _hashes(runs_dir, sim={"SIM_TPOT_MS": "40"}) == with_knob  # the same options, the same hashes


def test_the_monitoring_profile_adds_its_services(runs_dir):
    plain, monitored = _hashes(runs_dir), _hashes(runs_dir, monitoring=True)
    assert set(plain) < set(monitored) and "prometheus" in monitored
    assert all(monitored[s] == plain[s] for s in plain)
