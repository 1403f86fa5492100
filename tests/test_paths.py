"""Where a driver installed on its own (pipx / uv tool, not in the checkout) finds compose/ and docker/."""

from __future__ import annotations

import pytest

from bundle import paths
from bundle.errors import EXIT_ENVIRONMENT, BundleError


def _project(folder):
    (folder / "compose").mkdir(parents=True)
    (folder / "docker").mkdir()
    (folder / "docker" / "lock.toml").write_text("")
    return folder


def test_a_driver_installed_outside_the_checkout_uses_the_project_it_is_run_in(tmp_path, monkeypatch):
    monkeypatch.delenv("BUNDLE_HOME", raising=False)
    monkeypatch.setattr(paths, "PACKAGE_DIR", tmp_path / "site-packages" / "bundle")
    project = _project(tmp_path / "checkout")
    (project / "compose" / "deeper").mkdir()
    monkeypatch.chdir(project / "compose" / "deeper")
    assert paths.project_root() == project
    assert paths.docker_dir() == project / "docker"


def test_without_a_project_in_reach_one_error_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("BUNDLE_HOME", raising=False)
    monkeypatch.setattr(paths, "PACKAGE_DIR", tmp_path / "site-packages" / "bundle")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BundleError) as err:
        paths.project_root()
    assert err.value.exit_code == EXIT_ENVIRONMENT and "BUNDLE_HOME" in str(err.value)


def test_bundle_home_wins_over_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("BUNDLE_HOME", str(_project(tmp_path / "elsewhere")))
    assert paths.project_root() == tmp_path / "elsewhere"
