"""mkdocs hooks (mkdocs.yml, hooks:): the `picture` blocks of the guides (docsgen/pictures.py), inline
code kept whole at its hyphens (docsgen/nobreak.py), definitions ranked first in the search
(docsgen/search.py), and the not-found page styled under any base path.

A server answers a missing URL at any depth with 404.html, so no URL in it can be relative to the
page, and a root-absolute one (mkdocs' choice) misses a site served under a subpath. Its links are
made relative to the site's root (a script in docsgen/theme/404.html finds that root and makes it the
page's <base>), and its stylesheets are inlined: the browser fetches a linked one ahead of that script,
from the wrong folder. It carries no script of the theme (search needs the index from the root)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

# mkdocs loads this file by its path: the checkout (docsgen, bundle) must be importable from it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docsgen import nobreak, pictures, scored_figures, search  # noqa: E402

_STYLESHEET = re.compile(r'<link rel="stylesheet" href="\./([^"]+)">')
_THEME_SCRIPT = re.compile(r'<script src="\./[^"]+"></script>')


_SEARCH_FIRST: set[str] = set()  # "page.html#anchor" of each definition the search ranks first


def on_config(config):
    _SEARCH_FIRST.clear()
    fences = config["mdx_configs"].setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
    fences.append({"name": "picture", "class": "picture", "format": pictures.fence})
    return config


def on_page_markdown(markdown, page, config, files):
    return scored_figures.expand(markdown)  # the scored tables of reading-a-bench.md


def on_page_content(html, page, config, files):
    _SEARCH_FIRST.update(f"{page.url}#{anchor}" for anchor in search.marked(html))
    return nobreak.keep_hyphens(html)


def on_post_build(config):
    """After the search plugin wrote its index (hooks run after the configured plugins)."""
    index = Path(config["site_dir"]) / "search" / "search_index.json"
    found = search.boost(index, _SEARCH_FIRST)
    if found != len(_SEARCH_FIRST):
        raise RuntimeError(f"search index: {len(_SEARCH_FIRST) - found} of the {len(_SEARCH_FIRST)} "
                           "definitions marked search-first have no section in it")


def on_template_context(context, template_name, config):
    if template_name == "404.html":
        context["base_url"] = "."
    return context


def _inline(match: re.Match, folders: list[Path]) -> str:
    for folder in folders:
        path = folder / match.group(1)
        if path.is_file():
            return f"<style>{path.read_text(encoding='utf-8')}</style>"
    return match.group(0)


def on_post_template(output_content, template_name, config):
    if template_name != "404.html":
        return output_content
    folders = [Path(config["docs_dir"]), *map(Path, config["theme"].dirs)]
    output_content = _STYLESHEET.sub(lambda m: _inline(m, folders), output_content)
    return _THEME_SCRIPT.sub("", output_content)
