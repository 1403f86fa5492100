"""A layer's Dockerfile as the legacy builder can build it (`docker build` with DOCKER_BUILDKIT=0,
for a Docker CLI without buildx), which knows no `RUN --mount`.

The layers keep their package caches in BuildKit cache mounts (apt, pip, uv). For the legacy
builder each `--mount=type=cache,target=DIR` is dropped and DIR is emptied at the end of the same
RUN step (left as the empty folder BuildKit leaves): what a cache mount holds never reaches the image, so the image is the same; only the
cache between builds is lost. Any other kind of mount cannot be emulated and is refused."""

from __future__ import annotations

import re
from pathlib import Path

from bundle.errors import EXIT_CONFIG, BundleError

# One mount option with the spaces (and line continuation) after it.
_MOUNT = re.compile(r"--mount=(?P<spec>\S+)\s*(?:\\\n\s*)?")


def _instructions(text: str) -> list[str]:
    """The Dockerfile split into instructions, each with its continuation lines (comments and
    blank lines are instructions of their own, kept as they are)."""
    out: list[str] = []
    current = ""
    for line in text.splitlines(keepends=True):
        current += line
        if not line.rstrip("\n").endswith("\\"):
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def _cache_target(spec: str, where: str) -> str:
    options = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    if options.get("type") != "cache" or "target" not in options:
        raise BundleError(f"{where}: `--mount={spec}` cannot be built without BuildKit",
                          exit_code=EXIT_CONFIG,
                          hint="install buildx (docker/install-buildx.sh), or use only cache mounts")
    return options["target"]


def without_cache_mounts(text: str, where: str = "Dockerfile") -> str:
    """`text` with every RUN's cache mounts dropped and their folders emptied at the step's end."""
    out = []
    for instruction in _instructions(text):
        head = instruction.lstrip()
        if not head.upper().startswith("RUN") or "--mount=" not in head:
            out.append(instruction)
            continue
        indent = instruction[: len(instruction) - len(head)]
        body = head[3:].lstrip()
        targets = []
        while True:
            found = _MOUNT.match(body)
            if found is None:
                break
            targets.append(_cache_target(found["spec"], where))
            body = body[found.end():]
        command = body.rstrip("\n")
        folders = " ".join(targets)
        # BuildKit leaves each mount point behind as an empty folder: so does this.
        out.append(f"{indent}RUN {command} \\\n && rm -rf {folders} && mkdir -p {folders}\n")
    return "".join(out)


def rewrite(dockerfile: Path) -> None:
    """Rewrite a staged copy of a layer's Dockerfile in place for the legacy builder."""
    dockerfile.write_text(without_cache_mounts(dockerfile.read_text(), where=str(dockerfile)))
