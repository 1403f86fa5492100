"""The rehearsal image as every mode names and builds it (bundle.api.Mode's image_tag and ensure_image)."""

from __future__ import annotations


def image_tag() -> str:
    # Imported here: naming the image reads its inputs only, and must not load the Docker client.
    from bundle.rehearsal.shared import image

    return image.image_tag()


def ensure_image(*, report) -> str:
    from bundle.rehearsal.shared import image

    return image.ensure_image(report=report)
