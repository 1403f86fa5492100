"""`bundle audit`'s service (bundle/service/audit.py) called directly, the audit inside a container
replaced by a recorder: which image is audited (--image, else the stand-in build's with --standin,
else the config's image.ref, else the lock's), its progress on the reporter or nowhere, the report saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle.images.build import make_plan
from bundle.lock import load_lock
from bundle.service import audit as service
from tests.conftest import write_config
from tests.recording import RecordingReporter


@pytest.fixture
def audited(monkeypatch, runs_dir):
    """The images the recorder was asked to audit."""
    asked = []

    def fake_audit(image, dep, lock, *, config_name, only, skip, deep, sbom_out, on_progress):
        asked.append(image)
        if on_progress:
            on_progress(f"checking {image} [{', '.join(only or ['every check'])}]")
        return {"image": image, "lock": lock.hash}

    monkeypatch.setattr(service, "audit", fake_audit)
    monkeypatch.setattr(service, "save", lambda result: Path(f"/runs/audit/lock-{result['lock']}/audit.json"))
    return asked


def test_the_image_audited_is_the_named_one_else_the_standins_else_the_configs_else_the_locks(
        tmp_path, audited):
    lock = load_lock()
    config = str(write_config(tmp_path, "image:\n  ref: registry.example/sglang:mine\n"))
    service.run_audit(service.AuditRequest(image="x:1", standin=True, config=config), None)
    service.run_audit(service.AuditRequest(standin=True, config=config), None)
    service.run_audit(service.AuditRequest(config=config), None)
    service.run_audit(service.AuditRequest(), None)
    assert audited == ["x:1", make_plan(lock, standin=True).layers[-1].extra_tags[0],
                       "registry.example/sglang:mine", lock.image_ref]


def test_progress_goes_to_the_reporter_and_none_means_quiet_and_the_report_is_where_it_was_saved(audited):
    reporter = RecordingReporter()
    done = service.run_audit(service.AuditRequest(image="x:1", only=("lock",)), reporter)
    assert reporter.lines == ["checking x:1 [lock]"]
    assert done.report == Path(f"/runs/audit/lock-{load_lock().hash}/audit.json") and done.audit["image"] == "x:1"
