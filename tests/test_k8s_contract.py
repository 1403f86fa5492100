"""Contract: every container command line of the Kubernetes manifests, as kubelet expands it in a
LeaderWorkerSet pod, parses under the pinned SGLang's and smg's own parsers (and their snapshots),
and carries exactly the flags compose gives the same server for the same config: only
--base-gpu-id, --host/--port and what multi-node and the RDMA devices add may differ; the router
differs only in how it finds its workers."""

from __future__ import annotations

import pytest

from bundle.config.loader import load_config
from bundle.render import k8s
from bundle.render.compose import program_args
from bundle.render.k8s import commands as cmd
from bundle.rules import argspec
from bundle.topology import ROUTER_MODULE, SERVER_MODULE
from tests.conftest import render_for, write_config
from tests.test_k8s_render import CONFIGS

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]

# What a pod may set differently from the compose container, by parser destination.
POD_SERVER_DESTS = {"base_gpu_id", "host", "port", "nnodes", "node_rank", "dist_init_addr",
                    "disaggregation_ib_device"}
ROUTER_WORKER_DESTS = {"worker_urls", "prefill", "decode", "service_discovery", "discovery_provider",
                       "selector", "prefill_selector", "decode_selector", "service_discovery_port",
                       "service_discovery_namespace"}


@pytest.fixture(scope="module")
def server_parser():
    pytest.importorskip("sglang.srt.server_args", reason="sglang is not installed (make install)")
    return argspec.real_parser(argspec.SERVER_SPEC)


@pytest.fixture(scope="module")
def router_parser():
    pytest.importorskip("smg.router_args", reason="smg is not installed (make install)")
    return argspec.real_parser(argspec.ROUTER_SPEC)


def _both(tmp_path, which, topology):
    text = CONFIGS[which]
    dep = load_config(write_config(tmp_path, text) if text else None)
    compose = render_for(dep, topology)
    return dep, compose, k8s.render(dep, compose)


def _pods(rendered):
    """(workload, pod template, the LWS env kubelet expands with) for every container of servers and router."""
    for obj in rendered.objects:
        if obj["kind"] == "LeaderWorkerSet":
            name = obj["metadata"]["name"]
            size = obj["spec"]["leaderWorkerTemplate"]["size"]
            for key, index in (("leaderTemplate", 0), ("workerTemplate", size - 1)):
                env = {cmd.LWS_LEADER_ADDRESS: f"{name}-0.{name}.{rendered.namespace}",
                       cmd.LWS_WORKER_INDEX: str(index), cmd.LWS_GROUP_SIZE: str(size)}
                yield name, obj["spec"]["leaderWorkerTemplate"][key], env
        elif obj["kind"] == "Deployment":
            yield obj["metadata"]["name"], obj["spec"]["template"], {}


def _argv(template, env):
    (container,) = template["spec"]["containers"]
    declared = {e["name"]: e["value"] for e in container.get("env", [])}
    return [cmd.kubelet_expand(t, {**declared, **env}) for t in container["command"][1:] + container["args"]]


def _differing(a, b, allowed):
    va, vb = vars(a), vars(b)
    return {k: (va.get(k), vb.get(k)) for k in set(va) | set(vb) if k not in allowed and va.get(k) != vb.get(k)}


