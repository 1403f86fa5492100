"""The documentation site's reference pages, generated from the code at build time (never committed):
`mkdocs build` runs docsgen/build.py through mkdocs-gen-files, which writes every page of PAGES."""

from bundle import modes
from bundle.config import loader
from bundle.rehearsal import registry as rehearsal_modes
from bundle.targets import sections

# The generators load the config like the command line does: with the wings' sections and the no-GPU
# modes (bundle/cli.py).
loader.install_sections(sections.SECTIONS)
modes.install(rehearsal_modes)
