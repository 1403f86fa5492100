"""The pictures of the guides, drawn when the site is built (inline SVG: nothing to fetch, no script).
A page asks for one with a fenced block (registered by docsgen/hooks.py):

    ```picture
    topologies
    ```

`topologies`: every topology of the registry; `image-chain`: the layers `bundle build` walks;
`dashboard`: the Grafana dashboard's layout from its JSON model; `bench ...`: `bundle bench`'s plot of
figures written in the block (docsgen/bench_picture.py);
`steps TITLE` followed by `name: what happens` lines: a sequence drawn from the page's own text."""

from __future__ import annotations

import html
import re

from docsgen import bench_picture, dashboard_picture, image_chain_picture, steps_picture, topology_picture


def render(source: str) -> str:
    head, _, rest = source.strip().partition("\n")
    kind, _, argument = head.strip().partition(" ")
    if kind == "topologies":
        figures = topology_picture.pictures()
    elif kind == "image-chain":
        figures = [image_chain_picture.picture()]
    elif kind == "dashboard":
        figures = [dashboard_picture.picture()]
    elif kind == "bench":
        figures = [bench_picture.picture(source)]
    elif kind == "steps":
        ident = "steps-" + re.sub(r"[^a-z0-9]+", "-", argument.lower()).strip("-")
        figures = [steps_picture.picture(rest, argument, ident)]
    else:
        raise ValueError(f"unknown picture {kind!r}: topologies, image-chain, dashboard, bench or steps TITLE")
    return '<div class="pictures">' + "".join(f"<figure>{svg}</figure>" for svg in figures) + "</div>"


def fence(source, language, css_class, options, md, **kwargs) -> str:
    """pymdownx.superfences' custom fence: the picture, or the error in its place (a build under
    --strict fails on the warning the hook logs)."""
    try:
        return render(source)
    except Exception as exc:  # noqa: BLE001 - shown on the page and logged: the build must say which block
        import logging

        logging.getLogger("mkdocs.plugins.docsgen").warning("picture block %r: %s", source.strip()[:60], exc)
        return f"<pre>picture error: {html.escape(str(exc))}</pre>"
