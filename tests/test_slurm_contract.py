"""Contract: every command line of the sbatch script, as bash expands it on the allocation's nodes
(arrays, quoting, node names and each task's SLURM_PROCID), parses under the pinned SGLang's and
smg's own parsers (and their snapshots), and carries exactly the flags compose gives the same server
for the same config: only --base-gpu-id, --host/--port and what multi-node adds may differ; the
router differs only in how it names its workers (the allocation's nodes) and its port."""

from __future__ import annotations

import pytest

from bundle.config.loader import load_config
from bundle.targets.slurm import script as slurm
from bundle.targets.slurm import config as slurm_config
from bundle.render.compose import program_args
from bundle.rules import argspec
from bundle.topology import ROUTER_MODULE, SERVER_MODULE
from tests.conftest import render_for, require_module, write_config
from tests.slurm_stubs import run_script
from tests.test_render import NON_DEFAULT

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]

NODES = ["gpu-a17", "gpu-a18", "gpu-b01", "gpu-b02", "gpu-c09"]
# Non-default on every axis the Slurm render adds: decode over two nodes, RDMA devices, an API key,
# a partition, an account, a sqsh image.
SLURM_CUSTOM = NON_DEFAULT + """
api_key_file: ./api-key
slurm:
  partition: gpu-long
  account: inference
  container_image: /lustre/images/sglang-bundle.sqsh
  ucx_net_devices: [mlx5_0:1, mlx5_1:1]
  router_port: 8080
  pd:
    decode: {nodes: 2}
  dp: {nodes: 1}
"""
CONFIGS = {"default": None, "custom": SLURM_CUSTOM}
POD_SERVER_DESTS = {"base_gpu_id", "host", "port", "nnodes", "node_rank", "dist_init_addr"}
ROUTER_WORKER_DESTS = {"worker_urls", "prefill", "decode", "port"}


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
    if text:
        (tmp_path / "api-key").write_text("sk-never-on-a-command-line\n")
    dep = load_config(write_config(tmp_path, text) if text else None)
    compose = render_for(dep, topology)
    return dep, compose, slurm.render(dep, compose)


def _differing(a, b, allowed):
    va, vb = vars(a), vars(b)
    return {k: (va.get(k), vb.get(k)) for k in set(va) | set(vb) if k not in allowed and va.get(k) != vb.get(k)}


def _executed(tmp_path, job):
    [path] = job.write(tmp_path / "out")
    runs, sruns, done = run_script(path, tmp_path, NODES[:job.total_nodes])
    assert done.returncode == 0, done.stderr
    return runs, sruns, done


@pytest.mark.parametrize("which", list(CONFIGS))
@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_every_step_parses_and_matches_compose(tmp_path, which, topology, server_parser, router_parser):
    from smg.router_args import RouterArgs

    dep, compose, job = _both(tmp_path, which, topology)
    runs, _, _ = _executed(tmp_path, job)
    placement = job.placement(NODES[:job.total_nodes])
    seen = {}
    port = dep.network.worker_port
    for run in runs:
        argv = run.argv
        assert argv[:1] == ["-m"], argv  # bundle-entrypoint execs `python3 -m ...`
        server = program_args(["python3", *argv], SERVER_MODULE)
        if server is not None:
            assert argspec.check_arguments(argspec.SERVER_SPEC, server) is None
            ns = server_parser.parse_args(server)
            service = next(s.name for s in job.steps if s.role != "router" and run.node in placement[s.name])
            theirs = server_parser.parse_args(compose.server_args(service))
            assert _differing(ns, theirs, POD_SERVER_DESTS) == {}, f"{service} differs from compose's"
            assert ns.base_gpu_id == 0 and ns.port == port and ns.host == "0.0.0.0"
            nodes = placement[service]
            if len(nodes) > 1:
                assert (ns.nnodes, ns.node_rank) == (len(nodes), nodes.index(run.node)) == (len(nodes), run.rank)
                assert ns.dist_init_addr == f"{nodes[0]}:{slurm_config.of(dep).dist_init_port}"
            else:
                assert ns.nnodes == 1 and ns.dist_init_addr is None and ns.node_rank == 0
            seen.setdefault(service, []).append(run.node)
            continue
        router = program_args(["python3", *argv], ROUTER_MODULE)
        assert router is not None, f"{argv} runs neither {SERVER_MODULE} nor {ROUTER_MODULE}"
        assert argspec.check_arguments(argspec.ROUTER_SPEC, router) is None
        ns = router_parser.parse_args(router)
        assert _differing(ns, router_parser.parse_args(compose.router_args()), ROUTER_WORKER_DESTS) == {}
        assert ns.port == slurm_config.of(dep).router_port != port
        args = RouterArgs.from_cli_args(ns, use_router_prefix=False)  # what smg's core gets
        if topology == "pd":
            assert args.prefill_urls == [(f"http://{placement['prefill'][0]}:{port}", dep.section("pd").bootstrap_port)]
            assert args.decode_urls == [f"http://{placement['decode'][0]}:{port}"]
        else:
            assert args.worker_urls == [f"http://{placement[s.name][0]}:{port}" for s in job.steps
                                        if s.role != "router"]
        seen.setdefault("router", []).append(run.node)
    expected = {step.name: placement[step.name] for step in job.steps}
    assert {k: sorted(v) for k, v in seen.items()} == {k: sorted(v) for k, v in expected.items()}
    if job.topology.has_router:
        assert seen["router"] == [NODES[0]]  # the router on the first node


def test_pd_puts_prefill_and_decode_on_their_own_nodes_and_moves_kv_with_nixl(tmp_path, server_parser):
    dep, _, job = _both(tmp_path, "custom", "pd")
    runs, sruns, _ = _executed(tmp_path, job)
    assert job.total_nodes == 3
    by_node = {}
    for run in runs:
        server = program_args(["python3", *run.argv], SERVER_MODULE)
        if server is not None:
            by_node[run.node] = server_parser.parse_args(server).disaggregation_mode
            # RDMA devices given: UCX uses them (no TCP), NCCL too for decode's two nodes.
            assert run.env["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:1" and "tcp" not in run.env["UCX_TLS"]
    assert by_node == {NODES[0]: "prefill", NODES[1]: "decode", NODES[2]: "decode"}
    # Per-node logs, one srun per role, GPUs from gres, the router beside prefill without GPUs.
    outputs = sorted(o for opts in sruns for o in opts if o.startswith("--output="))
    assert outputs == [f"--output={tmp_path}/logs/4242/%N-{r}.out" for r in ("decode", "prefill", "router")]
    gres = sorted(o for opts in sruns for o in opts if o.startswith("--gres="))
    assert gres == ["--gres=gpu:2", "--gres=gpu:2", "--gres=none"]
    assert not job.warnings


def test_the_api_key_is_a_mounted_file_never_a_word_of_the_script(tmp_path):
    dep, _, job = _both(tmp_path, "custom", "pd")
    assert "sk-never-on-a-command-line" not in job.script
    assert f"{dep.api_key_file}:/run/secrets/api_key:ro" in job.container_line
    assert "--container-image=/lustre/images/sglang-bundle.sqsh" in job.container_line


def test_without_rdma_tcp_is_named_as_the_slow_fallback(tmp_path):
    _, _, job = _both(tmp_path, "default", "pd")
    assert any("over TCP" in w and "slurm.ucx_net_devices" in w for w in job.warnings)
    # The lock's image, the registry separated as enroot spells it.
    assert "--container-image=ghcr.io#sglang-bundle/sglang-sm120:lock-" in job.container_line
