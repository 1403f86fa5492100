"""The rehearsal image: one image for both rehearsals (the real SGLang server on CPU, or the worker
simulator), the real router (smg) and SGLang's bench_serving.

docker/rehearsal.Dockerfile is built FROM the stand-in chain's pd layer (`bundle build --standin`),
named here from the lock through bundle/images/build.py's plan, and adds only the stand-in
`sgl_kernel`, the NIXL memory-type patch and the simulator. It is tagged by a hash of everything it
is built from (its parent's tag included), so `ensure_image()` builds only when an input changed.
What a rehearsal adds to the rendered env is bundle.rehearsal.shared.env's.

    python -m bundle.rehearsal.shared.image image      # build if missing, print the tag (make rehearsal-image)
"""

from __future__ import annotations

import sys
from pathlib import Path

from bundle.image_tags import inputs_tag
from bundle.images import derived
from bundle.paths import docker_dir, project_root
from bundle.stack import engine

IMAGE_REPOSITORY = "sglang-bundle/rehearsal"
PARENT_LAYER = "pd"  # the stand-in chain's layer with SGLang's closure, NIXL and smg


def dockerfile() -> Path:
    return docker_dir() / "rehearsal.Dockerfile"


def parent_image() -> str:
    """The stand-in chain's pd layer tag, as `bundle build --standin` names it from the lock."""
    from bundle.images.build import make_plan
    from bundle.lock import load_lock

    return make_plan(load_lock(), standin=True).layer(PARENT_LAYER).tag


def image_inputs() -> list[Path]:
    """Every file the image is built from (the Dockerfile's COPY sources and the Dockerfile)."""
    root = project_root()
    files = [dockerfile(), docker_dir() / "rehearsal.Dockerfile.dockerignore", docker_dir() / "entrypoint.sh",
             docker_dir() / "lock.toml", root / "bundle" / "__init__.py", root / "bundle" / "rehearsal" / "__init__.py"]
    for folder in (docker_dir() / "engine", root / "bundle" / "rehearsal" / "simulator"):
        files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


def image_tag(parent: str | None = None) -> str:
    """sglang-bundle/rehearsal:<hash of the inputs and the parent's tag>: a changed input gives a new tag."""
    return inputs_tag(IMAGE_REPOSITORY, image_inputs(), parent or parent_image())


def ensure_image(*, rebuild: bool = False, report=print) -> str:
    """Build the rehearsal image unless one with the current inputs' tag exists; return its tag."""
    parent = parent_image()
    tag = image_tag(parent)
    if not rebuild and engine.image_exists(tag):
        return tag
    if not engine.image_exists(parent):
        _build_parent(report)
    derived.build_unless_present(derived.Build(
        tag=tag, what="rehearsal", dockerfile=dockerfile(), context=project_root(),
        build_args={"PARENT_IMAGE": parent, "VERSION": tag.split(":")[1]}, label="rehearsal",
        also_tag=(f"{IMAGE_REPOSITORY}:latest",)),
        rebuild=True, report=report, detail=f" on {parent}")  # presence was checked above, before the parent
    return tag


def _build_parent(report) -> None:
    """The stand-in chain up to its pd layer, as `bundle build --standin` builds it (each layer that
    exists is reused): a fresh host's first rehearsal needs nothing run by hand before it."""
    from bundle.images.build import execute, make_plan, select_layers
    from bundle.lock import load_lock

    plan = make_plan(load_lock(), standin=True)
    names = [lp.name for lp in plan.layers]
    wanted = names[:names.index(PARENT_LAYER) + 1]
    report(f"rehearsal: building the stand-in chain it stands on first ({', '.join(wanted)}; `bundle build "
           "--standin`: about 15 minutes on a fresh host, reused afterwards) ...")
    execute(plan, select_layers(plan, wanted), report=report, with_sbom=False)


def main(argv: list[str]) -> int:
    return derived.command_line("bundle.rehearsal.shared.image", argv, ensure=ensure_image, tag=image_tag,
                                can_rebuild=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
