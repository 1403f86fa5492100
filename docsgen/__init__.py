"""The documentation site's reference pages, generated from the code at build time (never committed):
`mkdocs build` runs docsgen/build.py through mkdocs-gen-files, which writes every page of PAGES."""
