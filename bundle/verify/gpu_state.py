"""The GPUs' state a verdict needs, as nvidia-smi reports it: power limit against its default, and the
PCIe link (width now against its max; the generation this host allows against the GPU's own max, since
an idle GPU trains its link down to gen 1 and the current generation after a level says nothing)."""

from __future__ import annotations

from bundle import log_lines
from bundle.doctor import nvidia_smi

FIELDS = ("index", "name", "power.limit", "power.default_limit", "pcie.link.gen.max", "pcie.link.gen.gpumax",
          "pcie.link.width.current", "pcie.link.width.max")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def parse(text: str, gpus: tuple[int, ...] | None = None) -> dict:
    """The worst of the GPUs in `gpus` (all when None): the lowest power limit with its default, the
    narrowest link and the lowest allowed generation, each with its max."""
    rows = []
    for line in log_lines.lines(text.strip()):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(FIELDS):
            continue
        row = dict(zip(FIELDS, parts))
        if gpus is not None and _number(row["index"]) not in {float(g) for g in gpus}:
            continue
        rows.append(row)
    if not rows:
        return {}
    state: dict = {"gpu_name": rows[0]["name"]}
    limits = [(_number(r["power.limit"]), _number(r["power.default_limit"])) for r in rows]
    limits = [pair for pair in limits if pair[0] is not None and pair[1] is not None]
    if limits:
        state["power_limit_w"], state["power_default_w"] = min(limits, key=lambda p: p[0] / p[1])
    for key, now, best in (("pcie_gen", "pcie.link.gen.max", "pcie.link.gen.gpumax"),
                           ("pcie_width", "pcie.link.width.current", "pcie.link.width.max")):
        pairs = [(_number(r[now]), _number(r[best])) for r in rows]
        pairs = [(int(a), int(b)) for a, b in pairs if a is not None and b is not None]
        if pairs:
            state[key] = min(pairs, key=lambda p: p[0] / p[1])
    return state


def read(gpus: tuple[int, ...] | None = None) -> dict:
    """The state now; {} where nvidia-smi is not there (a run with no GPU) or cannot answer."""
    try:
        return parse(nvidia_smi.query_fields(FIELDS), gpus)
    except nvidia_smi.NvidiaSmiUnavailable:
        return {}
