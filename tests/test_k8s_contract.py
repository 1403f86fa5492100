"""Contract: every container command line of the Kubernetes manifests, as kubelet expands it in a
LeaderWorkerSet pod (pd: a pod of a DisaggregatedSet role, labelled as its controller labels it),
parses under the pinned SGLang's and smg's own parsers (and their snapshots), and carries exactly
the flags compose gives the same server for the same config: only --base-gpu-id, --host/--port and
what multi-node and the RDMA devices add may differ; the router differs only in how it finds its
workers, and in a DisaggregatedSet it finds only its own revision's (and slice's) leaders."""

from __future__ import annotations

import pytest

from bundle.config.loader import load_config
from bundle.targets.k8s import config as k8s_config
from bundle.targets.k8s import manifests as k8s
from bundle.render.compose import program_args
from bundle.targets.k8s import commands as cmd
from bundle.targets.k8s import disaggregated as ds
from bundle.rules import argspec
from bundle.topology import ROUTER_MODULE, SERVER_MODULE
from tests.conftest import render_for, require_module, write_config
from tests.test_k8s_render import CASES, CONFIGS

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]

# What a pod may set differently from the compose container, by parser destination.
POD_SERVER_DESTS = {"base_gpu_id", "host", "port", "nnodes", "node_rank", "dist_init_addr",
                    "disaggregation_ib_device"}
ROUTER_WORKER_DESTS = {"worker_urls", "prefill", "decode", "service_discovery", "discovery_provider",
                       "selector", "prefill_selector", "decode_selector", "service_discovery_port",
                       "service_discovery_namespace"}


@pytest.fixture(scope="module")
def server_parser():
    require_module("sglang.srt.server_args")
    return argspec.real_parser(argspec.SERVER_SPEC)


@pytest.fixture(scope="module")
def router_parser():
    require_module("smg.router_args")
    return argspec.real_parser(argspec.ROUTER_SPEC)


def _both(tmp_path, which, topology):
    text = CONFIGS[which]
    dep = load_config(write_config(tmp_path, text) if text else None)
    compose = render_for(dep, topology)
    return dep, compose, k8s.render(dep, compose)


# One revision of a DisaggregatedSet as its controller would stamp it (the revision is
# ComputeRevision's 8-character hash), in its last slice.
REVISION = "5d8c7f9a"


def _set_labels(set_name, slice_index, revision, role):
    """GenerateLabels (LWS v0.10.0 pkg/utils/disaggregatedset/utils.go): what the controller merges
    over a role's pod-template labels (lws_manager.go Create)."""
    return {"app": f"{set_name}-{slice_index}-{role}", ds.ROLE_LABEL: role, ds.SLICE_LABEL: str(slice_index),
            ds.SET_NAME_LABEL: set_name, ds.REVISION_LABEL: revision}


def _groups(rendered):
    """(workload, LeaderWorkerSet name, its spec, labels the controller adds) of every server group
    and, in a DisaggregatedSet, the router's."""
    for obj in rendered.objects:
        if obj["kind"] == "LeaderWorkerSet":
            yield obj["metadata"]["name"], obj["metadata"]["name"], obj["spec"], {}
        elif obj["kind"] == "DisaggregatedSet":
            name, last = obj["metadata"]["name"], obj["spec"].get("slices", 1) - 1
            for role in obj["spec"]["roles"]:
                child = f"{name}-{last}-{REVISION}-{role['name']}"  # GenerateName, utils.go
                yield f"{name}-{role['name']}", child, role["spec"], _set_labels(name, last, REVISION, role["name"])


def _pods(rendered):
    """(workload, pod template, the LWS env kubelet expands with, the pod's labels) for every
    container of servers and router."""
    for workload, lws, spec, added in _groups(rendered):
        size = spec["leaderWorkerTemplate"]["size"]
        for key, index in (("leaderTemplate", 0), ("workerTemplate", size - 1)):
            template = spec["leaderWorkerTemplate"].get(key)
            if template is None:
                continue  # a group of one with no leader template: the leader is made of workerTemplate
            env = {cmd.LWS_LEADER_ADDRESS: f"{lws}-0.{lws}.{rendered.namespace}",
                   cmd.LWS_WORKER_INDEX: str(index), cmd.LWS_GROUP_SIZE: str(size)}
            labels = {**template["metadata"]["labels"], **added, cmd.LWS_NAME_LABEL: lws,
                      cmd.LWS_WORKER_INDEX_LABEL: str(index)}
            yield workload, template, env, labels
    for obj in rendered.objects:
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            yield obj["metadata"]["name"], template, {}, template["metadata"]["labels"]


def _argv(template, env, labels):
    """The container's argv as kubelet runs it: $(VAR) from its env, the downward API's labels
    included."""
    (container,) = template["spec"]["containers"]
    declared = {}
    for e in container.get("env", []):
        if "valueFrom" in e:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            assert path.startswith("metadata.labels['") and path.endswith("']"), path
            declared[e["name"]] = labels.get(path[len("metadata.labels['"):-2], "")
        else:
            declared[e["name"]] = e["value"]
    return [cmd.kubelet_expand(t, {**declared, **env}) for t in container["command"][1:] + container["args"]]


def _differing(a, b, allowed):
    va, vb = vars(a), vars(b)
    return {k: (va.get(k), vb.get(k)) for k in set(va) | set(vb) if k not in allowed and va.get(k) != vb.get(k)}


