"""pd on Kubernetes as one DisaggregatedSet, checked offline against LeaderWorkerSet v0.10.0's own
CRDs (committed byte for byte) and the rules its webhooks add: the render writes one set whose
prefill, decode and router roles roll out together, the LeaderWorkerSets form stays one key away,
and what the API server or a webhook would refuse is refused before anything is written, naming
the field and the LWS source the rule comes from."""

from __future__ import annotations

import copy
import hashlib

import pytest
import yaml

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.targets.k8s import manifests as k8s
from bundle.targets.k8s import crds, lws_webhook, validation as manifests
from bundle.targets.k8s import rules as k8s_rules
from bundle import topology as registry
from tests.conftest import render_for, write_config

pytestmark = pytest.mark.usefixtures("runs_dir")

ROLLOUT_RULE = "disaggregatedset_webhook.go validateRoleRolloutStrategy"


def _render(tmp_path, text=None, topology="pd"):
    dep = load_config(write_config(tmp_path, text) if text else None)
    return dep, k8s.render(dep, render_for(dep, topology))


def _the_set(rendered):
    (ds,) = [o for o in rendered.objects if o["kind"] == "DisaggregatedSet"]
    return ds


def _roles(ds):
    return {r["name"]: r for r in ds["spec"]["roles"]}


# --- the committed CRDs -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", crds.kinds())
def test_the_committed_crds_are_the_releases_own_files(kind):
    source = crds.SOURCES[kind]
    data = source.path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == source.sha256, f"{source.path} is not {source.source_path} at " \
                                                              f"LWS {crds.LWS_RELEASE}"
    # git's blob id of the same bytes: the file is that commit's config/crd/bases/<file>.
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == source.blob
    crd = yaml.load(data, Loader=yaml.CSafeLoader)
    api_version, kind_name = kind
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (api_version.split("/")[0], kind_name)
    assert source.source_path in (crds.CRD_DIR / "SOURCE.md").read_text()


def test_the_schema_is_closed_where_the_crd_names_its_fields():
    schema = crds.schema("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet")
    role = schema["properties"]["spec"]["properties"]["roles"]["items"]
    assert role["additionalProperties"] is False
    # metadata.labels is a map: its keys stay free.
    labels = role["properties"]["metadata"]["properties"]["labels"]
    assert labels["additionalProperties"] == {"type": "string"}


# --- what the render writes -------------------------------------------------------------------

