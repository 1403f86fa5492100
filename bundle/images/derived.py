"""Images the project derives locally from its own roots (the no-GPU modes' image, a target wing's node image,
the monitoring profile's Prometheus): each tagged by a hash of every file it is built from plus its
parent, so a build happens only when an input changed and never needs a registry.

One place for what the three share (their tags: bundle/image_tags.py): "build unless that tag exists" with BuildKit
(buildx where installed, the engine's own BuildKit otherwise) and the `image | tag` command line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle.errors import EXIT_USAGE, BundleError


@dataclass(frozen=True)
class Build:
    """One `docker build` of a derived image, labelled with the inputs' hash its tag carries."""

    tag: str
    what: str  # how progress lines name it: "monitoring", a mode's or a wing's own
    dockerfile: Path
    context: Path
    build_args: dict[str, str] = field(default_factory=dict)
    label: str = ""  # io.sglang-bundle.<label>-inputs
    also_tag: tuple[str, ...] = ()


def build_unless_present(build: Build, *, rebuild: bool = False, report: Callable[[str], None] = print,
                         detail: str = "") -> bool:
    """Build `build.tag` unless the engine already holds it (or `rebuild`); True when it built."""
    # Imported here: reading a tag (bundle validate, render) must not load the Docker client.
    from bundle.stack import engine

    if not rebuild and engine.image_exists(build.tag):
        return False
    # The build's own progress goes to `report` too: `python -m ... image` sends it to stderr (its
    # stdout is the tag), where the default, stdout, would turn minutes of building into silence.
    report(f"{build.what}: building {build.tag}{detail} ...")
    start = time.monotonic()
    args = {"context": build.context, "dockerfile": build.dockerfile, "tags": [build.tag, *build.also_tag],
            "build_args": build.build_args,
            "labels": {f"io.sglang-bundle.{build.label}-inputs": build.tag.split(":")[1]} if build.label else {}}
    if engine.buildx_available():
        engine.build_image(**args, use_buildx=True, progress=report)
    else:
        engine.build_image_engine_buildkit(**args, progress=report)
    report(f"{build.what}: built {build.tag} in {time.monotonic() - start:.0f} s")
    return True


def command_line(module: str, argv: list[str], *, ensure: Callable[..., str], tag: Callable[[], str],
                 can_rebuild: bool = False) -> int:
    """`python -m <module> image [--rebuild] | tag`: build if missing and print the tag, or only the tag.
    Progress goes to stderr, so `$(python -m ... image)` captures the tag alone."""
    try:
        if argv[:1] == ["image"]:
            extra = {"rebuild": "--rebuild" in argv} if can_rebuild else {}
            print(ensure(report=lambda s: print(s, file=sys.stderr, flush=True), **extra))
            return 0
        if argv[:1] == ["tag"]:
            print(tag())
            return 0
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"usage: python -m {module} image{' [--rebuild]' if can_rebuild else ''} | tag", file=sys.stderr)
    return EXIT_USAGE