@pytest.mark.parametrize("which, topology", CASES)
def test_every_pod_command_parses_and_matches_compose(tmp_path, which, topology, server_parser, router_parser):
    from smg.router_args import RouterArgs

    dep, compose, rendered = _both(tmp_path, which, topology)
    seen = set()
    for workload, template, env, labels in _pods(rendered):
        argv = _argv(template, env, labels)
        service = rendered.compose_services[workload]
        server = program_args(argv, SERVER_MODULE)
        if server is not None:
            assert argspec.check_arguments(argspec.SERVER_SPEC, server) is None
            ns = server_parser.parse_args(server)
            theirs = server_parser.parse_args(compose.server_args(service))
            assert _differing(ns, theirs, POD_SERVER_DESTS) == {}, f"{workload} differs from compose's {service}"
            nodes = k8s_config.of(dep).role(dep.roles(topology)[0].service.config_key if topology != "pd" else
                                        ("pd", service)).nodes
            assert ns.base_gpu_id == 0 and ns.port == dep.network.worker_port
            if nodes > 1:
                assert (ns.nnodes, ns.node_rank) == (nodes, int(env[cmd.LWS_WORKER_INDEX]))
                assert ns.dist_init_addr == f"{env[cmd.LWS_LEADER_ADDRESS]}:{k8s_config.of(dep).dist_init_port}"
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
        _check_workers(dep, rendered, topology, args, labels)
        seen.add(service)
    assert seen == {"tp4": {"server"}, "pd": {"prefill", "decode", "router"},
                    "dp": {"replica-0", "router"}}[topology]


def _leader(rendered, suffix):
    """(LeaderWorkerSet name, replicas, the leader pod's labels and annotations) of the workload ...<suffix>."""
    for workload, template, env, labels in _pods(rendered):
        if workload.endswith(suffix) and env[cmd.LWS_WORKER_INDEX] == "0":
            (spec,) = [s for w, _, s, _ in _groups(rendered) if w == workload]
            lws = labels[cmd.LWS_NAME_LABEL]
            return lws, spec.get("replicas", 1), labels, template["metadata"].get("annotations", {})
    raise AssertionError(f"no leader of ...{suffix}")


def _check_workers(dep, rendered, topology, args, router_labels):
    port = dep.network.worker_port
    if k8s_config.of(dep).discovery == "selector":
        assert args.service_discovery and args.service_discovery_port == port
        assert args.service_discovery_namespace == rendered.namespace
        pairs = ((args.prefill_selector, "-prefill"), (args.decode_selector, "-decode")) if topology == "pd" \
            else ((args.selector, "-replica"),)
        for selector, suffix in pairs:
            _, _, labels, _ = _leader(rendered, suffix)
            # LWS adds worker-index itself: 0 is the leader, the pod that serves HTTP.
            assert selector[cmd.LWS_WORKER_INDEX_LABEL] == "0"
            assert selector.items() <= labels.items()
            if ds.REVISION_LABEL in labels:
                # The router pairs only its own revision's leaders (and, with slices, its own slice's).
                assert selector[ds.REVISION_LABEL] == router_labels[ds.REVISION_LABEL] == REVISION
                other = {**labels, ds.REVISION_LABEL: "0a1d0a1d"}
                assert not selector.items() <= other.items()
                if k8s_config.of(dep).form("pd").slices > 1:
                    assert not selector.items() <= {**labels, ds.SLICE_LABEL: "0"}.items()
        if topology == "pd":
            # smg reads the bootstrap port from prefill's annotation; prefill listens on it.
            _, _, _, annotations = _leader(rendered, "-prefill")
            assert annotations[cmd.BOOTSTRAP_PORT_ANNOTATION] == str(dep.section("pd").bootstrap_port)
        return
    assert not args.service_discovery
    if topology == "pd":
        name, replicas, _, _ = _leader(rendered, "-prefill")
        assert args.prefill_urls == [(f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}",
                                      dep.section("pd").bootstrap_port) for i in range(replicas)]
        name, _, _, _ = _leader(rendered, "-decode")
        replicas = k8s_config.of(dep).role(("pd", "decode")).replicas
        assert args.decode_urls == [f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}"
                                    for i in range(replicas)]
    else:
        name, replicas, _, _ = _leader(rendered, "-replica")
        assert args.worker_urls == [f"http://{name}-{i}.{name}.{rendered.namespace}.svc:{port}"
                                    for i in range(replicas)]


def test_a_pd_server_spread_over_nodes_has_every_rank_addressed(tmp_path, server_parser):
    _, _, rendered = _both(tmp_path, "custom", "pd")
    ranks = []
    for workload, template, env, labels in _pods(rendered):
        if workload.endswith("-decode"):
            ranks.append(server_parser.parse_args(program_args(_argv(template, env, labels),
                                                               SERVER_MODULE)).node_rank)
    assert ranks == [0, 1]


def test_mooncake_gets_the_ib_devices_and_the_parser_takes_them(tmp_path, server_parser):
    _, _, rendered = _both(tmp_path, "dns", "pd")
    for workload, template, env, labels in _pods(rendered):
        server = program_args(_argv(template, env, labels), SERVER_MODULE)
        if server is not None:
            ns = server_parser.parse_args(server)
            assert ns.disaggregation_transfer_backend == "mooncake" and ns.disaggregation_ib_device == "mlx5_2"
