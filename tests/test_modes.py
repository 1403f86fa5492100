"""The no-GPU modes live in one package (bundle/rehearsal/): the core asks them through bundle/modes.py, which
the entry points install, and no module outside the package names them but the entry point and the verbs
that offer their flag. The records the core writes keep the key their package defines, so records on disk
from before read back, and what is written now reads in an older driver."""

from __future__ import annotations

import json
import re

import pytest

from bundle import modes
from bundle.paths import project_root
from bundle.rehearsal import registry
from bundle.stack import runstate

# The entry point that installs the registry, and the verbs that offer its flag (and their shared helpers).
MAY_NAME_THEM = {"bundle/cli.py", "bundle/commands/_common.py", "bundle/commands/launch.py",
                 "bundle/commands/render.py", "bundle/commands/tune.py"}


def modules_naming(root, word: str) -> set[str]:
    """Every file under root/bundle/ outside the modes' own package whose text holds `word` (any case)."""
    package = root / "bundle"
    found = set()
    for path in package.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith("bundle/rehearsal/") and "__pycache__" not in rel:
            if re.search(word, path.read_text(errors="replace"), re.IGNORECASE):
                found.add(rel)
    return found


def test_nothing_outside_the_package_names_the_modes_but_the_entry_point_and_their_verbs():
    assert modules_naming(project_root(), registry.WORD) <= MAY_NAME_THEM


def test_a_module_that_names_them_is_found(tmp_path):
    (tmp_path / "bundle" / "service").mkdir(parents=True)
    (tmp_path / "bundle" / "service" / "planted.py").write_text(f"# a {registry.WORD.upper()} comment\n")
    (tmp_path / "bundle" / "rehearsal").mkdir()
    (tmp_path / "bundle" / "rehearsal" / "own.py").write_text(f"# the {registry.WORD}'s own\n")
    assert modules_naming(tmp_path, registry.WORD) == {"bundle/service/planted.py"}


class _Rendered:
    project, env_file, profiles, env = "p-pd", "/x/p-pd.env", (), {}
    compose_files = ()

    class topology:
        name = "pd"


def test_a_launch_record_keeps_the_key_its_modes_define_both_ways(runs_dir):
    runstate.save(runstate.LaunchRecord.of(_Rendered, mode="sim", config="c", run_dir=runs_dir / "r"))
    on_disk = json.loads((runstate.project_dir("p-pd") / runstate.RECORD_NAME).read_text())
    assert on_disk[registry.RECORD_KEY] == "sim" and "mode" not in on_disk
    assert runstate.load("p-pd").mode == "sim"


@pytest.mark.parametrize("stored, mode", [("engine", "engine"), (True, "sim"), (False, None), (None, None)])
def test_a_record_an_older_driver_wrote_reads_back_as_its_mode(runs_dir, stored, mode):
    record = {"project": "p-tp4", "topology": "tp4", "compose_files": [], "env_file": "", "rehearsal": stored,
              "config": "c", "started_at": 0.0, "run_dir": ""}
    path = runstate.project_dir("p-tp4") / runstate.RECORD_NAME
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    assert modes.record_value(modes.from_record(runstate.load("p-tp4").mode)) == mode


def test_the_core_is_told_when_no_entry_point_installed_the_modes(monkeypatch):
    monkeypatch.setattr(modes, "_registry", None)
    with pytest.raises(RuntimeError, match="never installed"):
        modes.record_key()
