"""`bundle verify`'s service (bundle/service/verify.py) called directly, the look inside each container
replaced: one report per container in the order given, against this checkout's lock, and one FAIL
among WARNs fails the project (its JSON says so)."""

from __future__ import annotations

from bundle.findings import Finding, Level
from bundle.images.verify import ContainerReport
from bundle.lock import load_lock
from bundle.service import verify as service

FOUND = {"p-router-1": [Finding(Level.WARN, "router image is not the lock's")],
         "p-server-1": [Finding(Level.OK, "torch 2.9.1"), Finding(Level.FAIL, "sglang 0.5.0, the lock says 0.5.4")]}


def test_one_fail_among_warnings_fails_the_project_and_every_container_has_its_report(monkeypatch):
    seen = []

    def look(name, lock, root):
        seen.append((name, lock.hash))
        return ContainerReport(name, "img:1", FOUND.get(name, []))

    monkeypatch.setattr(service, "verify_container", look)
    verified = service.verify(service.VerifyRequest("p", ["p-server-1", "p-router-1", "p-bench-1"]))
    assert [v.container for v in verified.reports] == ["p-server-1", "p-router-1", "p-bench-1"]
    assert {h for _, h in seen} == {load_lock().hash} == {verified.lock_hash}
    assert verified.failed and verified.as_dict()["status"] == "FAIL"
    assert [c["level"] for c in verified.as_dict()["containers"]] == ["FAIL", "WARN", "OK"]
    assert not service.verify(service.VerifyRequest("p", ["p-router-1", "p-bench-1"])).failed
