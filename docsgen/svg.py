"""A few SVG shapes for the documentation's pictures, drawn at build time (no script, nothing fetched:
the site stays offline). Text is wrapped by a character budget: the pictures use the system's sans
font, about 0.56 em a character."""

from __future__ import annotations

import html
import textwrap

CHAR_EM = 0.56  # the width of an average character of a sans font, in em

# The theme's colours (indigo primary) and one per role, with a light fill for boxes.
COLOURS = {
    "server": ("#3f51b5", "#e8eaf6"),
    "prefill": ("#e65100", "#fff3e0"),
    "decode": ("#00796b", "#e0f2f1"),
    "router": ("#455a64", "#eceff1"),
    "client": ("#616161", "#fafafa"),
    "idle": ("#9e9e9e", "#f5f5f5"),
}


class Canvas:
    """Shapes in drawing order; `svg()` gives the picture, which scales down to its column."""

    def __init__(self, width: int, height: int, title: str, ident: str):
        # `ident`: unique on the page (several pictures inline on one page share its id space).
        self.width, self.height, self.title, self.ident = width, height, title, ident
        self.parts: list[str] = []

    def rect(self, x, y, w, h, *, stroke="#616161", fill="#ffffff", radius=6, dashed=False) -> None:
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        self.parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{radius}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="1.5"{dash}/>')

    def text(self, x, y, value: str, *, size=13, weight="normal", anchor="middle", fill="#212121") -> None:
        self.parts.append(f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" '
                          f'text-anchor="{anchor}" fill="{fill}">{html.escape(value)}</text>')

    def lines(self, x, y, value: str, *, width_px: float, size=12, anchor="middle", fill="#424242",
              line_height=1.3) -> float:
        """`value` wrapped to `width_px`; returns the y below its last line."""
        budget = max(8, int(width_px / (size * CHAR_EM)))
        for i, line in enumerate(textwrap.wrap(value, budget) or [""]):
            self.text(x, y + i * size * line_height, line, size=size, anchor=anchor, fill=fill)
        return y + (len(textwrap.wrap(value, budget)) or 1) * size * line_height

    def arrow(self, x1, y1, x2, y2, *, colour="#616161", dashed=False, both=False) -> None:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        start = f' marker-start="url(#{self.ident}-arrow)"' if both else ""
        self.parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-width="1.6"'
                          f'{dash} marker-end="url(#{self.ident}-arrow)"{start}/>')

    def curve(self, d: str, *, colour="#616161", dashed=True) -> None:
        """A path (`d` in SVG path syntax) ending in an arrow."""
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.6"{dash} '
                          f'marker-end="url(#{self.ident}-arrow)"/>')

    def svg(self) -> str:
        defs = (f'<defs><marker id="{self.ident}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#616161"/>'
                '</marker></defs>')
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" role="img" aria-label="{html.escape(self.title)}" '
                f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">'
                f'<title>{html.escape(self.title)}</title>{defs}{"".join(self.parts)}</svg>')
