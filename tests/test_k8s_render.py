"""`bundle render --target k8s`: the topologies as LeaderWorkerSet (pd: one DisaggregatedSet) + smg
manifests, checked offline by kubernetes-validate (built-in kinds, strict) and LWS's own CRDs."""

from __future__ import annotations

import copy

import pytest
import yaml

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.lock import load_lock
from bundle.render.compose import render
from bundle.errors import ConfigError
from bundle.targets.k8s import config as k8s_config
from bundle.targets.k8s import manifests as k8s
from bundle.targets.k8s.manifests import GENERATED
from bundle.targets.k8s import rules as k8s_rules
from bundle.targets.k8s import validation as manifests
from bundle import topology as registry
from tests.conftest import render_for, write_config
from tests.test_front_door_exposure import WARNING
from tests.test_render import NON_DEFAULT
from tests.test_topology_registry import duo  # noqa: F401  (the fixture: a fourth topology, registered)

pytestmark = pytest.mark.usefixtures("runs_dir")

# Non-default on every axis the Kubernetes render adds: xPyD (2 prefill x 3 decode), servers over
# two nodes, RDMA, the model and the JIT cache on claims, an API key Secret, a LoadBalancer.
K8S_CUSTOM = NON_DEFAULT + """
kubernetes:
  namespace: inference
  image_pull_policy: Always
  image_pull_secret: registry-creds
  node_selector: {nvidia.com/gpu.product: NVIDIA-RTX-PRO-6000-Blackwell}
  front_service_type: LoadBalancer
  router_replicas: 2
  api_key_secret: lab-api-key
  shm_size: 32Gi
  host_ipc: true
  dist_init_port: 21000
  model_storage: {type: pvc, claim_name: dsv4-weights}
  jit_cache: {type: pvc, storage_class: cephfs, size: 80Gi}
  rdma: {resource: rdma/hca_shared_devices_a, count: 2, devices: [mlx5_0:1, mlx5_1:1]}
  tp4: {nodes: 2}
  pd:
    prefill: {replicas: 2}
    decode: {replicas: 3, nodes: 2}
    slices: 2
    placement: {topology_key: topology.kubernetes.io/zone, exclusive: topology}
    rollout: {max_surge: 25%, max_unavailable: 0}
  dp: {replicas: 6, nodes: 2}
"""
# Fixed worker URLs instead of discovery, and mooncake, which takes --disaggregation-ib-device.
K8S_DNS = """
project: lab
pd:
  transfer_backend: mooncake
kubernetes:
  discovery: dns
  jit_cache: {type: emptyDir}
  rdma: {devices: [mlx5_2:1]}
  pd:
    decode: {replicas: 2}
"""
# pd as two LeaderWorkerSets and an smg Deployment, for an LWS older than v0.9.0.
K8S_LWS = """
kubernetes:
  pd:
    form: LeaderWorkerSets
    prefill: {replicas: 2}
"""
CONFIGS = {"default": None, "custom": K8S_CUSTOM, "dns": K8S_DNS, "lws": K8S_LWS}
# (config, topology): the form keys change only disaggregated topologies.
CASES = [(which, name) for which in CONFIGS for name in registry.NAMES
         if which != "lws" or registry.get(name).disaggregated]


def config(tmp_path, which):
    text = CONFIGS[which]
    return load_config(write_config(tmp_path, text) if text else None)


def k8s_for(dep, topology):
    return k8s.render(dep, render_for(dep, topology))


def by_kind(rendered, kind):
    return [o for o in rendered.objects if o["kind"] == kind]


def lws_named(rendered, suffix):
    """The LeaderWorkerSet named ...<suffix>, or the DisaggregatedSet's role of that name: either
    holds spec.replicas and spec.leaderWorkerTemplate."""
    found = [o for o in by_kind(rendered, "LeaderWorkerSet") if o["metadata"]["name"].endswith(suffix)]
    found += [r for s in by_kind(rendered, "DisaggregatedSet") for r in s["spec"]["roles"]
              if r["name"] == suffix.removeprefix("-")]
    (group,) = found
    return group


def container(template):
    (c,) = template["spec"]["containers"]
    return c


