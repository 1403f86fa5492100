"""The CPU engine rehearsal's overlay, as compose resolves it: what it changes on every SGLang server is
exactly the table in docs/rehearsal.md (server arguments read with the pinned SGLang parser), and
nothing else of the GPU host's configuration moves. Starts no container."""

from __future__ import annotations

import re

import pytest

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.paths import project_root
from bundle.rehearsal.engine import server as rehearsal_engine
from bundle.rules.argspec import SERVER_SPEC, load_spec, parser_from_spec
from bundle.stack.docker import stack_of
from bundle.rehearsal import registry as modes
from tests.conftest import missing, render_for as render

pytestmark = pytest.mark.usefixtures("runs_dir")

IMAGE = "sglang-bundle/rehearsal:test"
TABLE = re.compile(r"<!-- engine-overlay-differences:start -->(.*?)<!-- engine-overlay-differences:end -->", re.S)


@pytest.fixture(autouse=True)
def _need_compose(compose_available):
    if not compose_available:
        missing("docker compose v2 is not installed (make install adds it)")


def documented() -> set[str]:
    """The first column of docs/rehearsal.md's difference table: flags, variables, compose keys."""
    text = (project_root() / "docs" / "rehearsal.md").read_text()
    rows = TABLE.search(text).group(1).strip().splitlines()[2:]
    return {re.match(r"\|\s*`([^`]+)`", row).group(1) for row in rows}


def _services(tmp_path, topology: str, rehearsal):
    extra = rehearsal_engine.env_values(IMAGE, tmp_path) if rehearsal else {}
    rendered = render(load_config(None), topology, mode=rehearsal, extra_env=extra)
    rendered.write()
    return stack_of(rendered).config()["services"]


def _server_args(command: list[str]) -> dict:
    parser = parser_from_spec(load_spec(SERVER_SPEC))
    start = command.index("sglang.launch_server") + 1
    return vars(parser.parse_args(command[start:]))


def _flag_of(dest: str) -> str:
    return next(o["flags"][0] for o in load_spec(SERVER_SPEC)["options"] if o["dest"] == dest)


# The paragraph under the table: health waits, grace periods and host limits the rehearsal renders, and
# the model folder (the bind mount's source). Checked below to change in nothing else.
RENDERED_TIMINGS = ("healthcheck", "stop_grace_period", "ulimits", "volumes")


def overlay_differences(real: dict, engine: dict, services: list[str]) -> set[str]:
    found = set()
    for name in services:
        r, e = real[name], engine[name]
        found |= {k for k in set(r) | set(e) if k not in ("command", "environment", *RENDERED_TIMINGS)
                  and r.get(k) != e.get(k)}
        ra, ea = _server_args(r["command"]), _server_args(e["command"])
        found |= {_flag_of(d) for d in set(ra) | set(ea) if ra.get(d) != ea.get(d)}
        renv, eenv = r.get("environment", {}), e.get("environment", {})
        found |= {k for k in set(renv) | set(eenv) if renv.get(k) != eenv.get(k)}
    return found


@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_the_engine_overlay_changes_exactly_what_docs_list(tmp_path, topology):
    entry = registry.get(topology)
    real = _services(tmp_path, topology, None)
    engine = _services(tmp_path, topology, modes.get("engine"))
    assert set(engine) == set(real), "the overlay must not add or drop services"
    servers = [s.name for s in entry.active_services() if s.is_server]
    differences = overlay_differences(real, engine, servers)
    listed = documented()
    # UCX_TLS is pd's (the other files set no UCX transport); everything else applies to every server.
    assert differences <= listed, f"not in docs/rehearsal.md's table: {sorted(differences - listed)}"
    if topology == "pd":
        assert differences == listed, f"listed but not changed: {sorted(listed - differences)}"
    for name in servers:
        assert engine[name]["image"] == IMAGE
        assert engine[name]["healthcheck"]["test"] == real[name]["healthcheck"]["test"]
        model = [(v["target"], v["type"]) for v in engine[name]["volumes"]]
        assert model == [(v["target"], v["type"]) for v in real[name]["volumes"]]
        assert next(v for v in engine[name]["volumes"] if v["target"] == "/model")["source"] == str(tmp_path)
        assert engine[name]["restart"] == real[name]["restart"]
    if entry.has_router:
        r, e = real["router"], engine["router"]
        assert e["image"] == IMAGE
        assert e["command"] == r["command"], "the router's command line is the GPU host's"


def test_only_decode_gets_the_retraction_backup(tmp_path):
    engine = _services(tmp_path, "pd", modes.get("engine"))
    backup = {name: _server_args(engine[name]["command"])["disaggregation_decode_retraction_backup"]
              for name in ("prefill", "decode")}
    assert backup["decode"] == "cpu_tensor"
    assert backup["prefill"] != "cpu_tensor"


def _parsed(*argv):
    import argparse

    from bundle.commands._common import add_rehearsal_arguments, resolve_rehearsal

    parser = argparse.ArgumentParser()
    add_rehearsal_arguments(parser, rehearsal_help="r", sim_help="s")
    args = parser.parse_args(list(argv))
    mode = resolve_rehearsal(args)
    return mode.name if mode else None


def test_a_bare_rehearsal_is_the_engine_and_simulator_knobs_choose_the_simulator():
    assert _parsed() is None
    assert _parsed("--rehearsal") == "engine"
    assert _parsed("--rehearsal", "sim") == "sim"
    assert _parsed("--rehearsal", "--sim", "SIM_TPOT_MS=20") == "sim"


def test_simulator_knobs_on_the_engine_are_refused():
    import argparse

    from bundle.commands._common import sim_knobs
    from bundle.errors import BundleError

    with pytest.raises(BundleError, match="--rehearsal sim"):
        sim_knobs(argparse.Namespace(rehearsal="engine", sim=["SIM_TPOT_MS=20"]))


def test_the_rehearsal_model_is_refused_as_a_real_model_path(tmp_path):
    import json

    from bundle.rules.checkpoint import unsupported_checkpoint

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], modes.MODEL_MARKER: True}))
    assert "rehearsal" in unsupported_checkpoint(config)
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert unsupported_checkpoint(config) is None
