"""Contract with the pinned SGLang: the patch point exists as the overlay expects, and the
installed overlay really swaps it in a fresh interpreter (through its .pth), only when enabled."""

import ast
import importlib
import importlib.util
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from sglang_sm120_kernels import hook, testing
from sglang_sm120_kernels import sparse_mla_decode as smd

pytestmark = [pytest.mark.contract, pytest.mark.slow]  # slow: the second tier of `make test`

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
CALLER_MODULE = "sglang.kernels.ops.attention.flash_mla_sm120"


def test_pinned_sglang_has_the_patch_point_with_our_signature():
    import sglang

    assert sglang.__version__ == "0.5.23"
    module = importlib.import_module(hook.TARGET_MODULE)
    theirs = inspect.signature(getattr(module, hook.TARGET_ATTR))
    ours = inspect.signature(smd.flash_mla_sparse_decode_triton)
    replacement = inspect.signature(hook.make_replacement(getattr(module, hook.TARGET_ATTR)))
    describe = lambda sig: [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    assert describe(theirs) == describe(ours) == describe(replacement)
    assert Path(module.__file__).as_posix().endswith("sglang/" + testing.SGLANG_KERNEL_RELPATH.as_posix())


def test_sglangs_caller_looks_the_function_up_at_call_time():
    """`flash_mla_with_kvcache_sm120` must import the name inside its body (so a module attribute
    swapped at start is what it calls), on its SGLANG_SM120_FLASHMLA_BACKEND == "triton" branch."""
    spec = importlib.util.find_spec(CALLER_MODULE)
    tree = ast.parse(Path(spec.origin).read_text())
    func = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "flash_mla_with_kvcache_sm120"
    )
    triton_branch = next(
        n for n in ast.walk(func)
        if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value == "triton" for c in n.test.comparators)
    )  # fmt: skip
    imports = [
        n for n in ast.walk(triton_branch)
        if isinstance(n, ast.ImportFrom) and n.module == hook.TARGET_MODULE
        and any(a.name == hook.TARGET_ATTR and a.asname is None for a in n.names)
    ]  # fmt: skip
    assert imports, "the triton branch no longer imports the decode function at call time"
    assert "SGLANG_SM120_FLASHMLA_BACKEND" in Path(spec.origin).read_text()
    # Nobody else in sglang binds the name at import time before the hook could patch it.
    root = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
    binders = [
        p.relative_to(root).as_posix() for p in root.rglob("*.py")
        if hook.TARGET_ATTR in p.read_text(errors="ignore")
    ]  # fmt: skip
    assert sorted(binders) == [
        "kernels/ops/attention/flash_mla_sm120.py",
        "kernels/ops/attention/flash_mla_sm120_triton.py",
    ]


def test_replacement_hands_unsupported_layouts_back_to_sglang():
    calls = []

    def original(*args):
        calls.append(args)
        return "sglang's"

    replacement = hook.make_replacement(original)
    case = testing.make_case(1, 16, 64, seed=2)
    v41 = torch.zeros(2, 256 * 528, dtype=torch.uint8).view(2, 256, 1, 528)
    assert replacement(case.q, v41, case.indices, None, None, 512, 0.04) == "sglang's"
    assert len(calls) == 1 and calls[0][1] is v41


def test_install_is_a_no_op_unless_enabled():
    before = list(sys.meta_path)
    assert hook.install({}) is False
    assert hook.install({hook.ENV_VAR: "0"}) is False
    assert sys.meta_path == before


@pytest.fixture(scope="module")
def installed_overlay(tmp_path_factory) -> Path:
    """The overlay as the image installs it: a wheel, pip-installed into a site directory."""
    tmp = tmp_path_factory.mktemp("overlay")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"),
         str(KERNELS_DIR)], check=True, capture_output=True,
    )  # fmt: skip
    wheel = next((tmp / "dist").glob("sglang_sm120_kernels-*.whl"))
    site = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert (site / "sglang_sm120_kernels_overlay.pth").is_file()
    return site


PROBE = textwrap.dedent(
    """
    import site, sys
    site.addsitedir(sys.argv[1])  # processes the overlay's .pth exactly as at interpreter start
    import sglang_sm120_kernels
    assert sglang_sm120_kernels.__file__.startswith(sys.argv[1]), sglang_sm120_kernels.__file__
    loaded_early = [m for m in ("torch", "triton", "sglang") if m in sys.modules]
    from sglang.kernels.ops.attention.flash_mla_sm120_triton import flash_mla_sparse_decode_triton as f
    import sglang.kernels.ops.attention.flash_mla_sm120_triton as m
    print(getattr(f, "__bundle_overlay__", False), getattr(m, "_bundle_overlay_original", None) is not None,
          ",".join(loaded_early) or "-")
    """
)


def _probe(site: Path, env_value):
    import os

    env = {k: v for k, v in os.environ.items() if k != hook.ENV_VAR and k != "TRITON_INTERPRET"}
    if env_value is not None:
        env[hook.ENV_VAR] = env_value
    env["PYTHONPATH"] = ""  # the source tree must not shadow the installed copy
    res = subprocess.run([sys.executable, "-c", PROBE, str(site)], env=env, capture_output=True, text=True, check=False,
                         cwd=site, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.split()


def test_installed_overlay_swaps_the_function_when_enabled(installed_overlay):
    swapped, kept_original, loaded_early = _probe(installed_overlay, "1")
    assert (swapped, kept_original) == ("True", "True")
    assert loaded_early == "-", f"the .pth imported {loaded_early} at start"


def test_installed_overlay_leaves_sglang_alone_when_disabled(installed_overlay):
    assert _probe(installed_overlay, None)[:2] == ["False", "False"]
    assert _probe(installed_overlay, "0")[:2] == ["False", "False"]
