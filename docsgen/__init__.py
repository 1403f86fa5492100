"""The documentation site's reference pages, generated from the code at build time (never committed):
`mkdocs build` runs docsgen/build.py through mkdocs-gen-files, which writes every page of PAGES."""

from bundle.config import loader
from bundle.targets import sections

# The generators load the config like the command line does: with the wings' sections (bundle/cli.py).
loader.install_sections(sections.SECTIONS)
