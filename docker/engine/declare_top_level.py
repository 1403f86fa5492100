"""Write top_level.txt into every installed distribution that has none, naming exactly the top-level
names Python's importlib.metadata infers for it, so `packages_distributions()` reads one small file per
distribution instead of checking that every file its RECORD lists exists.

Run once at the rehearsal image's build (docker/rehearsal.Dockerfile). Why: transformers calls
`importlib.metadata.packages_distributions()` when it is imported, and 82 of this image's
distributions (those uv installs from wheels without top_level.txt) make Python 3.12 stat every file
of their RECORD: 33,510 stat calls. Inside a container on a fuse-overlayfs engine (this project's CI)
each goes to the FUSE daemon: 3.8 s of one core per process, and 3 s of every fresh container's
`import sglang.benchmark.serving` (17.6 -> 14.6 s measured 2026-12-04). Every SGLang server process
and every bench_serving level of a rehearsal pays it. The mapping it returns is unchanged: the names
written are the ones it would have inferred (compared after writing: the build fails if it changed).

Only the rehearsal image runs this; a GPU image's site-packages are left as installed.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path


def main() -> None:
    before = metadata.packages_distributions()
    written = 0
    for dist in metadata.distributions():
        if dist.read_text("top_level.txt") is not None:
            continue
        # The same inference packages_distributions() makes for a distribution without the file.
        names = sorted(set(metadata._top_level_inferred(dist)))
        if names:
            (Path(dist._path) / "top_level.txt").write_text("".join(f"{name}\n" for name in names))
            written += 1
    after = metadata.packages_distributions()
    same = {k: sorted(v) for k, v in before.items()} == {k: sorted(v) for k, v in after.items()}
    if not same:
        raise SystemExit("packages_distributions() changed: top_level.txt must only declare what was inferred")
    print(f"top_level.txt declared for {written} distributions; packages_distributions() unchanged")


if __name__ == "__main__":
    main()