def test_cli_writes_pd_as_one_disaggregatedset_valid_against_the_crd(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", "--target", "k8s", "pd", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    objects = [yaml.safe_load(p.read_text().partition("\n")[2]) for p in sorted(out.glob("*.yaml"))]
    (ds,) = [o for o in objects if o["kind"] == "DisaggregatedSet"]
    assert ds["apiVersion"] == "disaggregatedset.x-k8s.io/v1" and ds["metadata"]["name"] == "sglang-bundle-pd"
    assert list(_roles(ds)) == ["prefill", "decode", "router"]
    kinds = [o["kind"] for o in objects]
    assert "LeaderWorkerSet" not in kinds and "Deployment" not in kinds  # smg is the set's router role
    assert manifests.custom_resource_problems(ds) == []
    assert "needs LeaderWorkerSet v0.9.0+ (its DisaggregatedSet CRD) installed" in err
    assert "kubernetes.pd.form: LeaderWorkerSets instead needs LeaderWorkerSet v0.3.0+" in err
    # No slices, placement or external scaling unless asked: a v0.9 controller takes it.
    assert set(ds["spec"]) == {"roles"}
    assert all("scaling" not in r for r in ds["spec"]["roles"])


def test_the_leaderworkersets_form_is_one_key_away_and_validates_too(tmp_path, capsys):
    path = write_config(tmp_path, "kubernetes: {pd: {form: LeaderWorkerSets}}\n")
    out = tmp_path / "out"
    assert main(["render", "--target", "k8s", "pd", "-c", str(path), "-o", str(out)]) == 0
    assert "needs LeaderWorkerSet v0.3.0+ installed" in capsys.readouterr().err
    objects = [yaml.safe_load(p.read_text().partition("\n")[2]) for p in sorted(out.glob("*.yaml"))]
    lws = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    assert sorted(o["metadata"]["name"] for o in lws) == ["sglang-bundle-pd-decode", "sglang-bundle-pd-prefill"]
    assert "DisaggregatedSet" not in [o["kind"] for o in objects]
    for obj in lws:
        assert manifests.custom_resource_problems(obj) == []


def test_every_role_rolls_out_with_a_surge_the_webhook_accepts(tmp_path):
    _, rendered = _render(tmp_path)
    for role in _the_set(rendered)["spec"]["roles"]:
        assert role["spec"]["rolloutStrategy"] == {
            "type": "RollingUpdate", "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
        assert "partition" not in role["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]


def test_slices_placement_and_percentages_render_and_validate(tmp_path, capsys):
    _, rendered = _render(tmp_path, "kubernetes:\n  pd:\n    slices: 3\n"
                                    "    placement: {topology_key: example.com/rack, exclusive: topology}\n"
                                    "    rollout: {max_surge: 25%, max_unavailable: 0}\n")
    ds = _the_set(rendered)
    assert ds["spec"]["slices"] == 3
    assert ds["spec"]["placementPolicy"] == {"type": "ExclusiveTopology", "topology": "example.com/rack"}
    assert _roles(ds)["decode"]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": "25%", "maxUnavailable": 0}
    assert manifests.custom_resource_problems(ds) == []
    assert rendered.needs.startswith("LeaderWorkerSet v0.10.0+")
    # With slices the router selects its own slice too, read from its pod like the revision.
    router = _roles(ds)["router"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert {e["name"] for e in router["env"] if "valueFrom" in e} == {"DS_REVISION", "DS_SLICE"}
    selector = router["args"][router["args"].index("--decode-selector") + 1:]
    assert "disaggregatedset.x-k8s.io/slice=$(DS_SLICE)" in selector[:5]
    _, slice_ = _render(tmp_path, "kubernetes: {pd: {placement: {topology_key: example.com/rack}}}\n")
    assert _the_set(slice_)["spec"]["placementPolicy"]["type"] == "ExclusiveSlice"


def test_external_scaling_leaves_replicas_to_the_scaler_the_controller_makes(tmp_path):
    _, rendered = _render(tmp_path, "kubernetes: {pd: {external_scaling: [decode]}}\n")
    ds = _the_set(rendered)
    decode = _roles(ds)["decode"]
    assert decode["scaling"] == {"mode": "External"} and "replicas" not in decode["spec"]
    assert "scaling" not in _roles(ds)["prefill"]
    assert manifests.custom_resource_problems(ds) == []
    # The controller creates <set>-<role> and adopts only a scaler it owns: none is written.
    assert not [o for o in rendered.objects if o["kind"] == "DisaggregatedSetRoleScaler"]
    (note,) = [n for n in rendered.notes if "External" in n]
    assert "DisaggregatedSetRoleScaler sglang-bundle-pd-decode" in note
    # What an autoscaler then writes is the scaler CRD's to judge.
    scaler = {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSetRoleScaler",
              "metadata": {"name": "sglang-bundle-pd-decode"}, "spec": {"replicas": 3}}
    assert manifests.custom_resource_problems(scaler) == []
    scaler["spec"]["replicas"] = -1
    (problem,) = manifests.custom_resource_problems(scaler)
    assert problem.startswith("spec.replicas: ")


# --- refusals: the CRD, the webhooks, the config ----------------------------------------------

@pytest.fixture(scope="module")
def the_set(tmp_path_factory):
    return _the_set(_render(tmp_path_factory.mktemp("ds"))[1])


def _rolling(ds, role):
    return _roles(ds)[role]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]


@pytest.mark.parametrize("plant, where, needle", [
    # The CRD: a misspelled field (closed schema), an unknown placement, a role name, the role count.
    (lambda ds: _roles(ds)["decode"]["spec"].update(rolloutStrateg={}), "spec.roles[1].spec",
     "'rolloutStrateg' was unexpected"),
    (lambda ds: ds["spec"].update(placementPolicy={"type": "Anywhere", "topology": "x"}),
     "spec.placementPolicy.type", "'Anywhere' is not one of"),
    (lambda ds: _roles(ds)["decode"].update(name="Decode"), "spec.roles[1].name", "does not match"),
    (lambda ds: ds["spec"].update(roles=ds["spec"]["roles"][:1]), "spec.roles", "is too short"),
    (lambda ds: ds["spec"].update(slices=0), "spec.slices", "less than the minimum of 1"),
    # Inside a role's pod template, core/v1 by kubernetes-validate.
    (lambda ds: _roles(ds)["prefill"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
     .update(hostIPC="yes"), "spec.roles[0].spec.leaderWorkerTemplate.leaderTemplate.spec.hostIPC", ""),
    # The webhooks' rules.
    (lambda ds: _rolling(ds, "decode").update(maxSurge=0, maxUnavailable=0),
     "spec.roles[1].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", ROLLOUT_RULE),
    (lambda ds: _rolling(ds, "decode").update(maxSurge="0%", maxUnavailable="0%"),
     "spec.roles[1].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", "must not be 0"),
    (lambda ds: _rolling(ds, "prefill").update(maxSurge="150%"),
     "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge", "greater than 100%"),
    (lambda ds: _rolling(ds, "prefill").update(maxSurge="lots"),
     "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge", "percent"),
    (lambda ds: _rolling(ds, "router").update(partition=1),
     "spec.roles[2].spec.rolloutStrategy.rollingUpdateConfiguration.partition", "not supported by DisaggregatedSet"),
    (lambda ds: _roles(ds)["decode"]["spec"]["leaderWorkerTemplate"].update(size=0),
     "spec.roles[1].spec.leaderWorkerTemplate.size", "leaderworkerset_webhook.go generalValidate"),
    (lambda ds: ds["spec"].update(slices=2) or _roles(ds)["decode"].update(scaling={"mode": "External"}),
     "spec.slices", "disaggregatedset_webhook.go validate"),
    (lambda ds: ds["spec"].update(placementPolicy={"type": "ExclusiveSlice"}),
     "spec.placementPolicy.topology", "validatePlacement"),
    (lambda ds: _roles(ds)["decode"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"].update(
        annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"})
     or ds["spec"].update(placementPolicy={"type": "ExclusiveSlice", "topology": "rack"}),
     "spec.roles[1]", "must not be combined"),
    (lambda ds: _roles(ds)["prefill"]["spec"].update(replicas=0), "spec", "x-kubernetes-validations"),
    (lambda ds: ds["metadata"].update(name="a-project-name-so-long-that-the-controllers-names-break"),
     "spec.roles[0].name", "GenerateName"),
])
def test_a_planted_mistake_is_refused_where_it_is_naming_its_rule(the_set, plant, where, needle):
    ds = copy.deepcopy(the_set)
    plant(ds)
    problems = manifests.custom_resource_problems(ds)
    assert problems and problems[0].startswith(where + ": ") and needle in problems[0], problems


def test_a_planted_zero_rollout_fails_the_render_naming_the_rule(tmp_path, capsys, monkeypatch):
    # Past the config's own rule (below), the manifest check still stops it: nothing is written.
    monkeypatch.setattr(k8s_rules, "_form_problems", lambda form, discovery, replicas: [])
    path = write_config(tmp_path, "kubernetes: {pd: {rollout: {max_surge: 0, max_unavailable: 0}}}\n")
    out = tmp_path / "out"
    assert main(["render", "--target", "k8s", "pd", "-c", str(path), "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert "-disaggregatedset-sglang-bundle-pd.yaml: spec.roles[0].spec.rolloutStrategy." \
           "rollingUpdateConfiguration.maxUnavailable: must not be 0 when `maxSurge` is 0" in err
    assert ROLLOUT_RULE in err and not out.exists()


@pytest.mark.parametrize("text, where, needle", [
    ("kubernetes: {pd: {rollout: {max_surge: 0, max_unavailable: 0%}}}\n", "kubernetes.pd.rollout",
     "both 0"),
    # Percentages scale to each role's copies: half of one copy, rounded down, is none.
    ("kubernetes: {pd: {rollout: {max_surge: 0, max_unavailable: 50%}, decode: {replicas: 2}}}\n",
     "kubernetes.pd.rollout", "both 0 for prefill (1 copy), router (1 copy)"),
    ("kubernetes: {pd: {slices: 2, external_scaling: [decode]}}\n", "kubernetes.pd.slices",
     "refuses spec.slices > 1"),
    ("kubernetes: {discovery: dns, pd: {external_scaling: [prefill]}}\n", "kubernetes.pd.external_scaling",
     "use discovery: selector"),
    ("kubernetes: {pd: {rollout: {max_surge: 120%}}}\n", "kubernetes.pd.rollout.max_surge", "more than 100%"),
    # <project>-pd-0-<revision>-prefill: longer than an LWS name may be (the LWS form's fits).
    ("project: a-long-project-name-xyzw\n", "project", "shorten project"),
])
def test_config_rules_of_the_form_name_the_key(tmp_path, text, where, needle):
    path = write_config(tmp_path, text)
    found = k8s_rules.check(load_config(path), registry.get("pd"))
    (problem,) = found.errors
    assert problem.startswith(f"{path}:") and f": {where}: " in problem and needle in problem


def test_the_child_leaderworkerset_names_are_the_controllers(the_set):
    # <set>-<slice>-<revision>-<role>, the revision 8 characters (utils.go GenerateName, ComputeRevision).
    assert lws_webhook.child_name("sglang-bundle-pd", 0, "prefill") == "sglang-bundle-pd-0-xxxxxxxx-prefill"
    assert lws_webhook.disaggregatedset(the_set) == []
