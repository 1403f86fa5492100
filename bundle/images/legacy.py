"""A layer's Dockerfile as the legacy builder can build it (`docker build` with DOCKER_BUILDKIT=0,
for a Docker CLI without buildx), which knows no `RUN --mount`.

The layers keep their package caches in BuildKit cache mounts (apt, pip, uv), and read their files
from the build context through bind mounts (one step, so one layer: on a fuse-overlayfs engine each
layer's export walks the whole tree below it). For the legacy builder:
- each `--mount=type=cache,target=DIR` is dropped and DIR is emptied at the end of the same RUN step
  (left as the empty folder BuildKit leaves): what a cache mount holds never reaches the image, only
  the cache between builds is lost;
- each `--mount=type=bind[,source=SRC],target=DST` (SRC from the context, `.` when left out) becomes a
  `COPY SRC DST` before the step, and DST is removed at its end: the image shows the same files (the
  copy stays hidden in the layer below).
Any other kind of mount (secret, ssh, a bind from another stage) cannot be emulated and is refused."""

from __future__ import annotations

import re
from pathlib import Path

from bundle.errors import InputError

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


def _mount(spec: str, where: str) -> tuple[str, str, str | None]:
    """(kind, target, bind source) of one `--mount=` spec the legacy builder can emulate."""
    options = dict(part.split("=", 1) if "=" in part else (part, "") for part in spec.split(","))
    kind = options.get("type", "bind")  # BuildKit's default kind
    target = options.get("target") or options.get("dst") or options.get("destination")
    if target and kind == "cache":
        return kind, target, None
    if target and kind == "bind" and "from" not in options:
        return kind, target, options.get("source") or options.get("src") or "."
    raise InputError(f"{where}: `--mount={spec}` cannot be built without BuildKit",
                     hint="install buildx (docker/install-buildx.sh), or use only cache mounts and bind "
                          "mounts of the build context")


def without_mounts(text: str, where: str = "Dockerfile") -> str:
    """`text` with every RUN's mounts emulated: cache folders emptied at the step's end, bind mounts
    copied in before it and removed at its end."""
    out = []
    for instruction in _instructions(text):
        head = instruction.lstrip()
        if not head.upper().startswith("RUN") or "--mount=" not in head:
            out.append(instruction)
            continue
        indent = instruction[: len(instruction) - len(head)]
        body = head[3:].lstrip()
        caches, binds = [], []
        while True:
            found = _MOUNT.match(body)
            if found is None:
                break
            kind, target, source = _mount(found["spec"], where)
            (caches if kind == "cache" else binds).append((target, source))
            body = body[found.end():]
        command = body.rstrip("\n")
        for target, source in binds:
            out.append(f"{indent}COPY {source} {target}\n")
        cleanup = []
        if binds:
            cleanup.append("rm -rf " + " ".join(target for target, _ in binds))
        if caches:
            # BuildKit leaves each mount point behind as an empty folder: so does this.
            folders = " ".join(target for target, _ in caches)
            cleanup.append(f"rm -rf {folders} && mkdir -p {folders}")
        out.append(f"{indent}RUN {command} \\\n && {' && '.join(cleanup)}\n")
    return "".join(out)


def rewrite(dockerfile: Path) -> None:
    """Rewrite a staged copy of a layer's Dockerfile in place for the legacy builder."""
    dockerfile.write_text(without_mounts(dockerfile.read_text(), where=str(dockerfile)))
