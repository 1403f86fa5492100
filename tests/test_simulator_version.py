"""The simulator reports the SGLang installed beside it as its version, as a real server reports its
own `sglang.__version__`: not the lock's pin, which attestation compares it with. So a lock whose
pin moved (an image not rebuilt for it) fails the rehearsal's attestation; an echo could not fail."""

from __future__ import annotations

import pytest

import dataclasses
import json
from importlib.metadata import version

import requests

from bundle.config.loader import load_config
from bundle.findings import Level
from bundle.lock import load_lock
from bundle.stack.workers import HttpWorkers
from bundle.verify import attest
from tests.sim_process import simulator


def _version_findings(server: str, pinned: str) -> list:
    """Attestation's version findings for the simulator at `server`, against a lock pinning `pinned`."""
    record = attest.read_worker("server", HttpWorkers({"server": server}), None)
    exp = dataclasses.replace(attest.expectations(load_config(None), "tp4")["server"], sglang_version=pinned)
    return [f for f in attest.evaluate(record, exp) if f.what == "SGLang version"]


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_moved_pin_fails_the_version_attestation_of_a_simulator(tmp_path):
    with simulator(tmp_path, env={"BUNDLE_LOCK_FILE": str(tmp_path / "moved.toml")}) as (url, _, _):
        info = requests.get(url + "/server_info", timeout=10).json()
        assert info["version"] == version("sglang")  # what is installed, whatever the lock says
        assert [f.level for f in _version_findings(url, load_lock().pins["sglang"])] == [Level.OK]
        (moved,) = _version_findings(url, "0.5.99")
        assert moved.level == Level.FAIL and f"runs {version('sglang')}, the lock pins 0.5.99" in moved.detail, \
            json.dumps(moved.__dict__, default=str)
