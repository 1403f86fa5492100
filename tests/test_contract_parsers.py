"""Contract: every command line the bundle generates parses under the pinned SGLang's ServerArgs
parser and sglang-router's RouterArgs parser (the real ones, imported from the pinned packages),
and the snapshots `bundle validate` uses are exactly those parsers."""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version

import pytest

from bundle.rules import argspec
from bundle.config.loader import load_config
from bundle.images.lock import load_lock
from bundle.render.compose import ROUTER_MODULE, SERVER_MODULE, program_args, render
from tests.conftest import write_config
from tests.test_render import NON_DEFAULT

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]


@pytest.fixture(scope="module")
def server_parser():
    pytest.importorskip("sglang.srt.server_args", reason="sglang is not installed (make install)")
    return argspec.real_parser("sglang-server")


@pytest.fixture(scope="module")
def router_parser():
    pytest.importorskip("sglang_router.router_args", reason="sglang-router is not installed")
    return argspec.real_parser("sglang-router")


def test_installed_packages_are_the_ones_the_lock_pins():
    pins = load_lock().pins
    assert version("sglang") == pins["sglang"]
    assert version("sglang-router") == pins["sglang-router"]


@pytest.mark.parametrize("name", ["sglang-server", "sglang-router"])
def test_snapshot_equals_the_pinned_parser(name, server_parser, router_parser):
    parser = server_parser if name == "sglang-server" else router_parser
    dist = "sglang" if name == "sglang-server" else "sglang-router"
    live = json.loads(json.dumps(argspec.spec_from_parser(parser, package_version=version(dist))))
    assert live == argspec.load_spec(name), "run `python -m bundle.rules.argspec --write` and review the diff"


def _commands(tmp_path, which, topology, compose_available):
    dep = load_config(write_config(tmp_path, NON_DEFAULT) if which == "custom" else None)
    rendered = render(dep, topology)
    if compose_available:
        return {name: s["command"] for name, s in rendered.stack().config()["services"].items()}
    from bundle.render.compose import resolved_commands

    return resolved_commands(rendered.env, rendered.compose_files)


@pytest.mark.parametrize("which", ["default", "custom"])
@pytest.mark.parametrize("topology", ["tp4", "pd"])
def test_generated_command_lines_parse_under_the_real_parsers(
        tmp_path, which, topology, server_parser, router_parser, compose_available):
    commands = _commands(tmp_path, which, topology, compose_available)
    seen = set()
    for service, argv in commands.items():
        server_args = program_args(argv, SERVER_MODULE)
        if server_args is not None:
            ns = server_parser.parse_args(server_args)
            assert ns.model_path == "/model"
            if topology == "pd":
                assert ns.disaggregation_mode == service
                assert ns.disaggregation_transfer_backend == "nixl"
            seen.add(service)
        router_args = program_args(argv, ROUTER_MODULE)
        if router_args is not None:
            ns = router_parser.parse_args(router_args)
            assert ns.pd_disaggregation is True
            seen.add(service)
    assert seen == ({"server"} if topology == "tp4" else {"prefill", "decode", "router"})


def test_custom_levers_mean_what_they_say_to_the_real_parser(tmp_path, server_parser, compose_available):
    commands = _commands(tmp_path, "custom", "tp4", compose_available)
    ns = server_parser.parse_args(program_args(commands["server"], SERVER_MODULE))
    assert ns.speculative_algorithm == "NEXTN"
    assert ns.cuda_graph_backend_decode == "disabled" and ns.cuda_graph_backend_prefill == "disabled"
    assert ns.tp_size == 4 and ns.kv_cache_dtype == "fp8_e4m3" and ns.moe_runner_backend == "triton"
    config = ns.cuda_graph_config  # the parser's own type turns the JSON into a mapping
    assert (json.loads(config) if isinstance(config, str) else config) == {"decode": {"max_bs": 64}}


@pytest.mark.parametrize("tokens, spec", [
    (["--model-path", "/m", "--tp-sise", "4"], "sglang-server"),
    (["--model-path", "/m", "--moe-runner-backend", "fastest"], "sglang-server"),
    (["--model-path", "/m", "--disaggregation-transfer-backend", "carrier-pigeon"], "sglang-server"),
    (["--pd-disaggregation", "--policy", "best"], "sglang-router"),
    (["--pd-disaggregation", "--health-check-interval-secs", "soon"], "sglang-router"),
])
def test_a_misspelled_flag_or_bad_choice_fails_both_real_and_snapshot(tokens, spec, server_parser,
                                                                      router_parser):
    real = server_parser if spec == "sglang-server" else router_parser
    with pytest.raises(argspec.ArgumentsRejected):
        real.parse_args(tokens)
    assert argspec.check_arguments(spec, tokens) is not None


def test_snapshot_parser_accepts_what_the_real_one_accepts(server_parser):
    tokens = ["--model-path", "/m", "--tp-size", "4", "--mem-fraction-static", "0.8",
              "--cuda-graph-bs-decode", "1", "2", "4", "--disable-radix-cache"]
    assert isinstance(server_parser.parse_args(tokens), argparse.Namespace)
    assert argspec.check_arguments("sglang-server", tokens) is None
