"""mkdocs-gen-files' script (mkdocs.yml, plugins: gen-files): writes every generated reference page
into the build, never into docs/."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

# mkdocs runs this file by path: the checkout (docsgen, bundle) must be importable from it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docsgen.pages import PAGES  # noqa: E402

for path, write in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as fh:
        fh.write(write())
