"""One funnel for outside commands (bundle/run.py): no module of bundle/ uses `subprocess` but the
funnel, so every command that is not Docker's (python-on-whales) runs under a time limit, and a missing
program, a hang and a non-zero exit are one error type (CommandFailed) carrying the command, its exit
status and its output. Held by an AST scan, shown to fail on a planted call; the funnel's own
behaviour is run for real (a missing program, a hang, an exit 3, `--debug`'s echo)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from bundle import run
from bundle.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_TIMEOUT, CommandFailed, CommandMissing, CommandTimedOut

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "bundle"

# Where `subprocess` stays, and why.
ALLOWED = {
    "run.py": "the funnel itself",
    "doctor/allreduce_probe.py": "a standalone script (standard library and torch only) run with the host's Python or "
                            "inside the worker image, where the bundle package need not be installed: it starts "
                            "one worker process per GPU itself",
    "doctor/nixl_probe.py": "the same, for NIXL: it starts the target side of the transfer as its own process",
    "images/audit/probe.py": "runs inside a container of the image under audit, with that image's Python, "
                             "without the bundle package",
}


def subprocess_uses(source: str) -> list[int]:
    """The lines of `source` that import `subprocess` (any form) or name `os.system`/`os.popen`/`os.spawn*`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "subprocess" for a in node.names):
            found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "subprocess":
            found.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
              and (node.attr in ("system", "popen") or node.attr.startswith(("spawn", "exec")))):
            found.append(node.lineno)
    return found


def test_no_subprocess_outside_the_funnel():
    assert all((PACKAGE_DIR / rel).is_file() for rel in ALLOWED), "an allowed file moved: update ALLOWED"
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        if rel not in ALLOWED:
            found += [f"bundle/{rel}:{line}" for line in subprocess_uses(path.read_text())]
    assert not found, "run outside commands through bundle.run.run / stream:\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    "import subprocess\nsubprocess.run(['git', 'status'])\n",
    "def f():\n    from subprocess import check_output\n    return check_output(['kubectl'])\n",
    "import os\nos.system('nvidia-smi')\n",
])
def test_a_planted_call_is_found(code):
    assert subprocess_uses(code)


def test_a_missing_program_is_command_missing_with_the_environments_code():
    with pytest.raises(CommandMissing) as caught:
        run.run(["no-such-program-bundle-test", "--version"], timeout=10)
    assert caught.value.command == ["no-such-program-bundle-test", "--version"]
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert isinstance(caught.value, CommandFailed)


def test_a_non_zero_exit_carries_the_command_its_status_and_the_output_tail():
    code = "import sys; print('first'); print('the cause', file=sys.stderr); sys.exit(3)"
    with pytest.raises(CommandFailed) as caught:
        run.run([sys.executable, "-c", code], timeout=30)
    assert caught.value.returncode == 3
    assert caught.value.exit_code == EXIT_FAILED
    assert "the cause" in caught.value.output and "exited 3: first / the cause" in caught.value.message
    # check=False hands the status back instead
    done = run.run([sys.executable, "-c", code], timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr, done.ok) == (3, "first\n", "the cause\n", False)


def test_a_hang_is_killed_at_its_time_limit_with_what_it_printed():
    code = "import time; print('started', flush=True); time.sleep(30)"
    with pytest.raises(CommandTimedOut) as caught:
        run.run([sys.executable, "-c", code], timeout=1, merge_output=True)
    assert caught.value.exit_code == EXIT_TIMEOUT
    assert "gave no answer within 1 s" in caught.value.message
    assert "started" in caught.value.output


def test_debug_shows_each_command_before_it_runs(monkeypatch, capsys):
    monkeypatch.setenv("BUNDLE_DEBUG", "1")
    run.run([sys.executable, "-c", "pass"], timeout=30)
    assert f"+ {sys.executable} -c pass" in capsys.readouterr().err
    monkeypatch.delenv("BUNDLE_DEBUG")
    run.run([sys.executable, "-c", "pass"], timeout=30)
    assert capsys.readouterr().err == ""


def test_stream_passes_each_line_as_it_comes_and_returns_the_status():
    lines = []
    code = "import sys; print('a'); print('b', file=sys.stderr); sys.exit(2)"
    assert run.stream([sys.executable, "-c", code], lines.append) == 2
    assert sorted(lines) == ["a", "b"]
    with pytest.raises(CommandMissing):
        run.stream(["no-such-program-bundle-test"], lines.append)