@pytest.mark.parametrize("which, topology", CASES)
def test_cli_writes_manifests_that_pass_both_schema_checks(tmp_path, which, topology, capsys):
    args = ["render", "--target", "k8s", topology, "-o", str(tmp_path / "out")]
    if CONFIGS[which]:
        args += ["-c", str(write_config(tmp_path, CONFIGS[which]))]
    assert main(args) == 0
    files = sorted((tmp_path / "out").glob("*.yaml"))
    assert [str(f) for f in files] == capsys.readouterr().out.split()
    objects = []
    for path in files:
        first, _, body = path.read_text().partition("\n")
        assert first.startswith(GENERATED) and "do not edit" in first
        objects.append(yaml.safe_load(body))
    # What was written, read back, passes the checks the render ran before writing.
    assert manifests.problems(objects, [f.name for f in files]) == []
    kinds = [o["kind"] for o in objects]
    one_set = topology == "pd" and which != "lws"
    assert kinds.count("DisaggregatedSet") == one_set
    assert kinds.count("LeaderWorkerSet") == (0 if one_set else {"tp4": 1, "pd": 2, "dp": 1}[topology])
    # A budget per server role and one for the router (a Deployment, or the set's router role).
    assert kinds.count("PodDisruptionBudget") == {"tp4": 1, "pd": 3, "dp": 2}[topology]
    assert ("Deployment" in kinds) is (topology != "tp4" and not one_set)


def test_a_misspelled_leaderworkerset_field_is_refused(tmp_path):
    rendered = k8s_for(config(tmp_path, "lws"), "pd")
    lws = copy.deepcopy(lws_named(rendered, "-decode"))
    assert manifests.lws_problems(lws) == []
    template = lws["spec"]["leaderWorkerTemplate"]
    template["restartPolice"] = template.pop("restartPolicy")
    (problem,) = manifests.lws_problems(lws)
    assert problem.startswith("spec.leaderWorkerTemplate: ") and "'restartPolice' was unexpected" in problem


@pytest.mark.parametrize("plant, where", [
    (lambda lws: lws["spec"]["leaderWorkerTemplate"].update(size=0), "spec.leaderWorkerTemplate.size"),
    (lambda lws: lws["spec"]["leaderWorkerTemplate"].update(restartPolicy="RecreateGroup"),
     "spec.leaderWorkerTemplate.restartPolicy"),
    (lambda lws: lws["spec"].update(startupPolicy="WhenReady"), "spec.startupPolicy"),
    (lambda lws: lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].update(maxSurge="lots"),
     "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"),
    # Inside the pod templates kubernetes-validate holds them to core/v1, strictly.
    (lambda lws: container(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]).update(imagePullPolicyy="x"),
     "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"),
    (lambda lws: lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(hostIPC="yes"),
     "spec.leaderWorkerTemplate.workerTemplate.spec.hostIPC"),
])
def test_planted_leaderworkerset_mistakes_are_refused_where_they_are(plant, where):
    lws = copy.deepcopy(lws_named(k8s_for(load_config(None), "tp4"), "-server"))
    plant(lws)
    problems = manifests.lws_problems(lws)
    assert problems and problems[0].startswith(where + ": "), problems


def test_a_misspelled_field_of_a_built_in_kind_is_refused_with_its_file_and_path():
    rendered = k8s_for(load_config(None), "dp")
    objects = copy.deepcopy(list(rendered.objects))
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    names = rendered.file_names()
    (problem,) = manifests.problems(objects, names)
    assert problem.startswith(f"{names[objects.index(deployment)]}: spec.template.spec.containers[0]: ")
    assert "'livenesProbe' was unexpected" in problem


