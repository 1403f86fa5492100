"""One check vocabulary (bundle/findings.py): `bundle doctor`, the image audit, `bundle verify`,
attestation and the config's rules each yield the shared Finding with a level of the shared Level,
driven here on small real inputs; each report keeps its own words at its edge (attestation's N/A, the
rules' error/warning); and an AST scan finds no second level vocabulary or finding type under bundle/,
shown to fail on a tree planted with one."""

from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from bundle import paths
from bundle.checks import Check
from bundle.config.loader import load_config
from bundle.doctor import core as doctor_core
from bundle.doctor import registry as doctor_registry
from bundle.doctor.context import HostContext
from bundle.findings import SEVERITY, Finding, Level, failed, worst
from bundle.images import contents
from bundle.images.audit import registry as audit_registry
from bundle.images.audit.context import AuditContext, locked_packages
from bundle.images.verify import IMAGE_KIND_LABEL, verify_container
from bundle.lock import LOCK_HASH_LABEL, load_lock
from bundle.stack import engine
from bundle.verify import attest
from tests.conftest import checked, write_config

ROOT = Path(__file__).resolve().parents[1]
SITE = "/opt/venv/lib/python3.12/site-packages"


def assert_shared(findings) -> list[Level]:
    """Every finding is the shared type with a shared level; their levels, for the caller to pin."""
    findings = list(findings)
    assert findings, "the producer yielded nothing to check"
    for f in findings:
        assert isinstance(f, Finding), f"{type(f).__name__} is not bundle.findings.Finding: {f!r}"
        assert type(f.level) is Level, f"{f.level!r} is not a bundle.findings.Level: {f!r}"
    return [f.level for f in findings]


def _raises(ctx):
    raise RuntimeError("disk on fire")


# ---- the five producers ----------------------------------------------------------------------------

def test_the_doctor_yields_shared_findings_and_keeps_its_four_statuses(tmp_path):
    ctx = HostContext(model_path=str(tmp_path / "no-model-here"))
    report = doctor_registry.run_checks(ctx, only=["shm", "memlock", "model", "gpus"])
    assert [r.name for r in report.results] == ["gpus", "shm", "memlock", "model"]
    broken = doctor_core.run_check(Check("x", "X", _raises), ctx)
    levels = assert_shared([r.finding for r in [*report.results, broken]])
    assert broken.finding.level is Level.FAIL and broken.status is Level.FAIL
    assert set(levels) <= set(doctor_core.STATUSES)
    # The report's words stay the doctor's: status, summary, remediation, and counts without INFO.
    data = json.loads(json.dumps(doctor_core.Report([*report.results, broken]).as_dict()))
    assert list(data["counts"]) == ["OK", "WARN", "FAIL", "SKIP"]
    assert data["checks"][-1]["status"] == "FAIL" and "disk on fire" in data["checks"][-1]["summary"]


def _audit_ctx(dists: list[dict]) -> AuditContext:
    facts = {"packages": {"distributions": dists, "shadowed": {"six": [SITE, "/usr/lib/python3/dist-packages"]},
                          "pth_files": [], "egg_links": [], "pythonpath": "/somewhere", "deep": False}}
    lock = load_lock()
    return AuditContext(image="x", lock=lock, packages=locked_packages(lock), overlay=None, commands=[],
                        config_name="bundle.yaml", model_source="", facts=facts)


def _dist(name: str, version: str) -> dict:
    return {"name": name, "version": version, "path": f"{SITE}/{name}-{version}.dist-info", "site": SITE,
            "installer": "uv", "direct_url": None, "top_level": [name], "pth_owned": [],
            "record": {"present": True, "files": 3, "missing": [], "n_missing": 0, "changed": [], "n_changed": 0}}


