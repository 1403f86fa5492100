"""The driver's import graph, held to its layers: the packages and top-level modules of bundle/ are
declared here once, bottom first; a module imports only from its own unit or from a unit on a lower
layer, the modules import no circle, and none loads another by a string (importlib), which would hide
an arrow instead of removing it. Imports inside functions count like any other.

Each rule is shown to fail on a tree planted with one fault of its kind."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom first. A unit is a package (bundle/stack/) or a top-level module (bundle/lock.py); units on one
# layer are peers and do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "memo", "checks", "findings", "reporter", "log_lines", "modes", "rehearsal.simulator"),  # reporter: where services print; modes: the no-GPU modes as the core sees them (installed by the entry points); the simulator runs alone, inside the rehearsal image
    ("paths", "durations", "run"),  # run: the one funnel for outside commands
    ("topology", "monitoring"),
    ("config",),
    ("lock", "stack"),
    ("image_tags",),
    ("render",),
    ("rules",),
    ("api",),  # the typed interfaces the wings implement, over the values they take (config, render, rules)
    ("images",),
    ("rehearsal.shared",),  # what the modes share: the rehearsal image and what a rehearsal adds to the env
    ("rehearsal.engine", "rehearsal.sim"),  # the rehearsal modes, a wing each
    ("rehearsal",),  # their registry
    ("doctor", "upgrade"),
    ("verify",),
    ("service",),
    ("targets.k8s", "targets.slurm"),  # the wings: each a folder, peers that never import each other
    ("targets",),  # the registry of the wings and the compose target's entry (the core's own)
    ("tune",),
    ("commands",),
    ("cli",),
    ("__main__",),
)

# Loading a module by its name in a string, where that is the point: the command line imports only the
# verb it runs (0.35 s against 0.76 s to import every verb before `bundle status` starts).
STRING_IMPORTS_ALLOWED = {"bundle/cli.py": "the verb named on the command line"}


@dataclass(frozen=True)
class Edge:
    source: str  # dotted module
    target: str
    line: int
    path: str  # relative file path, for the message


def _modules(package_root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for path in sorted(package_root.rglob("*.py")):
        rel = path.relative_to(package_root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(modules: dict[str, Path], name: str) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def _resolve(modules: dict[str, Path], name: str) -> str | None:
    """The module of ours that a dotted name lands in (its longest known prefix), else None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports(package_root: Path) -> tuple[list[Edge], list[Edge]]:
    """Every import between modules of the package, and every import by a string (importlib's
    import_module, __import__), each with its file and line."""
    modules = _modules(package_root)
    top = package_root.name
    edges, strings = [], []
    for name, path in modules.items():
        rel = str(path.relative_to(package_root.parent))
        tree = ast.parse(path.read_text(), filename=rel)
        here = name if _is_package(modules, name) else name.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from bundle.verify import tables` lands in the module tables, not in the package.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("import_module", "__import__"):
                    strings.append(Edge(name, ast.unparse(node), node.lineno, rel))
                continue
            for target in targets:
                if target.split(".")[0] != top:
                    continue
                resolved = _resolve(modules, target)
                if resolved and resolved != name:
                    edges.append(Edge(name, resolved, node.lineno, rel))
    return edges, strings


# Packages whose sub-packages are units of their own (a wing each): `bundle.targets.k8s.rules` is in the
# unit targets.k8s, `bundle.targets.registry` in targets; the same for bundle/rehearsal/.
WINGED = ("targets", "rehearsal")


def unit_of(module: str, wings: frozenset[str] = frozenset()) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in WINGED and f"{parts[1]}.{parts[2]}" in wings:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "__init__"


def layer_index(layers=LAYERS) -> dict[str, int]:
    return {unit: i for i, layer in enumerate(layers) for unit in layer}


def problems(package_root: Path, layers=LAYERS, allowed=STRING_IMPORTS_ALLOWED) -> list[str]:
    """What breaks the layering: a unit not declared, an import up or sideways, a circle, a string
    import. Empty when the graph holds."""
    index = layer_index(layers)
    edges, strings = imports(package_root)
    out = []
    wings = frozenset(f"{w}.{d.name}" for w in WINGED if (package_root / w).is_dir()
                      for d in (package_root / w).iterdir() if (d / "__init__.py").is_file())
    unit_of_ = lambda module: unit_of(module, wings)  # noqa: E731
    units = {unit_of_(m) for m in _modules(package_root)} - {"__init__"}
    out += [f"{package_root.name}/{u}: not declared in LAYERS (put it on the layer of what it stands on)"
            for u in sorted(units - set(index))]
    for e in edges:
        a, b = unit_of_(e.source), unit_of_(e.target)
        if a == b or "__init__" in (a, b) or a not in index or b not in index:
            continue
        if index[b] >= index[a]:
            how = "up" if index[b] > index[a] else "sideways (a peer on the same layer)"
            out.append(f"{e.path}:{e.line}: {a} imports {e.target}, {how}")
    for e in strings:
        if e.path not in allowed:
            out.append(f"{e.path}:{e.line}: loads a module by a string ({e.target}): import it plainly")
    out += [f"circle: {' -> '.join(c)} -> {c[0]}" for c in circles(edges)]
    return out


def circles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_driver_holds_its_layers():
    assert problems(ROOT / "bundle") == []


def test_every_allowed_string_import_is_still_there():
    """An allowance outlives its reason silently otherwise."""
    _, strings = imports(ROOT / "bundle")
    assert {e.path for e in strings} == set(STRING_IMPORTS_ALLOWED)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "bundle"
    for rel, text in {"__init__.py": "", "errors.py": "", "stack/__init__.py": "",
                      "render/__init__.py": "", "commands/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_clean_tree_passes(tmp_path):
    root = _plant(tmp_path, {"render/compose.py": "from bundle.stack import docker\nfrom bundle import errors\n",
                             "stack/docker.py": "from ..errors import BundleError\n"})
    assert problems(root) == []


@pytest.mark.parametrize("where, text", [
    ("errors.py", "from bundle.commands import launch\n"),  # at the top of the module
    ("stack/docker.py", "def f():\n    from bundle.render.compose import render\n"),  # inside a function
    ("stack/docker.py", "from ..render import compose\n"),  # relative
])
def test_a_planted_upward_import_fails(tmp_path, where, text):
    root = _plant(tmp_path, {where: text, "commands/launch.py": "", "render/compose.py": "",
                             "stack/docker.py": "", **{where: text}})
    found = problems(root)
    assert len(found) == 1 and ", up" in found[0] and found[0].startswith(f"bundle/{where}:"), found


def test_a_planted_circle_fails(tmp_path):
    root = _plant(tmp_path, {"stack/runstate.py": "from bundle.stack import docker\n",
                             "stack/docker.py": "def f():\n    from bundle.stack.runstate import load\n"})
    assert problems(root) == ["circle: bundle.stack.docker -> bundle.stack.runstate -> bundle.stack.docker"]


def test_a_planted_string_import_fails(tmp_path):
    root = _plant(tmp_path, {"render/targets.py": "import importlib\n"
                                                  "def f():\n    return importlib.import_module('bundle.commands.x')\n"})
    found = problems(root)
    assert len(found) == 1 and "bundle/render/targets.py:3: loads a module by a string" in found[0], found


def test_a_planted_undeclared_unit_fails(tmp_path):
    root = _plant(tmp_path, {"gadgets/__init__.py": "from bundle import errors\n"})
    assert problems(root) == ["bundle/gadgets: not declared in LAYERS (put it on the layer of what it stands on)"]
