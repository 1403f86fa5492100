"""What the guides cite from the repository exists: every repository path in a code span of docs/*.md and
the README (`bundle/verify/verdict.py`, `tests/data/doctor/`, `docker/*.Dockerfile`,
`compose/rehearsal-engine-<topology>.yaml`) matches a file or folder of the checkout, and every test they
name (`tests/test_x.py::test_y`, or a bare `test_y`) is defined there. A guide that cites a file which
never existed sends its reader nowhere (docs/reading-a-bench.md cited tests/test_inference_perf_names.py)."""

from __future__ import annotations

import glob
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def _top_folders() -> set[str]:
    """The checkout's tracked top-level folders: a span whose first component is one of them is a repository
    path. Tracked only: what a run leaves (runs/, site/) is no repository path, and a guide citing
    `runs/<project>/...` means the run's, not this checkout's."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode == 0 and listed.stdout:
        return {line.split("/", 1)[0] for line in listed.stdout.splitlines() if "/" in line
                and not line.startswith(".")}
    return {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}  # not a git checkout


TOP = _top_folders()
# Spans shaped like a repository path that name something else.
NOT_PATHS = {"docker/login-action": "a GitHub Action (docker's), in docs/release.md's workflow table"}
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w.*<>{}/-]*)(?:::(\w+))?" % "|".join(sorted(TOP)))
TEST_NAME = re.compile(r"^(test_\w+)$")


def spans(page: Path) -> list[str]:
    text = re.sub(r"^(```|~~~).*?^\1", "", page.read_text(), flags=re.M | re.S)  # code blocks are commands
    return re.findall(r"`([^`\n]+)`", text)


def cited() -> list[tuple[str, str, str | None]]:
    """(guide, path, test name or None) for every repository path in a code span."""
    out = []
    for page in GUIDES:
        for span in spans(page):
            for path, name in PATH.findall(span):
                path = path.rstrip(".,")
                if path not in NOT_PATHS:
                    out.append((page.name, path, name or None))
    return out


def test_the_guides_cite_repository_paths():
    # The check reads something: the guides cite dozens of files (221 spans on 2026-12-06).
    assert len(cited()) > 150


@pytest.mark.parametrize("guide, path, name", cited(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_cited_path_exists(guide, path, name):
    pattern = re.sub(r"<[^>]+>", "*", path)
    found = [Path(p) for p in glob.glob(str(ROOT / pattern))]
    assert found, f"docs/{guide} cites `{path}`, which is not in the repository"
    if name:
        assert any(re.search(rf"^\s*(?:async )?def {name}\b|^class {name}\b", p.read_text(), re.M)
                   for p in found if p.is_file()), f"docs/{guide} cites `{path}::{name}`: no such test there"


def test_every_bare_test_name_is_defined():
    defined = set()
    for module in (ROOT / "tests").rglob("*.py"):
        defined.add(module.stem)
        defined.update(re.findall(r"^\s*(?:async )?def (test_\w+)", module.read_text(), re.M))
    unknown = [f"docs/{page.name}: `{span}`" for page in GUIDES for span in spans(page)
               if TEST_NAME.match(span) and span not in defined]
    assert not unknown, f"tests the guides name that do not exist: {unknown}"
