"""Markdown pieces the generated pages share: table cells that stay cells, code spans that stay code."""

from __future__ import annotations

import html
import re

# Where a long name may break in a narrow column (before the next part, never inside a part): after a
# dot, slash, underscore, comma, colon, "=", "(" or "{". <wbr> adds no character: copying the code or
# searching for it finds the name whole.
_BREAKS = re.compile(r"([./_,:=({])(?=[^\s<])")

GENERATED_NOTE = ("!!! note \"Generated\"\n    This page is generated from {source} when the site is built; "
                  "change the source, not the page.\n")


def code(text: str) -> str:
    """A code span (HTML, so a `|` or a backtick inside cannot end the cell or the span) that a narrow
    column wraps after a dot, slash or underscore rather than running it off the page."""
    escaped = html.escape(str(text), quote=False).replace("|", "&#124;").replace('"', "&quot;")
    return "<code>" + _BREAKS.sub(r"\1<wbr>", escaped) + "</code>"


def prose(text: str) -> str:
    """Plain text in a table cell or paragraph: no emphasis from `_` or `*`, no cell break from `|`,
    no HTML from `<`; backticked spans stay code."""
    parts = str(text).split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # inside backticks
            out.append(code(part))
        else:
            out.append(html.escape(part).replace("|", "&#124;").replace("_", "&#95;<wbr>").replace("*", "&#42;")
                       .replace("\n", " "))
    return "".join(out)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Cells are inserted as given (callers pass them through code() or prose())."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def page(title: str, source: str, *body: str) -> str:
    return "\n".join([f"# {title}", "", GENERATED_NOTE.format(source=source), *body])
