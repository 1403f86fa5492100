"""The renders mount the JIT cache volume where it never hides the kernels layer's prebuilt modules:
FlashInfer's loader checks flashinfer/data/aot/ in the image before its writable cache, so a fresh
(empty) volume still finds them (docs/images.md, "The kernels layer")."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from bundle.targets.k8s import pods
from bundle.targets.slurm import script

REPO = Path(__file__).resolve().parents[1]
AOT = PurePosixPath("/opt/venv/lib/python3.12/site-packages/flashinfer/data/aot")


def _compose_cache_targets() -> dict[str, str]:
    """file:line -> where each compose file mounts the jit-cache volume (read as text: the files
    carry compose's own YAML tags)."""
    targets = {}
    for path in sorted((REPO / "compose").glob("*.yaml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*-\s*jit-cache:(/[^:\s]*)", line)
            if m:
                targets[f"{path.name}:{number}"] = m.group(1)
    return targets


def test_no_render_mounts_the_jit_cache_over_the_prebuilt_kernels():
    compose = _compose_cache_targets()
    assert {"pd.yaml", "tp4.yaml", "dp.yaml"} <= {k.split(":")[0] for k in compose}
    mounts = {**compose, "kubernetes": pods.JIT_CACHE_MOUNT, "slurm": script.JIT_CACHE_MOUNT}
    for where, target in mounts.items():
        target = PurePosixPath(target)
        assert target != AOT and target not in AOT.parents, f"{where}: {target} hides {AOT}"


def test_flashinfers_writable_cache_lies_in_the_volume_and_the_aot_folder_in_the_image():
    runtime = (REPO / "docker" / "runtime.Dockerfile").read_text()
    root = re.search(r"JIT_CACHE_ROOT=(\S+)", runtime).group(1)
    assert root.startswith(pods.JIT_CACHE_MOUNT + "/")
    assert "FLASHINFER_WORKSPACE_BASE=${JIT_CACHE_ROOT}/flashinfer" in runtime
    kernels = (REPO / "docker" / "kernels.Dockerfile").read_text()
    # Built into the package (env.FLASHINFER_AOT_DIR), not into the workspace the volume replaces.
    assert "FLASHINFER_WORKSPACE_BASE=/var/cache/kernels-build" in kernels
    assert "--mount=type=cache,target=/var/cache/kernels-build" in kernels