def test_the_audit_yields_shared_findings():
    ctx = _audit_ctx([_dist("idna", "3.10"), _dist("tomli-w", "1.2.0")])
    results = audit_registry.run_checks(ctx, only=["lock", "once", "files", "path-hooks", "sbom"])
    levels = assert_shared(f for r in results for f in r.findings)
    assert Level.FAIL in levels and Level.WARN in levels  # a distribution off the lock; PYTHONPATH set
    assert all(r.level is worst(r.findings) for r in results)
    finding = json.loads(json.dumps([r.as_dict() for r in results]))[0]["findings"][0]
    assert list(finding) == ["level", "what", "fix"]  # the audit's JSON, as it always was


class _Engine:
    """The engine's answers about containers (what `docker inspect` and `docker exec` gave)."""

    def __init__(self, lock_hash: str, facts: dict):
        self.lock_hash, self.facts = lock_hash, facts

    def container_image(self, name: str) -> engine.ContainerImage:
        labels = {"rehearsal-1": {IMAGE_KIND_LABEL: "rehearsal"}, "stale-1": {LOCK_HASH_LABEL: "0ld"}}
        return engine.ContainerImage(name, running=name != "stale-1", image_id="sha256:x", image_ref=f"img/{name}",
                                     labels=labels.get(name, {LOCK_HASH_LABEL: self.lock_hash}))

    def exec_in_container(self, name: str, command: list[str]) -> engine.AuditRun:
        return engine.AuditRun(0, contents.PROBE_MARK + json.dumps(self.facts))


def test_bundle_verify_yields_shared_findings(monkeypatch):
    lock = load_lock()
    fake = _Engine(lock.hash, _audit_ctx([_dist("idna", "3.10")]).facts)
    monkeypatch.setattr(engine, "container_image", fake.container_image)
    monkeypatch.setattr(engine, "exec_in_container", fake.exec_in_container)
    reports = [verify_container(name, lock, paths.project_root()) for name in ("server-1", "rehearsal-1", "stale-1")]
    live, rehearsal, stale = reports
    assert_shared(f for r in reports for f in r.findings)
    assert live.level is Level.FAIL and any(f.what.startswith("server-1: idna 3.10 is installed") for f in live.findings)
    assert rehearsal.level is Level.INFO
    assert [f.level for f in stale.findings] == [Level.FAIL, Level.WARN]  # another lock; not running
    assert json.loads(json.dumps(stale.as_dict()))["level"] == "FAIL"


def test_attestation_yields_shared_findings_and_still_writes_n_a(tmp_path):
    dep = load_config(write_config(tmp_path, "project: vocabulary-test\n"))
    record = attest.WorkerRecord(role="server", source="saved", fields={"device": "cpu", "sglang_version": "0.5.1",
                                                                          "tp_size": 1, "attention_backend": "torch_native",
                                                                          "cuda_graphs": {}})
    (expected,) = attest.expectations(dep, "tp4").values()
    cpu = attest.evaluate(record, replace(expected, tp_size=1, sglang_version="0.5.1"))
    record.fields.update(moe_runner_backend="triton")
    predicted = attest.against_prediction([record], {"tp4/server": {"moe_runner_backend": "x"}}, "tp4", "a.json")
    levels = assert_shared([*cpu, *predicted])
    assert Level.SKIP in levels and Level.WARN in levels and all(f.role == "server" for f in [*cpu, *predicted])
    result = attest.Attestation("tp4", [record], [*cpu, *predicted])
    written = {f["level"] for f in json.loads(result.to_json())["findings"]}
    assert written == {"OK", "N/A", "WARN"}  # SKIP is attestation's N/A in its JSON, as it always was


def test_the_rules_yield_shared_findings_and_still_say_error_and_warning(tmp_path):
    dep = load_config(write_config(tmp_path, f"model:\n  path: {tmp_path}/nowhere\n"))
    lenient, strict = checked(dep, "tp4"), checked(dep, "tp4", require_model=True)
    assert assert_shared(lenient.findings) == [Level.WARN] and assert_shared(strict.findings) == [Level.FAIL]
    assert lenient.warnings == [lenient.findings[0].what] and lenient.errors == []
    assert strict.errors == [strict.findings[0].what] and strict.warnings == []


