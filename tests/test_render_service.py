"""`bundle render --target`'s service steps (bundle/service/render.py) called directly: the folder holds
what the render says it wrote, and kubectl's refusal names the folder as the user wrote it."""

from __future__ import annotations

import pytest

from bundle.errors import BundleError
from bundle.targets.k8s import validation as manifests
from bundle.targets import registry as targets
from bundle.service.render import render_target, write_folder

pytestmark = pytest.mark.usefixtures("runs_dir")


def _k8s(topology: str = "pd"):
    target = targets.get("k8s")
    return render_target(target.renderer, target.rules, topology)


def test_a_targets_render_lands_in_the_folder_with_what_it_was_checked_against(tmp_path):
    folder = write_folder(_k8s(), f"{tmp_path}/out/")
    assert folder.written and all(path.is_file() and path.parent == tmp_path / "out" for path in folder.written)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in folder.written)
    assert folder.checked.startswith("checked: ") and "kubectl" not in folder.checked


def test_kubectls_refusal_is_an_error_naming_the_folder_as_given_and_its_word_joins_checked(tmp_path, monkeypatch):
    given = f"{tmp_path}/out/"
    assert targets.get("k8s").dry_run is manifests.kubectl_dry_run  # the k8s wing brings its own check
    with pytest.raises(BundleError) as err:
        write_folder(_k8s(), given, dry_run=lambda folder: (False, "no matches for kind"))
    assert f"refused {given}:\nno matches for kind" in err.value.message
    made = write_folder(_k8s(), given, dry_run=lambda folder: (True, "4 objects accepted"))
    assert made.checked.endswith("; kubectl: 4 objects accepted")