@pytest.mark.parametrize("which, topology", CASES)
def test_the_front_service_is_the_only_one_and_leads_to_the_router_or_the_servers_leaders(
        tmp_path, which, topology):
    dep = config(tmp_path, which)
    rendered = k8s_for(dep, topology)
    (service,) = by_kind(rendered, "Service")
    assert service["metadata"]["name"] == dep.project_name(topology)
    assert service["spec"]["type"] == k8s_config.of(dep).front_service_type
    (port,) = service["spec"]["ports"]
    assert port["port"] == dep.network.front_port
    if topology == "tp4":
        assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": f"{dep.project}-tp4-server",
                                               "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    else:
        if by_kind(rendered, "Deployment"):
            (router,) = by_kind(rendered, "Deployment")
            template = router["spec"]["template"]
        else:  # the router role of the DisaggregatedSet: every revision's and slice's routers
            router = lws_named(rendered, "-router")
            template = router["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        labels = template["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items() and labels["io.sglang-bundle.role"] == "router"
        assert router["spec"]["replicas"] == k8s_config.of(dep).router_replicas


def test_replicas_and_nodes_per_role_shape_the_leaderworkersets(tmp_path):
    dep = config(tmp_path, "custom")
    pd = k8s_for(dep, "pd")
    for suffix, replicas, nodes, gpus in (("-prefill", 2, 1, 2), ("-decode", 3, 2, 2)):
        lws = lws_named(pd, suffix)
        template = lws["spec"]["leaderWorkerTemplate"]
        assert (lws["spec"]["replicas"], template["size"]) == (replicas, nodes)
        assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
        for key in ("leaderTemplate", "workerTemplate"):
            limits = container(template[key])["resources"]["limits"]
            assert limits == {"nvidia.com/gpu": gpus, "rdma/hca_shared_devices_a": 2}
            assert container(template[key])["resources"]["requests"] == limits
    decode = container(lws_named(pd, "-decode")["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["args"]
    tail = decode[decode.index("--nnodes"):decode.index("--nnodes") + 6]
    assert tail == ["--nnodes", "2", "--node-rank", "$(LWS_WORKER_INDEX)",
                    "--dist-init-addr", "$(LWS_LEADER_ADDRESS):21000"]
    prefill = container(lws_named(pd, "-prefill")["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["args"]
    assert "--nnodes" not in prefill  # one node per copy: no rendezvous
    dp = lws_named(k8s_for(dep, "dp"), "-replica")
    assert (dp["spec"]["replicas"], dp["spec"]["leaderWorkerTemplate"]["size"]) == (6, 2)
    assert lws_named(k8s_for(load_config(None), "dp"), "-replica")["spec"]["replicas"] == 2  # = dp.replicas


def test_pod_settings_gpus_shm_memlock_volumes_probes(tmp_path):
    dep = config(tmp_path, "default")
    lws = lws_named(k8s_for(dep, "tp4"), "-server")
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    c, spec = container(leader), leader["spec"]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert mounts["/dev/shm"]["name"] == "dshm"
    assert mounts["/model"]["readOnly"] is True
    assert volumes["model"]["hostPath"] == {"path": "/models/DeepSeek-V4-Flash", "type": "Directory"}
    lock_hash = leader["metadata"]["labels"]["io.sglang-bundle.lock-hash"]
    assert volumes["jit-cache"]["hostPath"]["path"] == f"/var/cache/sglang-bundle/sglang-bundle-jit-{lock_hash}"
    assert mounts["/var/cache/sglang"]["name"] == "jit-cache"
    # compose: /health every 15 s, 25 s timeout, 4 retries, 30 min to start.
    assert c["readinessProbe"] == {"httpGet": {"path": "/health", "port": 30000}, "periodSeconds": 15,
                                   "timeoutSeconds": 25, "failureThreshold": 4}
    startup = c["startupProbe"]
    assert startup["httpGet"]["path"] == "/health"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30 * 60
    assert "livenessProbe" not in c
    worker = container(lws["spec"]["leaderWorkerTemplate"]["workerTemplate"])
    assert "readinessProbe" not in worker and "startupProbe" not in worker  # no HTTP past the leader
    assert spec["terminationGracePeriodSeconds"] == 90 and "hostIPC" not in spec


def test_custom_storage_cache_and_start_period(tmp_path):
    dep = config(tmp_path, "custom")
    rendered = k8s_for(dep, "tp4")
    (claim,) = by_kind(rendered, "PersistentVolumeClaim")
    assert claim["metadata"]["name"].startswith("lab-jit-")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "80Gi"}},
                             "storageClassName": "cephfs"}
    leader = lws_named(rendered, "-server")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    volumes = {v["name"]: v for v in leader["spec"]["volumes"]}
    assert volumes["model"]["persistentVolumeClaim"] == {"claimName": "dsv4-weights", "readOnly": True}
    assert volumes["jit-cache"]["persistentVolumeClaim"] == {"claimName": claim["metadata"]["name"]}
    startup = container(leader)["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 45 * 60  # health.start_period: 45m
    assert leader["spec"]["hostIPC"] is True
    assert leader["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-RTX-PRO-6000-Blackwell"}
    assert leader["spec"]["imagePullSecrets"] == [{"name": "registry-creds"}]


def test_api_key_is_a_secret_reference_on_the_front_door_only(tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-topsecret-123\n")
    dep = load_config(write_config(tmp_path, "api_key_file: key\n"))
    assert k8s_config.of(dep).api_key_secret == "sglang-bundle-api-key"
    for topology in registry.NAMES:
        rendered = k8s_for(dep, topology)
        text = yaml.safe_dump(list(rendered.objects))
        assert "sk-topsecret-123" not in text and "--api-key" not in text
        groups = by_kind(rendered, "LeaderWorkerSet") + [r for s in by_kind(rendered, "DisaggregatedSet")
                                                         for r in s["spec"]["roles"]]
        templates = [t for o in groups for t in o["spec"]["leaderWorkerTemplate"].values() if isinstance(t, dict)]
        templates += [o["spec"]["template"] for o in by_kind(rendered, "Deployment")]
        with_key = []
        for template in templates:
            volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
            if "api-key" in volumes:
                assert volumes["api-key"]["secret"]["secretName"] == "sglang-bundle-api-key"
                mount = next(m for m in container(template)["volumeMounts"] if m["name"] == "api-key")
                assert (mount["mountPath"], mount["readOnly"]) == ("/run/secrets/api_key", True)
                with_key.append(template["metadata"]["labels"]["io.sglang-bundle.role"])
        # compose hands the key to the front door only: the server in tp4, the router otherwise.
        assert set(with_key) == ({"server"} if topology == "tp4" else {"router"})
    no_key = k8s_for(load_config(None), "pd")
    assert "api-key" not in yaml.safe_dump(list(no_key.objects))


def test_labels_match_the_run_records_and_compose(tmp_path):
    dep = config(tmp_path, "custom")
    compose = render_for(dep, "pd")
    rendered = k8s.render(dep, compose)
    for obj in rendered.objects:
        labels = obj["metadata"]["labels"]
        assert labels["io.sglang-bundle.topology"] == compose.env["BUNDLE_TOPOLOGY"] == "pd"
        assert labels["io.sglang-bundle.lock-hash"] == compose.env["BUNDLE_LOCK_HASH"]
        assert labels["io.sglang-bundle.project"] == compose.project == "lab-pd"
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "inference"
    (ds,) = by_kind(rendered, "DisaggregatedSet")
    assert ds["metadata"]["name"] == "lab-pd"
    roles = {r["name"]: r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
             ["io.sglang-bundle.role"] for r in ds["spec"]["roles"]}
    assert roles == {"prefill": "prefill", "decode": "decode", "router": "router"}
    # Each budget holds a role's pods of every revision and slice, by the controller's labels.
    budgets = {b["metadata"]["name"]: b["spec"] for b in by_kind(rendered, "PodDisruptionBudget")}
    assert budgets["lab-pd-decode"] == {"maxUnavailable": 1, "selector": {"matchLabels": {
        "disaggregatedset.x-k8s.io/name": "lab-pd", "disaggregatedset.x-k8s.io/role": "decode"}}}
    assert set(budgets) == {"lab-pd-prefill", "lab-pd-decode", "lab-pd-router"}
    lws = k8s_for(config(tmp_path, "lws"), "pd")
    budgets = {b["metadata"]["name"]: b["spec"] for b in by_kind(lws, "PodDisruptionBudget")}
    assert budgets["sglang-bundle-pd-decode"]["selector"] == {
        "matchLabels": {"leaderworkerset.sigs.k8s.io/name": "sglang-bundle-pd-decode"}}


def test_kv_transfer_over_rdma_devices_or_tcp_named_as_slower(tmp_path):
    pushed = K8S_CUSTOM + "image: {ref: registry.lab/sglang@sha256:00}\n"
    custom = k8s_for(load_config(write_config(tmp_path, pushed)), "pd")
    assert custom.warnings == ()
    for suffix in ("-prefill", "-decode"):
        env = {e["name"]: e["value"] for e in container(
            lws_named(custom, suffix)["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["env"]}
        assert env["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:1"
        assert env["UCX_TLS"].startswith("rc,") and "tcp" not in env["UCX_TLS"]
        assert env["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] == "120"  # compose's environment, kept
        args = container(lws_named(custom, suffix)["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["args"]
        assert "--disaggregation-ib-device" not in args  # NIXL ignores it (sglang #28737): UCX_NET_DEVICES
    default = k8s_for(load_config(None), "pd")
    image, warning = default.warnings
    assert "over TCP" in warning and "slower than RDMA" in warning
    assert "image.ref is not set" in image and "push it to a registry" in image
    env = {e["name"]: e["value"] for e in container(
        lws_named(default, "-decode")["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["env"]}
    assert env["UCX_TLS"].startswith("tcp,") and "UCX_NET_DEVICES" not in env
    resource_only = k8s_for(load_config(write_config(tmp_path, "kubernetes: {rdma: {resource: rdma/ib}}\n")), "pd")
    env = {e["name"]: e["value"] for e in container(
        lws_named(resource_only, "-decode")["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["env"]}
    assert env["UCX_TLS"].startswith("rc,") and "tcp" in env["UCX_TLS"]
    assert not any("TCP" in w for w in resource_only.warnings)
    mooncake = k8s_for(config(tmp_path, "dns"), "pd")
    args = container(lws_named(mooncake, "-prefill")["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["args"]
    assert args[args.index("--disaggregation-ib-device") + 1] == "mlx5_2"


def test_prefill_pods_carry_the_bootstrap_port_smg_reads(tmp_path):
    dep = config(tmp_path, "custom")
    leader = lws_named(k8s_for(dep, "pd"), "-prefill")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert leader["metadata"]["annotations"] == {"sglang.ai/bootstrap-port": "9100"}
    assert {"name": "bootstrap", "containerPort": 9100} in container(leader)["ports"]


def test_selector_discovery_gets_a_role_that_may_only_read_pods(tmp_path):
    rendered = k8s_for(load_config(None), "dp")
    (role,) = by_kind(rendered, "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    (binding,) = by_kind(rendered, "RoleBinding")
    (account,) = by_kind(rendered, "ServiceAccount")
    (router,) = by_kind(rendered, "Deployment")
    assert router["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    assert by_kind(k8s_for(config(tmp_path, "dns"), "dp"), "Role") == []  # fixed URLs need no API access


@pytest.mark.parametrize("text, where, needle", [
    ("kubernetes: {pd: {decode: {nodes: 3}}}\n", "kubernetes.pd.decode.nodes", "does not divide over 3 nodes"),
    ("project: my_lab\n", "project", "lower-case letters, digits and '-'"),
    ("project: a-very-long-project-name-for-a-cluster-x\n", "project", "shorten project"),
    ("kubernetes: {model_storage: {type: pvc}}\n", "kubernetes.model_storage.claim_name", "no claim is named"),
    ("kubernetes: {pd: {decode: {nodes: 2}}}\npd: {decode: {extra_args: ['--nnodes', '2']}}\n",
     "pd.decode.extra_args[0]", "--nnodes is set by the Kubernetes render"),
])
def test_rules_that_span_keys_name_the_file_line_and_key(tmp_path, text, where, needle):
    path = write_config(tmp_path, text)
    dep = load_config(path)
    found = k8s_rules.check(dep, registry.get("pd"))
    (problem,) = found.errors
    assert problem.startswith(f"{path}:") and f": {where}: " in problem and needle in problem


def test_cli_refuses_a_bad_kubernetes_value_before_writing_anything(tmp_path, capsys):
    path = write_config(tmp_path, "kubernetes:\n  pd:\n    decode: {nodes: 3}\n")
    assert main(["render", "--target", "k8s", "pd", "-c", str(path), "-o", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert f"{path}:3: kubernetes.pd.decode.nodes" in err
    assert not (tmp_path / "out").exists()


def test_schema_refuses_an_unknown_kubernetes_key_with_did_you_mean(tmp_path):
    path = write_config(tmp_path, "kubernetes:\n  namespce: x\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert "kubernetes.namespce: unknown key; did you mean 'namespace'?" in str(exc.value)


def test_cli_needs_an_output_folder(capsys):
    assert main(["render", "--target", "k8s", "tp4"]) == 2
    assert "-o DIR" in capsys.readouterr().err


def test_a_new_render_replaces_its_own_files_and_leaves_others(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "kustomization.yaml").write_text("resources: []\n")
    assert main(["render", "--target", "k8s", "pd", "-o", str(out)]) == 0
    assert any(p.name.startswith("0") and "prefill" in p.name for p in out.glob("*.yaml"))
    assert main(["render", "--target", "k8s", "tp4", "-o", str(out)]) == 0
    names = sorted(p.name for p in out.glob("*.yaml"))
    assert "kustomization.yaml" in names and not any("prefill" in n for n in names)


def test_tensor_parallel_over_nodes_uses_the_rdma_devices_or_says_it_is_on_tcp(tmp_path):
    custom = k8s_for(config(tmp_path, "custom"), "dp")
    env = {e["name"]: e["value"] for e in container(
        lws_named(custom, "-replica")["spec"]["leaderWorkerTemplate"]["workerTemplate"])["env"]}
    assert env["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1"
    plain = k8s_for(load_config(write_config(tmp_path, "kubernetes: {dp: {nodes: 2}}\n")), "dp")
    (warning,) = [w for w in plain.warnings if "image.ref" not in w]
    assert "kubernetes.dp spreads tensor parallelism over 2 nodes" in warning and "TCP sockets" in warning
    # One node per copy: nothing crosses nodes.
    assert not any("TCP" in w for w in k8s_for(load_config(None), "dp").warnings)


def test_the_kubernetes_section_changes_nothing_compose_runs(tmp_path):
    plain = render_for(load_config(write_config(tmp_path, NON_DEFAULT, "plain.yaml")), "pd")
    with_k8s = render_for(load_config(write_config(tmp_path, K8S_CUSTOM, "k8s.yaml")), "pd")
    assert with_k8s.commands == plain.commands
    assert with_k8s.env == plain.env and with_k8s.role_env == plain.role_env


def test_cli_refuses_the_rehearsal_overlay_for_kubernetes(tmp_path, capsys):
    assert main(["render", "--target", "k8s", "pd", "--rehearsal", "-o", str(tmp_path)]) == 2
    assert "--rehearsal is a compose overlay" in capsys.readouterr().err


def test_cli_kubectl_dry_run_says_why_it_skipped_without_a_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    assert main(["render", "--target", "k8s", "tp4", "-o", str(tmp_path / "out"), "--kubectl-dry-run"]) == 0
    # No kubeconfig: kubectl (if there is one) talks to localhost:8080, where nothing answers.
    assert "kubectl: skipped: " in capsys.readouterr().err


# The front door's exposure on Kubernetes (tests/test_front_door_exposure.py holds compose's).
def test_a_kubernetes_front_service_outside_the_cluster_without_a_key_warns(tmp_path, capsys):
    config = write_config(tmp_path, "kubernetes:\n  front_service_type: LoadBalancer\n")
    assert main(["render", "--target", "k8s", "pd", "-c", str(config), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if WARNING in ln)
    assert "kubernetes.front_service_type:" in line and "LoadBalancer" in line and "POST /workers" in line


def test_a_cluster_internal_front_service_is_quiet(tmp_path, capsys):
    config = write_config(tmp_path, "kubernetes:\n  front_service_type: ClusterIP\n")
    assert main(["render", "--target", "k8s", "pd", "-c", str(config), "-o", str(tmp_path / "out")]) == 0
    assert WARNING not in capsys.readouterr().err


def test_kubernetes_makes_one_set_of_the_copies(duo, tmp_path):  # noqa: F811  (the fixture)
    dep = load_config(write_config(tmp_path, "dp: {replicas: 2, tp_size: 2, gpus: [0, 1, 2, 3]}\n"))
    lock = load_lock()
    out = k8s.render(dep, render(dep, duo, image=lock.image_ref, lock_hash=lock.hash))
    (lws,) = [o for o in out.objects if o["kind"] == "LeaderWorkerSet"]
    assert lws["metadata"]["name"] == "sglang-bundle-duo-replica"  # replicated: the copies are its replicas
    assert lws["spec"]["replicas"] == 2
