"""The pictures of the guides, drawn when the site is built (inline SVG: nothing to fetch, no script).
A page asks for one with a fenced block (registered by docsgen/hooks.py):

    ```picture
    topologies
    ```

`topologies`: every topology of the registry; `image-chain`: the layers `bundle build` walks;
`dashboard`: the Grafana dashboard's layout from its JSON model; `bench ...`: `bundle bench`'s plot of
figures written in the block (docsgen/bench_picture.py);
`steps TITLE` followed by `name: what happens` lines: a sequence drawn from the page's own text.
Any block may end with a `caption: ...` line: the figure's caption (say what run a plot shows)."""

from __future__ import annotations

import html
import re

from docsgen import bench_picture, dashboard_picture, image_chain_picture, steps_picture, topology_picture
from docsgen.markdown import prose


# The smallest text a picture may show, in CSS pixels: scaled down to a phone's column the dashboard's
# 10 px names were 4.9 px and the bench plot's 7 pt legend 3.5 px. A picture is never made narrower than
# what keeps its smallest text at this size; wider than the column, it scrolls in its own box.
LEGIBLE_PX = 8
_UNIT_PX = {"pt": 4 / 3, "px": 1.0, "": 1.0}


def legible(svg: str) -> str:
    """`svg` with a min-width that keeps its smallest text at LEGIBLE_PX or more when scaled down."""
    head = re.match(r"<svg\b[^>]*>", svg).group(0)
    width = re.search(r'\bwidth="([\d.]+)(pt|px|)"', head)
    view = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', head)
    sizes = [float(v) for v in re.findall(r'font-size[=:]\s*"?([\d.]+)(?:px)?', svg)]
    if not (width and view and sizes):
        raise ValueError("a picture's SVG needs a width, a viewBox and font sizes to be kept legible")
    natural_px = float(width.group(1)) * _UNIT_PX[width.group(2)]
    smallest_px = min(sizes) * natural_px / float(view.group(1))
    min_width = natural_px * LEGIBLE_PX / smallest_px  # wider than drawn when its text is smaller still
    return svg.replace(head, head[:-1] + f' style="min-width: {min_width:.0f}px">', 1)


def render(source: str) -> str:
    # A last line "caption: ..." is the figure's caption: what it shows, from which run.
    lines = source.strip().splitlines()
    caption = lines.pop()[len("caption:"):].strip() if lines[-1].startswith("caption:") else ""
    source = "\n".join(lines)
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
    shown = "".join(f'<figure><div class="picture-box">{legible(svg)}</div></figure>' for svg in figures)
    if caption:
        shown = shown.replace("</div></figure>", f"</div><figcaption>{prose(caption)}</figcaption></figure>")
    return '<div class="pictures">' + shown + "</div>"


def fence(source, language, css_class, options, md, **kwargs) -> str:
    """pymdownx.superfences' custom fence: the picture, or the error in its place (a build under
    --strict fails on the warning the hook logs)."""
    try:
        return render(source)
    except Exception as exc:  # noqa: BLE001 - shown on the page and logged: the build must say which block
        import logging

        logging.getLogger("mkdocs.plugins.docsgen").warning("picture block %r: %s", source.strip()[:60], exc)
        return f"<pre>picture error: {html.escape(str(exc))}</pre>"
