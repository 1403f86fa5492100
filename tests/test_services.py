"""The services below the verbs (bundle/service/): typed values in, never an argparse namespace; the
rehearsal's env computed in one place; one "the stack went away" check for bench and tune."""

from __future__ import annotations

import ast

import pytest

from bundle.errors import BundleError
from bundle.paths import PACKAGE_DIR
from bundle.service.bench import stack_gone
from bundle.service.prepare import prepare
from bundle.stack.docker import ContainerState
from bundle.rehearsal import registry as modes

pytestmark = pytest.mark.usefixtures("runs_dir")

def test_no_argparse_namespace_below_the_verbs():
    """A verb parses its flags and hands a service typed values: no module outside bundle/commands/
    builds, takes or annotates an argparse.Namespace (argparse itself serves the snapshots of SGLang's
    parser and the probes' own command lines)."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        if rel.startswith("commands/") or rel == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "Namespace"
                    and isinstance(node.value, ast.Name) and node.value.id == "argparse") \
                    or (isinstance(node, ast.ImportFrom) and node.module == "argparse"
                        and any(a.name == "Namespace" for a in node.names)):
                found.append(f"bundle/{rel}:{node.lineno}")
    assert not found, "argparse.Namespace below bundle/commands/ (a verb parses its flags and calls a " \
                      "service with typed values):\n" + "\n".join(found)


def test_prepare_adds_the_rehearsals_env_and_its_knobs_itself():
    plain = prepare("tp4").rendered.env
    sim = prepare("tp4", mode=modes.get("sim"), sim={"SIM_TPOT_MS": "7"}).rendered.env
    assert "REHEARSAL_IMAGE" not in plain and "SIM_TPOT_MS" not in plain
    assert sim["SIM_TPOT_MS"] == "7" and sim["REHEARSAL_IMAGE"]
    assert sim["MODEL_HOST_PATH"] != plain["MODEL_HOST_PATH"]  # the simulated model, not the checkpoint
    # What the caller adds goes over the rehearsal's own.
    assert prepare("tp4", mode=modes.get("sim"), extra_env={"MODEL_HOST_PATH": "/elsewhere"}).rendered.env[
        "MODEL_HOST_PATH"] == "/elsewhere"


def _state(service: str, state: str) -> ContainerState:
    return ContainerState(name=f"p-{service}-1", service=service, state=state, health="", exit_code=None,
                          restart_count=0, ports={})


class _Stack:
    def __init__(self, states):
        self._states = states

    def states(self):
        if isinstance(self._states, Exception):
            raise self._states
        return self._states


@pytest.mark.parametrize("states, expected", [
    ([_state("router", "running"), _state("prefill", "exited")], None),  # the front door serves: go on
    ([_state("router", "exited")], "router is exited"),
    ([_state("prefill", "running")], "router was removed (`bundle down`?)"),
    (BundleError("no engine"), "its containers can no longer be listed"),
])
def test_the_stack_went_away_says_why(states, expected):
    assert stack_gone(_Stack(states), "router") == expected


# The services a verb may call: bundle/service/'s, and the two stages that keep their own.
SERVICE_MODULES = ("bundle.service.", "bundle.tune.service", "bundle.upgrade.service")


def verbs_without_a_service(commands_dir) -> list[str]:
    """Each verb (bundle/commands/<verb>.py) that imports no service module."""
    found = []
    for path in sorted(commands_dir.glob("[a-z]*.py")):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        if not any(name.startswith(SERVICE_MODULES) for name in imported):
            found.append(path.stem)
    return found


def test_every_verb_goes_through_a_service():
    missing = verbs_without_a_service(PACKAGE_DIR / "commands")
    assert not missing, f"verbs that reach past the services (give each a module in bundle/service/): {missing}"


def test_a_verb_calling_the_images_directly_is_found(tmp_path):
    (tmp_path / "planted.py").write_text("def run(args):\n    from bundle.images import build\n    build.execute()\n")
    (tmp_path / "kept.py").write_text("def run(args):\n    from bundle.service import build as service\n")
    assert verbs_without_a_service(tmp_path) == ["planted"]


# What a verb may import: the services (bundle/service/, and the wings' own services), the command line's own
# helpers (bundle/commands/, the errors it exits with, the reporter it prints on, the tables and report
# renderers it prints with) and the registries it offers choices from. Everything else is a service's work.
VERB_IMPORTS = (
    *SERVICE_MODULES, "bundle.upgrade.check",  # `bundle upgrade --check`: the upgrade wing's other service
    "bundle.commands.", "bundle.errors", "bundle.reporter",
    "bundle.verify.tables", "bundle.doctor.report", "bundle.images.audit.report", "bundle.tune.report",
    "bundle.upgrade.render",  # presenters: a result as a table, lines or JSON
    "bundle.topology", "bundle.targets.registry", "bundle.rehearsal.registry", "bundle.modes", "bundle.doctor.registry",
    "bundle.images.audit.registry",  # registries
)


def verb_imports_beyond(commands_dir, allowed=VERB_IMPORTS) -> list[str]:
    """Each import of a module under bundle/commands/ that lands outside `allowed`, as file:line module (a
    `from M import N` lands in M.N: a module of M, or a name M holds)."""
    found = []
    for path in sorted(commands_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bundle":
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == "bundle"]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {name}" for name in names
                      if not any(name == a or name.startswith(a if a.endswith(".") else f"{a}.") for a in allowed)]
    return found


def test_the_verbs_import_only_services_their_own_helpers_and_the_registries():
    beyond = verb_imports_beyond(PACKAGE_DIR / "commands")
    assert not beyond, "a verb reaching past the services (move the work into one):\n" + "\n".join(beyond)


def test_a_verb_reaching_into_the_stack_is_found(tmp_path):
    (tmp_path / "planted.py").write_text("def run(args):\n    from bundle.stack import engine\n")
    (tmp_path / "kept.py").write_text("from bundle import topology as registry\nfrom bundle.service import down\n")
    assert verb_imports_beyond(tmp_path) == ["planted.py:2 bundle.stack.engine"]
