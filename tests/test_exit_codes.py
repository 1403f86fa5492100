"""One set of exit-code names (bundle/errors.py): no module of the driver gives an exit code as a bare
number, so what a code means is read in one place and a script's `case $?` can trust it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bundle.errors import EXIT_CONFIG

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


# ---- errors by kind: the class decides the exit code ----

def raises_naming_a_code_or_no_kind(source: str, rel: str) -> list[str]:
    """Every `raise` of `source` that passes an exit code (the kind decides it) or raises the base
    BundleError itself (a raise names its kind)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call = node.exc
            if any(k.arg == "exit_code" for k in call.keywords):
                found.append(f"bundle/{rel}:{node.lineno}: passes exit_code= (raise the kind that has it)")
            if isinstance(call.func, ast.Name) and call.func.id == "BundleError":
                found.append(f"bundle/{rel}:{node.lineno}: raises BundleError itself (name its kind)")
    return found


def test_every_raise_names_its_kind_and_no_code():
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        found += raises_naming_a_code_or_no_kind(path.read_text(), path.relative_to(PACKAGE_DIR).as_posix())
    assert not found, "raise a kind of bundle.errors (UsageError, InputError, NotFound ...):\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    'raise UsageError("--sim needs --rehearsal", exit_code=EXIT_USAGE)\n',
    'raise BundleError("something broke")\n',
])
def test_a_planted_raise_with_a_code_or_no_kind_is_found(code):
    assert raises_naming_a_code_or_no_kind(code, "commands/planted.py")


def test_each_kind_returns_the_code_the_reference_documents():
    from bundle import errors
    from bundle.stack.ready import StackNotReady, StackNotReadyInTime

    documented = {int(c) for c, _ in errors.EXIT_CODES if c.isdigit()}
    expected = {
        errors.Failed: errors.EXIT_FAILED, errors.NotReady: errors.EXIT_FAILED,
        errors.CommandFailed: errors.EXIT_FAILED, StackNotReady: errors.EXIT_FAILED,
        errors.UsageError: errors.EXIT_USAGE,
        errors.InputError: errors.EXIT_CONFIG, errors.ConfigError: errors.EXIT_CONFIG,
        errors.EnvironmentProblem: errors.EXIT_ENVIRONMENT, errors.EngineUnreachable: errors.EXIT_ENVIRONMENT,
        errors.DockerFailed: errors.EXIT_ENVIRONMENT, errors.NotFound: errors.EXIT_ENVIRONMENT,
        errors.CommandMissing: errors.EXIT_ENVIRONMENT,
        errors.TimedOut: errors.EXIT_TIMEOUT, errors.CommandTimedOut: errors.EXIT_TIMEOUT,
        StackNotReadyInTime: errors.EXIT_TIMEOUT,
    }
    for kind, code in expected.items():
        assert kind.exit_code == code, kind.__name__
        assert code in documented
    # every kind bundle.errors declares is held to a code above
    declared = {v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, errors.BundleError)}
    assert declared - {errors.BundleError} <= set(expected)
    # the two-sided kinds are still caught as what they also are
    assert issubclass(errors.CommandMissing, errors.CommandFailed)
    assert issubclass(errors.CommandTimedOut, errors.CommandFailed)
    assert issubclass(StackNotReadyInTime, errors.NotReady)


def test_the_command_line_returns_the_kinds_code(capsys):
    from bundle import cli

    # a bad -c is an input error the config loader raises before anything starts
    assert cli.main(["validate", "-c", "/nonexistent/bundle.yaml"]) == EXIT_CONFIG
    assert "/nonexistent/bundle.yaml" in capsys.readouterr().err
