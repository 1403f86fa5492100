"""Contract: every command line the bundle generates parses under the pinned SGLang's ServerArgs
parser and smg's RouterArgs parser (the real ones, imported from the pinned packages),
and the snapshots `bundle validate` uses are exactly those parsers."""

from __future__ import annotations

import argparse
import importlib.util
import json
from importlib.metadata import version

import pytest

from bundle.rules import argspec
from bundle.config.loader import load_config
from bundle.lock import load_lock
from bundle.render.compose import program_args
from bundle.stack.docker import stack_of
from bundle.topology import ROUTER_MODULE, SERVER_MODULE
from tests.conftest import render_for, require_module, write_config
from tests.test_render import NON_DEFAULT

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]


@pytest.fixture(scope="module")
def server_parser():
    require_module("sglang.srt.server_args")
    return argspec.real_parser("sglang-server")


@pytest.fixture(scope="module")
def router_parser():
    require_module("smg.router_args")
    return argspec.real_parser("smg")


def test_installed_packages_are_the_ones_the_lock_pins():
    pins = load_lock().pins
    assert version("sglang") == pins["sglang"]
    assert version("smg") == pins["smg"]
    # Both packages install an `smg` console script: the frozen router must not be there too.
    assert importlib.util.find_spec("sglang_router") is None


@pytest.mark.parametrize("name", ["sglang-server", "smg"])
def test_snapshot_equals_the_pinned_parser(name, server_parser, router_parser):
    parser = server_parser if name == "sglang-server" else router_parser
    dist = "sglang" if name == "sglang-server" else "smg"
    live = json.loads(json.dumps(argspec.spec_from_parser(parser, package_version=version(dist))))
    assert live == argspec.load_spec(name), "run `python -m bundle.rules.argspec --write` and review the diff"


def _commands(tmp_path, which, topology, compose_available):
    dep = load_config(write_config(tmp_path, NON_DEFAULT) if which == "custom" else None)
    rendered = render_for(dep, topology)
    if compose_available:
        rendered.write()
        return {name: s["command"] for name, s in stack_of(rendered).config()["services"].items()}
    return rendered.commands


@pytest.mark.parametrize("which", ["default", "custom"])
@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_generated_command_lines_parse_under_the_real_parsers(
        tmp_path, which, topology, server_parser, router_parser, compose_available):
    from smg.router_args import RouterArgs  # importable: router_parser skipped otherwise

    commands = _commands(tmp_path, which, topology, compose_available)
    seen, bootstrap, router, ports = set(), None, None, {}
    for service, argv in commands.items():
        server_args = program_args(argv, SERVER_MODULE)
        if server_args is not None:
            ns = server_parser.parse_args(server_args)
            assert ns.model_path == "/model"
            if topology == "pd":
                assert ns.disaggregation_mode == service
                assert ns.disaggregation_transfer_backend == "nixl"
                ports[service] = ns.port
                if service == "prefill":
                    bootstrap = ns.disaggregation_bootstrap_port
            seen.add(service)
        router_args = program_args(argv, ROUTER_MODULE)
        if router_args is not None:
            ns = router_parser.parse_args(router_args)
            assert ns.pd_disaggregation is (topology == "pd")
            if topology == "dp":
                port = 31000 if which == "custom" else 30000
                assert ns.worker_urls == [f"http://replica-{i}:{port}" for i in (0, 1)]
            # smg's own conversion of the parsed line (what `smg launch` hands its Rust core).
            router = RouterArgs.from_cli_args(ns, use_router_prefix=False)
            seen.add(service)
    if topology == "pd":
        # The bootstrap port is explicit (smg defaults it to none) and is prefill's; both policies
        # are set on the line, not left to smg's default.
        assert router.prefill_urls == [(f"http://prefill:{ports['prefill']}", bootstrap)]
        assert bootstrap is not None and router.decode_urls == [f"http://decode:{ports['decode']}"]
        assert router.prefill_policy is not None and router.decode_policy is not None
    assert seen == {"tp4": {"server"}, "pd": {"prefill", "decode", "router"},
                    "dp": {"replica-0", "replica-1", "router"}}[topology]


def test_custom_levers_mean_what_they_say_to_the_real_parser(tmp_path, server_parser, compose_available):
    commands = _commands(tmp_path, "custom", "tp4", compose_available)
    ns = server_parser.parse_args(program_args(commands["server"], SERVER_MODULE))
    assert ns.speculative_algorithm == "EAGLE"
    assert ns.cuda_graph_backend_decode == "disabled" and ns.cuda_graph_backend_prefill == "disabled"
    assert ns.tp_size == 4 and ns.kv_cache_dtype == "fp8_e4m3" and ns.moe_runner_backend == "triton"
    config = ns.cuda_graph_config  # the parser's own type turns the JSON into a mapping
    assert (json.loads(config) if isinstance(config, str) else config) == {"decode": {"max_bs": 64}}


@pytest.mark.parametrize("tokens, spec", [
    (["--model-path", "/m", "--tp-sise", "4"], "sglang-server"),
    (["--model-path", "/m", "--moe-runner-backend", "fastest"], "sglang-server"),
    (["--model-path", "/m", "--disaggregation-transfer-backend", "carrier-pigeon"], "sglang-server"),
    (["--pd-disaggregation", "--policy", "best"], "smg"),
    (["--pd-disaggregation", "--decode-policy", "bucket"], "smg"),  # bucket is prefill-only
    (["--pd-disaggregation", "--health-check-interval-secs", "soon"], "smg"),
    # sglang-router 0.3.2's flag; smg has no mini load balancer.
    (["--pd-disaggregation", "--mini-lb"], "smg"),
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


@pytest.mark.parametrize("budget, attempts", [(600, 2), (12, 2), (30, 3), (7, 1)])
def test_router_attempts_and_backoffs_fit_the_request_budget(tmp_path, budget, attempts, router_parser,
                                                            compose_available):
    """What smg itself parses off the rendered pd router's command line (not the render's own
    constants): every attempt run to its timeout plus every backoff at its largest jitter (smg's
    backoff: initial x multiplier^k, capped, times 1 + jitter) fits the budget, and one second more
    per attempt would not (the budget is used, not wasted)."""
    config = write_config(tmp_path, f"pd:\n  router:\n    request_timeout_secs: {budget}\n"
                                    f"    retry_max_retries: {attempts}\n")
    dep = load_config(config)
    rendered = render_for(dep, "pd")
    if compose_available:
        rendered.write()
        argv = stack_of(rendered).config()["services"]["router"]["command"]
    else:
        argv = rendered.commands["router"]
    ns = router_parser.parse_args(program_args(argv, ROUTER_MODULE))
    assert ns.retry_max_retries == attempts and ns.request_timeout_secs >= 1
    backoffs_ms = sum(min(ns.retry_initial_backoff_ms * ns.retry_backoff_multiplier ** k, ns.retry_max_backoff_ms)
                      for k in range(attempts - 1)) * (1 + ns.retry_jitter_factor)
    worst = attempts * ns.request_timeout_secs + backoffs_ms / 1000
    assert worst <= budget, (ns.request_timeout_secs, backoffs_ms)
    assert worst + attempts > budget, f"{ns.request_timeout_secs} s per attempt leaves a second per attempt unused"
