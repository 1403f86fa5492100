"""The lock's pins, from docker/lock.toml through the lock reader (bundle.lock)."""

from __future__ import annotations

from docsgen.markdown import code, page, table


def _flat(prefix: str, value) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [row for key, child in value.items() for row in _flat(f"{prefix}.{key}" if prefix else key, child)]
    return [(prefix, value if isinstance(value, str) else repr(value))]


def reference(lock=None) -> str:
    if lock is None:
        from bundle.lock import load_lock

        lock = load_lock()
    sections = []
    for table_name, content in lock.data.items():
        rows = [[code(k), code(v) if v != "" else "(empty: not pinned yet)"]
                for k, v in _flat("", content) if not k.startswith("files.")]
        sections += [f"## `[{table_name}]`", "", table(["key", "pin"], rows) if rows else "Empty.", ""]
    return page("The lock's pins", "`docker/lock.toml`",
                f"The lock hash is `{lock.hash}`: the image tag `{lock.image_tag}` and the JIT cache volumes "
                "carry it. Change a pin in `docker/lock.toml`, run `make lock`, then `make image` "
                "([Images](../images.md)).", "", *sections)
