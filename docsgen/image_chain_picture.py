"""The image chain as a picture, from the layer registry `bundle build` itself walks
(bundle.images.build.LAYERS): each layer on the one below it, with what it holds."""

from __future__ import annotations

from docsgen.svg import Canvas

WIDTH = 400


def picture(layers=None) -> str:
    if layers is None:
        from bundle.images.build import LAYERS as layers
    heights = [30 + 16 * len(_wrapped(layer.holds)) for layer in layers]
    canvas = Canvas(WIDTH, sum(heights) + 22 * (len(layers) - 1) + 40,
                    "The image chain: " + ", ".join(layer.name for layer in layers) + ", each built on the one before",
                    "image-chain")
    y = 10
    # The last layer (what runs) on top, the base at the bottom, as the layers stack.
    for i, (layer, height) in enumerate(zip(reversed(layers), reversed(heights))):
        top = i == 0
        canvas.rect(20, y, WIDTH - 40, height, stroke="#3f51b5", fill="#e8eaf6" if top else "#f5f6fc")
        canvas.text(36, y + 21, f"{len(layers) - i}. {layer.name}", weight="bold", anchor="start")
        canvas.lines(36, y + 40, layer.holds, width_px=WIDTH - 90, size=12, anchor="start")
        y += height
        if i < len(layers) - 1:
            canvas.arrow(WIDTH / 2, y + 20, WIDTH / 2, y + 2)
            canvas.text(WIDTH / 2 + 10, y + 15, "built on", size=11, anchor="start", fill="#616161")
            y += 22
    canvas.text(WIDTH / 2, y + 22, "one tag per layer, keyed by its inputs: an unchanged layer is reused",
                size=11, fill="#616161")
    return canvas.svg()


def _wrapped(text: str) -> list[str]:
    import textwrap

    from docsgen.svg import CHAR_EM

    return textwrap.wrap(text, int((WIDTH - 90) / (12 * CHAR_EM)))
