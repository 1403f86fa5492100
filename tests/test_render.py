"""Rendered env + compose files, as compose itself resolves them (`docker compose config`)."""

from __future__ import annotations

import pytest
import yaml

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.render.compose import program_args
from bundle.stack.docker import stack_of
from bundle.topology import ROUTER_MODULE, SERVER_MODULE
from tests.conftest import render_for as render
from tests.conftest import missing, write_config

NON_DEFAULT = """
project: lab
model:
  path: /srv/models/dsv4
  served_name: dsv4-flash
network:
  host_address: 127.0.0.2
  front_port: 31111
  worker_port: 31000
levers:
  speculative: mtp
  kv_cache_dtype: fp8_e4m3
  moe_runner: triton
  sparse_mla: bundle
  cuda_graphs: false
  pcie_safe_collectives: false
tp4:
  gpus: [4, 5, 6, 7]
  extra_args: ['--mem-fraction-static', '0.82', '--cuda-graph-config', '{"decode": {"max_bs": 64}}']
  env: {NCCL_DEBUG: INFO, SGLANG_ENABLE_JIT_DEEPGEMM: false}
pd:
  bootstrap_port: 9100
  share_gpus: false
  prefill: {gpus: [0, 1], tp_size: 2, extra_args: ['--chunked-prefill-size', '8192']}
  decode: {gpus: [2, 3, 4, 5], tp_size: 4}
  router: {policy: cache_aware, request_timeout_secs: 120, extra_args: ['--log-level', 'debug']}
health: {start_period: 45m}
"""

pytestmark = pytest.mark.usefixtures("runs_dir")


def _config(tmp_path, which):
    return load_config(write_config(tmp_path, NON_DEFAULT) if which == "custom" else None)


def _resolved(rendered):
    rendered.write()
    return stack_of(rendered).config()


@pytest.fixture(autouse=True)
def _need_compose(compose_available):
    if not compose_available:
        missing("docker compose v2 is not installed (make install adds it)")


SERVICES = {"tp4": {"server"}, "pd": {"prefill", "decode", "router"}, "dp": {"replica-0", "replica-1", "router"}}


@pytest.mark.parametrize("which", ["default", "custom"])
@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_compose_accepts_the_rendered_configuration(tmp_path, which, topology):
    dep = _config(tmp_path, which)
    resolved = _resolved(render(dep, topology))
    assert resolved["name"] == dep.project_name(topology)
    assert set(resolved["services"]) == SERVICES[topology]


@pytest.mark.parametrize("which", ["default", "custom"])
@pytest.mark.parametrize("topology", ["tp4", "pd", "dp"])
def test_fast_path_commands_equal_what_compose_resolves(tmp_path, which, topology):
    rendered = render(_config(tmp_path, which), topology)
    by_compose = {name: s["command"] for name, s in _resolved(rendered)["services"].items()}
    assert rendered.commands == by_compose


def test_pd_publishes_only_the_router_on_the_configured_address(tmp_path):
    services = _resolved(render(_config(tmp_path, "custom"), "pd"))["services"]
    published = {name: s.get("ports", []) for name, s in services.items() if s.get("ports")}
    assert list(published) == ["router"]
    (port,) = published["router"]
    assert (port["host_ip"], port["published"], port["target"]) == ("127.0.0.2", "31111", 30000)


def test_pd_workers_carry_the_disaggregation_flags_with_nixl(tmp_path):
    services = _resolved(render(_config(tmp_path, "default"), "pd"))["services"]
    for role in ("prefill", "decode"):
        args = program_args(services[role]["command"], SERVER_MODULE)
        joined = " ".join(args)
        assert f"--disaggregation-mode {role}" in joined
        assert "--disaggregation-transfer-backend nixl" in joined
        assert "--disaggregation-bootstrap-port 8998" in joined
    router = program_args(services["router"]["command"], ROUTER_MODULE)
    assert router[:5] == ["--pd-disaggregation", "--prefill", "http://prefill:30000", "8998", "--decode"]
    for flag in ("--health-check-interval-secs", "--health-failure-threshold", "--request-timeout-secs",
                 "--retry-max-retries", "--worker-startup-timeout-secs", "--cb-failure-threshold"):
        assert flag in router


def test_share_gpus_gives_both_workers_every_gpu_and_a_base_id(tmp_path):
    services = _resolved(render(_config(tmp_path, "default"), "pd"))["services"]
    for role, base in (("prefill", "0"), ("decode", "4")):
        devices = services[role]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["device_ids"] == ["0,1,2,3,4,5,6,7"]
        args = program_args(services[role]["command"], SERVER_MODULE)
        assert args[args.index("--base-gpu-id") + 1] == base
    assert services["prefill"]["ipc"] == "host"


