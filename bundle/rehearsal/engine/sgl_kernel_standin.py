"""The stand-in `sgl_kernel` of the CPU engine rehearsal: every name the pinned SGLang imports from it,
each one raising if called.

PyPI has no CPU build of sglang-kernel, and the real one's CUDA extensions do not load without a GPU,
yet some SGLang modules import `sgl_kernel` unconditionally. With this package first on the path,
those imports succeed and SGLang's CPU paths (plain PyTorch, torch_native attention) run; a call into a
kernel fails loudly naming it instead of computing anything. Only the rehearsal image carries it
(docker/engine/sgl_kernel, on PYTHONPATH ahead of site-packages); a GPU image never does.

    python -m bundle.rehearsal.engine.sgl_kernel_standin SGLANG_DIR OUT_DIR   # regenerate from SGLang's sources

The names come from an AST scan of SGLang's own `from sgl_kernel... import ...` statements, so a new
SGLang pin that imports a name the stand-in lacks is found by tests/test_engine_standins.py.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections import defaultdict
from pathlib import Path

PACKAGE = "sgl_kernel"

_RUNTIME = '''\
"""Stand-in for sglang-kernel in the CPU engine rehearsal image ONLY (bundle/rehearsal/engine/sgl_kernel_standin.py
generated this file). Every name raises if called: SGLang takes its plain-PyTorch paths on CPU."""


class StandInKernel:
    """A kernel SGLang imports but must never call on the CPU engine."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: sgl_kernel stand-in (CPU engine rehearsal) has no kernels; "
                           "SGLang called a GPU kernel on the CPU path")

    def __getattr__(self, attr):
        # Module-level attribute reads (e.g. scalar_types.uint4b8) happen at import time; a stand-in
        # of the attribute keeps the import working and still raises if called.
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandInKernel(f"{self._name}.{attr}")

    def __repr__(self):
        return f"<sgl_kernel stand-in {self._name}>"
'''


def imported_names(sglang_dir: Path) -> dict[str, set[str]]:
    """{module: names} for every `from sgl_kernel[.sub] import a, b` and `import sgl_kernel.sub` in
    SGLang's sources (module '' = the package itself)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(sglang_dir.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if PACKAGE not in text:  # most files: no need to parse them
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SGLang's own invalid escapes, not ours
                tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top, _, sub = node.module.partition(".")
                if top == PACKAGE:
                    found[sub].update(a.name for a in node.names if a.name != "*")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top, _, sub = alias.name.partition(".")
                    if top == PACKAGE and sub:
                        found.setdefault(sub, set())
    found.setdefault("", set())
    return dict(found)


def missing_names(standin_dir: Path, wanted: dict[str, set[str]]) -> list[str]:
    """`module.name` for every import of `wanted` the stand-in package under standin_dir lacks."""
    missing = []
    for module, names in sorted(wanted.items()):
        parts = [p for p in module.split(".") if p]
        pkg = standin_dir / PACKAGE / Path(*parts) if parts else standin_dir / PACKAGE
        source = pkg / "__init__.py"
        if not source.exists():
            missing.append(f"{PACKAGE}.{module}" if module else PACKAGE)
            continue
        defined = _defined(source)
        missing += [f"{PACKAGE}{'.' + module if module else ''}.{n}" for n in sorted(names - defined)]
    return missing


def _defined(source: Path) -> set[str]:
    tree = ast.parse(source.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def write_standin(wanted: dict[str, set[str]], out_dir: Path) -> None:
    """One package per imported module path: each name a StandInKernel (or a submodule)."""
    root = out_dir / PACKAGE
    root.mkdir(parents=True, exist_ok=True)
    (root / "_standin.py").write_text(_RUNTIME)
    modules = sorted(set(wanted) | {".".join(m.split(".")[:i]) for m in wanted if m
                                    for i in range(1, m.count(".") + 1)})
    for module in modules:
        parts = [p for p in module.split(".") if p]
        pkg = root.joinpath(*parts) if parts else root
        pkg.mkdir(parents=True, exist_ok=True)
        children = sorted({m.split(".")[len(parts)] for m in modules
                           if m and m.split(".")[:len(parts)] == parts and m.count(".") >= len(parts)
                           and m != module})
        names = sorted(wanted.get(module, set()) - set(children))
        lines = [f'"""Stand-in {PACKAGE}{"." + module if module else ""} (CPU engine rehearsal only)."""',
                 f"from {PACKAGE}._standin import StandInKernel", ""]
        if not parts:
            lines += ['__version__ = "0.0.0+cpu-rehearsal-standin"', ""]
        for child in children:
            lines.append(f"from {PACKAGE}{'.' + module if module else ''} import {child}  # noqa: F401")
        lines += [f'{n} = StandInKernel("{PACKAGE}{"." + module if module else ""}.{n}")' for n in names]
        (pkg / "__init__.py").write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bundle.rehearsal.engine.sgl_kernel_standin SGLANG_DIR OUT_DIR", file=sys.stderr)
        return 2
    write_standin(imported_names(Path(argv[0])), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
