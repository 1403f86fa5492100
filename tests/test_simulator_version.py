"""The simulator reports the lock's SGLang pin as the version a real server would, so moving the
pin moves the rehearsal's attestation with it."""

from __future__ import annotations

from bundle.images.lock import load_lock
from bundle.simulator.server import pinned_sglang_version


def test_the_simulator_reports_the_locks_sglang_pin(tmp_path):
    assert pinned_sglang_version(str(load_lock().path)) == load_lock().pins["sglang"]
    moved = tmp_path / "lock.toml"
    moved.write_text(load_lock().path.read_text().replace('sglang = "0.5.23"', 'sglang = "0.5.99"'))
    assert pinned_sglang_version(str(moved)) == "0.5.99"


def test_without_a_lock_it_reports_the_installed_sglang(tmp_path):
    from importlib.metadata import version

    assert pinned_sglang_version(str(tmp_path / "absent.toml")) == version("sglang")
