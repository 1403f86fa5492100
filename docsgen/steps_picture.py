"""A sequence of steps as a picture, drawn from text in a page's source (a `picture` block of
`name: what happens` lines, docsgen/pictures.py): the page's words and its picture are one text."""

from __future__ import annotations

import textwrap

from docsgen.svg import CHAR_EM, Canvas

WIDTH = 430
NAME_W = 112  # the step's box
TEXT_PX = WIDTH - NAME_W - 40


def parse(source: str) -> list[tuple[str, str]]:
    steps = []
    for line in source.strip().splitlines():
        name, sep, what = line.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"a step is 'name: what happens', not {line!r}")
        steps.append((name.strip(), what.strip()))
    return steps


def picture(source: str, title: str, ident: str) -> str:
    steps = parse(source)
    heights = [max(34, 14 + 16 * len(textwrap.wrap(what, int(TEXT_PX / (12 * CHAR_EM))))) for _, what in steps]
    canvas = Canvas(WIDTH, sum(heights) + 18 * (len(steps) - 1) + 20, title, ident)
    y = 10
    for i, ((name, what), height) in enumerate(zip(steps, heights)):
        canvas.rect(10, y, NAME_W, height, stroke="#3f51b5", fill="#e8eaf6")
        canvas.text(10 + NAME_W / 2, y + height / 2 + 5, f"{i + 1}. {name}", weight="bold")
        canvas.lines(NAME_W + 24, y + 20, what, width_px=TEXT_PX, size=12, anchor="start")
        y += height
        if i < len(steps) - 1:
            canvas.arrow(10 + NAME_W / 2, y, 10 + NAME_W / 2, y + 16)
            y += 18
    return canvas.svg()
