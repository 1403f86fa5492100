"""What makes two bench runs unlike beyond their shape (comparable.py): the method and what ran it.

Two runs are compared in percent only when they used the same dataset, range ratio, lengths,
prompts per level and seed, share a concurrency level (each level is compared with its own), and ran on the same GPUs (or none) and image. Any
difference is named as "what, then vs now" ("range ratio 0.0 vs 1.0"): a percentage across one is a
difference of method, not of speed (a 0.0 range-ratio run against a 1.0 one read as +298.9%). A value
an older record does not carry is unknown, not different."""

from __future__ import annotations


def _config(key: str):
    return lambda record: (record.get("config") or {}).get(key)


def _image(record: dict):
    image = record.get("image") or {}
    ref = image.get("id") or image.get("ref")
    return ref if ref is None else f"{ref[:19]}" + (f" (lock {record['lock_hash'][:12]})" if record.get("lock_hash") else "")


def _gpus(record: dict):
    gpus = record.get("gpus")
    if gpus is None:
        return None
    names = sorted(set(gpus))
    return f"{len(gpus)}x {', '.join(names)}" if gpus else "no GPU"


def _levels(record: dict):
    value = (record.get("config") or {}).get("concurrency")
    return None if value is None else " ".join(str(c) for c in value)


# (name in a message, how it is read from a record)
ASPECTS = (
    ("dataset", _config("dataset")),
    ("range ratio", _config("range_ratio")),
    ("input length", _config("input_len")),
    ("output length", _config("output_len")),
    ("prompts per concurrency", _config("prompts_per_concurrency")),
    ("seed", _config("seed")),
    ("GPUs", _gpus),
    ("image", _image),
)


def differences(record: dict, other: dict) -> list[str]:
    """Each aspect in which `other` (then) and `record` (now) differ: "range ratio 0.0 vs 1.0"."""
    out = []
    mine, theirs = (record.get("config") or {}).get("concurrency"), (other.get("config") or {}).get("concurrency")
    if mine and theirs and not set(mine) & set(theirs):
        # Levels are compared one by one: runs are unlike only when they share no level.
        out.append(f"concurrency {_levels(other)} vs {_levels(record)}")
    for name, read in ASPECTS:
        now, then = read(record), read(other)
        if now is None or then is None or now == then:
            continue
        out.append(f"{name} {then} vs {now}")
    return out
