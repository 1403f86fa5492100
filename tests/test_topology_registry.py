"""Topologies are data: behaviour comes from the capabilities a registry entry states, never from its
name. A fourth topology the suite registers itself (one entry + a compose file + its rehearsal overlays,
made here from dp's) renders, passes the rules and renders for every target; and no topology name is
compared anywhere in bundle/ outside the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.lock import load_lock
from bundle.paths import PACKAGE_DIR, project_root
from bundle.targets import registry as targets
from bundle.render.compose import render
from bundle.rules.check import check
from bundle.topology import ROUTER, SERVER, Service, Topology
from bundle.rehearsal import registry as modes
from tests.conftest import write_config

pytestmark = pytest.mark.usefixtures("runs_dir")

# Comparisons with a topology name's spelling that are about something else: (file under bundle/,
# the other operand as written) -> why.
NOT_A_TOPOLOGY = {
    ("images/requirements.py", "layer"): "the image layer named pd (NIXL and smg), not a topology",
}


def _is_topology_literal(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_topology_literal(e, names) for e in node.elts)
    return False


def name_comparisons(source: str, rel: str, names: set[str]) -> list[str]:
    """Every `==`/`!=`/`in` comparison and `case` pattern of `source` against a topology name (or a
    tuple of them, as in `config_key == ("dp",)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                if not _is_topology_literal(operand, names):
                    continue
                others = [ast.unparse(o) for o in operands if o is not operand]
                if not any((rel, other) in NOT_A_TOPOLOGY for other in others):
                    found.append(f"bundle/{rel}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.MatchValue) and _is_topology_literal(node.value, names):
            found.append(f"bundle/{rel}:{node.lineno}: case {ast.unparse(node.value)}")
    return found


def comparisons_outside(registry_module: str, names: set[str]) -> list[str]:
    """name_comparisons over every module of bundle/ but the registry's own (a path under bundle/)."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        if rel != registry_module:
            found += name_comparisons(path.read_text(), rel, names)
    return found


def test_no_topology_name_is_compared_outside_the_registry():
    found = comparisons_outside("topology.py", set(registry.NAMES))
    assert not found, "behaviour keyed on a topology's name; ask the registry for a capability instead:\n" \
                      + "\n".join(found)


@pytest.mark.parametrize("code", [
    'if topology.name == "pd":\n    pass\n',
    'flag = entry.name in ("tp4", "dp")\n',
    'if service.config_key == ("dp",):\n    pass\n',
    'match t.name:\n    case "dp":\n        pass\n',
])
def test_the_name_check_finds_a_planted_comparison(code):
    assert name_comparisons(code, "render/planted.py", set(registry.NAMES))


# --- a fourth topology, registered by the suite --------------------------------------------------
# "duo": two copies of one server behind the router, reading dp's section of bundle.yaml. Its
# services have names no other topology uses, so nothing can find them by dp's spelling.
DUO = Topology(
    name="duo",
    summary="two copies of one server behind the router (a topology the test suite registers)",
    services=(Service("copy-0", SERVER, ("dp",), "DP_REPLICA0", replica=0),
              Service("copy-1", SERVER, ("dp",), "DP_REPLICA1", replica=1),
              Service("router", ROUTER)),
    front_service="router",
    config_section="dp",
    max_replicas=2,
    network="duo",
)
RENAMED = {"replica-0": "copy-0", "replica-1": "copy-1"}
DROPPED = ("replica-2", "replica-3")


def _duo_file(dp_file: Path) -> str:
    """dp's compose file (or overlay) as duo's: two copies renamed, the optional ones and their
    profiles gone, its own network."""
    from bundle.render import compose_files

    data = compose_files.read(dp_file)
    data.pop("name", None)
    services = {}
    for name, service in data["services"].items():
        if name in DROPPED:
            continue
        service = dict(service)
        if "depends_on" in service:
            service["depends_on"] = {RENAMED.get(k, k): v for k, v in service["depends_on"].items()
                                     if k not in DROPPED}
        if "networks" in service:
            service["networks"] = ["duo"]
        services[RENAMED.get(name, name)] = service
    data["services"] = services
    if "networks" in data:
        data["networks"] = {"duo": data["networks"]["dp"]}
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def duo(tmp_path, monkeypatch):
    """The project as it would be with duo added: its compose file and overlays beside the others."""
    home = tmp_path / "home"
    (home / "compose").mkdir(parents=True)
    root = project_root()
    for entry in root.iterdir():
        if entry.name != "compose":
            (home / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for entry in (root / "compose").iterdir():
        (home / "compose" / entry.name).symlink_to(entry)
    for prefix in ("", "rehearsal-", "rehearsal-engine-"):
        (home / "compose" / f"{prefix}duo.yaml").write_text(_duo_file(root / "compose" / f"{prefix}dp.yaml"))
    monkeypatch.setenv("BUNDLE_HOME", str(home))
    monkeypatch.setitem(registry.TOPOLOGIES, "duo", DUO)
    monkeypatch.setattr(registry, "NAMES", tuple(registry.TOPOLOGIES))
    return DUO


def test_a_registered_topology_renders_from_its_capabilities(duo, tmp_path):
    dep = load_config(write_config(tmp_path, "dp: {replicas: 2, tp_size: 2, gpus: [0, 1, 2, 3]}\n"))
    lock = load_lock()
    rendered = render(dep, duo, image=lock.image_ref, lock_hash=lock.hash)
    assert check(dep, rendered).errors == []
    # Replicated: the router's worker URLs name duo's own services; each copy gets its own group.
    assert rendered.env["DP_WORKER_URLS"] == "http://copy-0:30000 http://copy-1:30000"
    assert (rendered.env["DP_REPLICA0_VISIBLE_GPUS"], rendered.env["DP_REPLICA1_VISIBLE_GPUS"]) == ("0,1", "2,3")
    assert set(rendered.commands) == {"copy-0", "copy-1", "router"}
    assert rendered.server_args("copy-1")[rendered.server_args("copy-1").index("--tp-size") + 1] == "2"
    # The rehearsal overlays are duo's own.
    for mode in modes.MODES.values():
        rehearsed = render(dep, duo, image=lock.image_ref, lock_hash=lock.hash, mode=mode)
        assert rehearsed.compose_files[1].name in ("rehearsal-duo.yaml", "rehearsal-engine-duo.yaml")
    # Too many copies for duo's compose file is the rules' error, named at dp.replicas.
    over = load_config(write_config(tmp_path, "dp: {replicas: 3, tp_size: 2, gpus: [0, 1, 2, 3, 4, 5]}\n",
                                    "over.yaml"))
    errors = check(over, render(over, duo, image=lock.image_ref, lock_hash=lock.hash)).errors
    assert any("dp.replicas" in e and "compose/duo.yaml defines 2" in e for e in errors), errors


@pytest.mark.parametrize("target", targets.NAMES)
def test_a_registered_topology_renders_for_every_target(duo, tmp_path, target):
    """Every target in the registry (one added later included): its rules pass, what it renders has
    no problems, and it writes duo's files."""
    entry = targets.get(target)
    dep = load_config(write_config(tmp_path, "dp: {replicas: 2, tp_size: 2, gpus: [0, 1, 2, 3]}\n"))
    lock = load_lock()
    rendered = render(dep, duo, image=lock.image_ref, lock_hash=lock.hash)
    checker = entry.rules
    if checker is not None:
        assert checker.check(dep, duo).errors == []
    output = entry.renderer.for_target(dep, rendered)
    if checker is not None:
        assert checker.problems(output) == []
    written = output.write(tmp_path / target) if entry.writes_folder else [output.write()]
    assert written and all(path.is_file() for path in written)
    text = "\n".join(path.read_text() for path in written)
    assert "sglang-bundle-duo" in text  # the project of duo, not of dp


def test_the_readmes_topology_table_lists_exactly_the_registry():
    """README.md's first table (topology | what runs | front door), read from the file: one row per
    registered topology, in the registry's order, each naming its front service. A topology added
    to the registry without a row (dp once was) fails here."""
    lines = (Path(__file__).resolve().parents[1] / "README.md").read_text().splitlines()
    start = lines.index("| topology | what runs | front door |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert [row[0].strip("`") for row in rows] == list(registry.NAMES)
    for name, _what, front in rows:
        assert front == f"the {registry.get(name.strip('`')).front_service}", (name, front)