@pytest.mark.parametrize("which", list(CONFIGS))
@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_every_pod_command_parses_and_matches_compose(tmp_path, which, topology, server_parser, router_parser):
    from smg.router_args import RouterArgs

    dep, compose, rendered = _both(tmp_path, which, topology)
    seen = set()
    for workload, template, env in _pods(rendered):
        argv = _argv(template, env)
        service = rendered.compose_services[workload]
        server = program_args(argv, SERVER_MODULE)
        if server is not None:
            assert argspec.check_arguments(argspec.SERVER_SPEC, server) is None
            ns = server_parser.parse_args(server)
            theirs = server_parser.parse_args(compose.server_args(service))
            assert _differing(ns, theirs, POD_SERVER_DESTS) == {}, f"{workload} differs from compose's {service}"
            nodes = dep.kubernetes.role(dep.roles(topology)[0].service.config_key if topology != "pd" else
                                        ("pd", service)).nodes
            assert ns.base_gpu_id == 0 and ns.port == dep.network.worker_port
            if nodes > 1:
                assert (ns.nnodes, ns.node_rank) == (nodes, int(env[cmd.LWS_WORKER_INDEX]))
                assert ns.dist_init_addr == f"{env[cmd.LWS_LEADER_ADDRESS]}:{dep.kubernetes.dist_init_port}"
            else:
                assert ns.nnodes == 1 and ns.dist_init_addr is None
            seen.add(service)
            continue
        router = program_args(argv, ROUTER_MODULE)
        assert router is not None, f"{workload} runs neither {SERVER_MODULE} nor {ROUTER_MODULE}"
        assert argspec.check_arguments(argspec.ROUTER_SPEC, router) is None
        ns = router_parser.parse_args(router)
        assert _differing(ns, router_parser.parse_args(compose.router_args()), ROUTER_WORKER_DESTS) == {}
        args = RouterArgs.from_cli_args(ns, use_router_prefix=False)  # what smg's core gets
        _check_workers(dep, rendered, topology, args)
        seen.add(service)
    assert seen == {"tp4": {"server"}, "pd": {"prefill", "decode", "router"},
                    "dp": {"replica-0", "router"}}[topology]


def _leader_labels(rendered, suffix):
    (lws,) = [o for o in rendered.objects if o["kind"] == "LeaderWorkerSet"
              and o["metadata"]["name"].endswith(suffix)]
    return lws, lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]


def _check_workers(dep, rendered, topology, args):
    port = dep.network.worker_port
    if dep.kubernetes.discovery == "selector":
        assert args.service_discovery and args.service_discovery_port == port
        assert args.service_discovery_namespace == rendered.namespace
        pairs = ((args.prefill_selector, "-prefill"), (args.decode_selector, "-decode")) if topology == "pd" \
            else ((args.selector, "-replica"),)
        for selector, suffix in pairs:
            _, meta = _leader_labels(rendered, suffix)
            # LWS adds worker-index itself: 0 is the leader, the pod that serves HTTP.
            assert selector.pop(cmd.LWS_WORKER_INDEX_LABEL) == "0"
            assert selector and selector.items() <= meta["labels"].items()
        if topology == "pd":
            # smg reads the bootstrap port from prefill's annotation; prefill listens on it.
            _, meta = _leader_labels(rendered, "-prefill")
            assert meta["annotations"][cmd.BOOTSTRAP_PORT_ANNOTATION] == str(dep.section("pd").bootstrap_port)
        return
    assert not args.service_discovery
    if topology == "pd":
        lws, _ = _leader_labels(rendered, "-prefill")
        name = lws["metadata"]["name"]
        assert args.prefill_urls == [(f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}",
                                      dep.section("pd").bootstrap_port) for i in range(lws["spec"]["replicas"])]
        lws, _ = _leader_labels(rendered, "-decode")
        name = lws["metadata"]["name"]
        assert args.decode_urls == [f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}"
                                    for i in range(lws["spec"]["replicas"])]
    else:
        lws, _ = _leader_labels(rendered, "-replica")
        name = lws["metadata"]["name"]
        assert args.worker_urls == [f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}"
                                    for i in range(lws["spec"]["replicas"])]


def test_a_pd_server_spread_over_nodes_has_every_rank_addressed(tmp_path, server_parser):
    _, _, rendered = _both(tmp_path, "custom", "pd")
    ranks = []
    for workload, template, env in _pods(rendered):
        if workload.endswith("-decode"):
            ranks.append(server_parser.parse_args(program_args(_argv(template, env), SERVER_MODULE)).node_rank)
    assert ranks == [0, 1]


def test_mooncake_gets_the_ib_devices_and_the_parser_takes_them(tmp_path, server_parser):
    _, _, rendered = _both(tmp_path, "dns", "pd")
    for workload, template, env in _pods(rendered):
        server = program_args(_argv(template, env), SERVER_MODULE)
        if server is not None:
            ns = server_parser.parse_args(server)
            assert ns.disaggregation_transfer_backend == "mooncake" and ns.disaggregation_ib_device == "mlx5_2"
