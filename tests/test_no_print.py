"""Nothing below bundle/commands/ prints on its own: a service takes a Reporter (bundle/reporter.py)
from the verb and prints only on it, so its text can be sent elsewhere (stderr under --json, a test's
recorder) and no module behind a verb writes to stdout unasked. Held by an AST scan for calls of the
builtin print(); planted into a copy of the package, a print is found."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from bundle.paths import PACKAGE_DIR

# Where print() stays, and why: a module (every print in it) or module::function.
ALLOWED = {
    "cli.py::main": "the command line's last word: an interrupt's one line on stderr, after the verb has "
                    "ended (a BundleError prints on a rich stderr console beside it)",
    "doctor/allreduce_probe.py": "a standalone script run with the host's Python or inside the worker image, where "
                            "the bundle package need not be installed",
    "doctor/nixl_probe.py": "the same, for NIXL",
    "verify/bench_launcher.py": "runs inside the bench container around bench_serving",
    "verify/census_probe.py": "a standalone script run inside the rehearsal image, where SGLang is and the bundle "
                              "package is not (its progress goes to stderr)",
    "images/audit/probe.py": "runs inside a container of the image under audit, with that image's Python",
    "rehearsal/engine/sgl_kernel_standin.py::main": "its own `python -m` command line (regenerates the stand-in)",
    "images/requirements.py::main": "its own `python -m` command line (`make lock`)",
    "images/derived.py::command_line": "the derived images' own `python -m <module> image | tag` command line",
    "rules/argspec.py::write_specs": "`python -m bundle.rules.argspec`, which regenerates the parser snapshots",
    "stack/engine.py::_print_progress": "build_image's default progress (its callers show progress without "
                                        "asking); still the one the derived images' builds get: to route",
    "log_lines.py::_debug": "--debug's word on outside text it skipped, from a floor below every reporter "
                            "(the readers are called from the readiness wait's polls)",
    "stack/engine.py::_cli_build_lines": "BUNDLE_DEBUG's echo of each docker command before it runs, as "
                                         "python-on-whales' debug mode does for its own",
    "run.py::_show": "BUNDLE_DEBUG's echo of each outside command before it runs, on stderr",
}


def prints(package: Path) -> list[str]:
    """Every print() call under `package` outside commands/ and ALLOWED, as path:line (function)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("commands/") or rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text())
        for function, node in _calls(tree, None):
            if f"{rel}::{function}" not in ALLOWED:
                found.append(f"bundle/{rel}:{node.lineno} ({function or 'module level'})")
    return found


def _calls(node: ast.AST, function: str | None):
    """(the top-level function it is in, the call) for each print() call under `node`."""
    for child in ast.iter_child_nodes(node):
        inner = function
        if function is None and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            inner = child.name
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "print":
            yield inner, child
        yield from _calls(child, inner)


def test_nothing_below_the_verbs_prints_but_through_a_reporter():
    found = prints(PACKAGE_DIR)
    assert not found, "print() below bundle/commands/ (take a Reporter from the verb, or add the exception " \
                      "with its reason to ALLOWED):\n" + "\n".join(found)


def test_every_exception_still_names_a_print(tmp_path):
    """An exception whose print went away is a hole left open: it is removed with it."""
    stale = []
    for key in ALLOWED:
        rel, _, function = key.partition("::")
        calls = list(_calls(ast.parse((PACKAGE_DIR / rel).read_text()), None))
        if not any(function in ("", name) for name, _ in calls):
            stale.append(key)
    assert not stale, f"ALLOWED names no print here any more: {stale}"


def test_a_print_planted_in_a_service_or_beside_an_allowed_one_is_found(tmp_path):
    copy = tmp_path / "bundle"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    service = copy / "service" / "bench.py"
    service.write_text(service.read_text() + "\n\ndef planted():\n    print('progress')\n")
    engine = copy / "stack" / "engine.py"
    engine.write_text(engine.read_text() + "\nprint('at import')\n")
    assert prints(copy) == [f"bundle/service/bench.py:{len(service.read_text().splitlines())} (planted)",
                            f"bundle/stack/engine.py:{len(engine.read_text().splitlines())} (module level)"]