def test_the_worst_level_and_a_failure_are_judged_alike_for_every_report():
    found = [Finding(Level.INFO, "a"), Finding(Level.SKIP, "b"), Finding(Level.OK, "c")]
    assert worst([]) is Level.OK and worst(found) is Level.SKIP and not failed(found)
    assert worst([*found, Finding(Level.WARN, "d")]) is Level.WARN
    assert failed([*found, Finding(Level.FAIL, "e")]) and set(SEVERITY) == set(Level)


# ---- one vocabulary: an AST scan of bundle/ ---------------------------------------------------------

HOME = "bundle/findings.py"
# Names a level vocabulary gives its members (OK/WARN/FAIL and the words around them).
LEVEL_NAMES = {"OK", "INFO", "WARN", "WARNING", "FAIL", "FAILED", "ERROR", "SKIP", "SKIPPED", "NOT_APPLICABLE"}
VOCABULARY_CLASS = re.compile(r"(Status|Level|Verdict)$")


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a block of statements binds by plain assignment (`OK = ...`, `OK, FAIL = ...`)."""
    out = set()
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            out |= {e.id for e in elts if isinstance(e, ast.Name)}
    return out


def vocabularies(package_root: Path) -> list[str]:
    """Every level vocabulary or finding type under the package but the shared one: a class or a module
    that binds two or more level names, an enum named like a level (…Status, …Level, …Verdict), a
    class named …Finding that is not the shared Finding or built on it."""
    out = []
    for path in sorted(package_root.rglob("*.py")):
        rel = path.relative_to(package_root.parent).as_posix()
        if rel == HOME:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        levels = _bound(tree.body) & LEVEL_NAMES
        if len(levels) >= 2:
            out.append(f"{rel}: binds the levels {sorted(levels)} (use bundle.findings.Level)")
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
            members = _bound(node.body) & LEVEL_NAMES
            if len(members) >= 2 or (VOCABULARY_CLASS.search(node.name) and any("Enum" in b for b in bases)):
                out.append(f"{rel}:{node.lineno}: class {node.name} is a level vocabulary (use bundle.findings.Level)")
            if node.name.endswith("Finding") and "Finding" not in bases:
                out.append(f"{rel}:{node.lineno}: class {node.name} is a finding type of its own "
                           f"(use bundle.findings.Finding, or build on it)")
    return out


def test_bundle_has_one_level_vocabulary_and_one_finding_type():
    assert vocabularies(ROOT / "bundle") == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "bundle"
    root.mkdir()
    shutil.copy(ROOT / HOME, root / "findings.py")
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_tree_built_on_the_shared_vocabulary_passes(tmp_path):
    root = _plant(tmp_path, {"verify/attest.py": "from bundle.findings import Finding, Level\n"
                                                 "class ServerFinding(Finding):\n    role: str = ''\n"
                                                 "SHOWN = {Level.SKIP: 'N/A'}\n",
                             "verify/bench.py": "class Level:\n    concurrency: int\n"})  # not a level vocabulary
    assert vocabularies(root) == []


@pytest.mark.parametrize("text, says", [
    ("import enum\nclass Verdict(enum.Enum):\n    OK = 'ok'\n    FAIL = 'fail'\n", "class Verdict is a level vocabulary"),
    ("import enum\nclass CheckStatus(str, enum.Enum):\n    GOOD = 'good'\n    BAD = 'bad'\n",
     "class CheckStatus is a level vocabulary"),
    ("class Outcome:\n    OK: str = 'OK'\n    WARN: str = 'WARN'\n", "class Outcome is a level vocabulary"),
    ("OK, WARN, FAIL = 'OK', 'WARN', 'FAIL'\n", "binds the levels ['FAIL', 'OK', 'WARN']"),
    ("from dataclasses import dataclass\n@dataclass\nclass Finding:\n    level: str\n",
     "class Finding is a finding type of its own"),
])
def test_a_planted_second_vocabulary_fails(tmp_path, text, says):
    root = _plant(tmp_path, {"doctor/core.py": text})
    found = vocabularies(root)
    assert len(found) == 1 and found[0].startswith("bundle/doctor/core.py") and says in found[0], found