def test_isolated_gpus_when_share_gpus_is_off(tmp_path):
    services = _resolved(render(_config(tmp_path, "custom"), "pd"))["services"]
    assert services["prefill"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["0,1"]
    assert services["decode"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["2,3,4,5"]


def test_levers_and_extra_args_reach_the_server_intact(tmp_path):
    resolved = _resolved(render(_config(tmp_path, "custom"), "tp4"))
    server = resolved["services"]["server"]
    args = program_args(server["command"], SERVER_MODULE)
    assert args[args.index("--cuda-graph-config") + 1] == '{"decode": {"max_bs": 64}}'
    assert args[args.index("--speculative-algorithm") + 1] == "EAGLE"
    assert args[args.index("--cuda-graph-backend-decode") + 1] == "disabled"
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert "--disable-custom-all-reduce" not in args
    env = server["environment"]
    assert env["SGLANG_SM120_FLASHMLA_BACKEND"] == "triton" and env["BUNDLE_SPARSE_MLA_OVERLAY"] == "1"
    assert env["NCCL_DEBUG"] == "INFO" and env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert server["healthcheck"]["start_period"] == "45m0s"
    volumes = {v["target"]: v for v in server["volumes"]}
    assert volumes["/model"]["read_only"] is True and volumes["/model"]["source"] == "/srv/models/dsv4"
    assert volumes["/var/cache/sglang"]["source"] == "jit-cache"
    assert resolved["volumes"]["jit-cache"]["name"].startswith("lab-jit-")


def test_api_key_travels_as_a_secret_never_on_a_command_line(tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-topsecret-123\n")
    dep = load_config(write_config(tmp_path, "api_key_file: key\n"))
    rendered = render(dep, "pd")
    resolved = _resolved(rendered)
    assert resolved["secrets"]["api_key"]["file"] == str(key)
    assert "sk-topsecret-123" not in rendered.env_file.read_text()
    assert "sk-topsecret-123" not in yaml.safe_dump(resolved)


def test_render_cli_prints_compose_yaml(tmp_path, capsys):
    path = write_config(tmp_path, NON_DEFAULT)
    assert main(["render", "pd", "-c", str(path)]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["name"] == "lab-pd"
    assert resolved["services"]["router"]["depends_on"]["prefill"]["condition"] == "service_healthy"


def test_dp_runs_one_server_per_replica_on_its_own_gpus_behind_the_router(tmp_path):
    services = _resolved(render(_config(tmp_path, "default"), "dp"))["services"]
    published = [name for name, s in services.items() if s.get("ports")]
    assert published == ["router"]
    for name, gpus in (("replica-0", "0,1,2,3"), ("replica-1", "4,5,6,7")):
        assert services[name]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [gpus]
        args = program_args(services[name]["command"], SERVER_MODULE)
        assert args[args.index("--base-gpu-id") + 1] == "0" and args[args.index("--tp-size") + 1] == "4"
    router = program_args(services["router"]["command"], ROUTER_MODULE)
    urls = router[router.index("--worker-urls") + 1:router.index("--worker-urls") + 3]
    assert urls == ["http://replica-0:30000", "http://replica-1:30000"]
    assert router[router.index("--policy") + 1] == "cache_aware"


def test_dp_with_four_tp2_replicas_turns_on_the_optional_services_by_profile(tmp_path):
    dep = load_config(write_config(tmp_path, "dp:\n  replicas: 4\n  tp_size: 2\n"))
    rendered = render(dep, "dp")
    assert rendered.profiles == ("dp-3", "dp-4") and rendered.env["COMPOSE_PROFILES"] == "dp-3,dp-4"
    services = _resolved(rendered)["services"]
    assert set(services) == {"replica-0", "replica-1", "replica-2", "replica-3", "router"}
    assert services["replica-3"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["6,7"]
    assert rendered.env["DP_WORKER_URLS"].split() == [f"http://replica-{i}:30000" for i in range(4)]


def test_a_budget_too_small_for_its_attempts_is_refused(tmp_path):
    from tests.conftest import checked

    dep = load_config(write_config(tmp_path, "pd:\n  router:\n    request_timeout_secs: 2\n"
                                             "    retry_max_retries: 3\n"))
    (problem,) = checked(dep, "pd").errors
    assert "pd.router.request_timeout_secs: 2 s cannot hold 3 attempts" in problem
