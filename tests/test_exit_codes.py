"""One set of exit-code names (bundle/errors.py): no module of the driver gives an exit code as a bare
number, so what a code means is read in one place and a script's `case $?` can trust it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "bundle"


def bare_exit_codes(source: str, rel: str) -> list[str]:
    """Every `exit_code=<number>` keyword and `exit_code = <number>` default of `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "exit_code" and isinstance(node.value, ast.Constant):
            found.append(f"bundle/{rel}:{node.value.lineno}: exit_code={node.value.value!r}")
        elif isinstance(node, ast.arguments):
            named = [*node.posonlyargs, *node.args][-len(node.defaults):] if node.defaults else []
            pairs = list(zip(named, node.defaults)) + list(zip(node.kwonlyargs, node.kw_defaults))
            found += [f"bundle/{rel}:{d.lineno}: exit_code={d.value!r}" for a, d in pairs
                      if a.arg == "exit_code" and isinstance(d, ast.Constant)]
    return found


def test_no_exit_code_is_a_bare_number():
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        found += bare_exit_codes(path.read_text(), path.relative_to(PACKAGE_DIR).as_posix())
    assert not found, "name the code (bundle.errors: EXIT_USAGE, EXIT_CONFIG ...):\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    'raise BundleError("--sim needs --rehearsal", exit_code=2)\n',
    'def fail(message, *, exit_code=3):\n    pass\n',
])
def test_a_planted_bare_exit_code_is_found(code):
    assert bare_exit_codes(code, "commands/planted.py")
