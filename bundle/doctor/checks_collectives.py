"""Timed NCCL all-reduces over each server's GPUs, with P2P on and off: does P2P work on this host,
what does levers.pcie_safe_collectives: auto choose here (bundle.doctor.p2p_decision), and what a
decode-sized all-reduce costs (bundle.doctor.allreduce_latency, kept for the bench's floor)."""

from __future__ import annotations

from bundle.doctor import allreduce_latency, p2p_decision
from bundle.doctor.checks_gpu import _no_gpu_facts
from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn
from bundle.errors import BundleError


def nccl_allreduce(ctx: HostContext) -> CheckResult:
    unavailable = _no_gpu_facts(ctx)
    if unavailable:
        return unavailable
    groups = {name: gpus for name, gpus in (ctx.gpu_groups or {"all": tuple(g.index for g in ctx.gpus)}).items()}
    if not any(len(g) >= 2 for g in groups.values()):
        return skip("no server of the topology spans two GPUs: no all-reduce to test")
    where = p2p_decision.where_to_probe(ctx.image)
    if where is None:
        return skip("neither the worker image nor a CUDA-enabled torch in this host's Python is here",
                    "build or pull the image (`make image` / `bundle pull`), then run the doctor again")
    runs = p2p_decision.probe_groups(groups, image=ctx.image, where=where)  # pragma: no cover - gpu
    record = allreduce_latency.record_of(runs)  # pragma: no cover - gpu
    try:  # pragma: no cover - gpu
        record["written_to"] = str(allreduce_latency.write(record))
    except (OSError, BundleError) as exc:  # pragma: no cover - gpu (no project folder, a read-only runs/)
        record["not_written"] = str(exc)
    return judge(runs, p2p_decision.topology_links(groups, ctx.topology), ctx.pcie_safe_collectives,
                 record)  # pragma: no cover - gpu


def judge(runs, links, lever, record: dict | None = None) -> CheckResult:
    """The check's verdict on probe runs (pure: tested on captured and synthetic probe outputs)."""
    decision = p2p_decision.decide(runs, links)
    details = {"decision": decision.as_dict(), "lever": lever}
    if record is not None:
        details["latency"] = record
    latency = _smallest_message(record, decision.pcie_safe)
    broken = p2p_decision.without_p2p_failures(runs)
    if broken:
        return fail(f"NCCL all-reduce fails even with P2P off: {'; '.join(broken)}",
                    "see details in --json (output tails); check the driver, `nvidia-smi topo -m` and "
                    "that no other process holds the GPUs", **details)
    if decision.pcie_safe and lever is False:
        return warn(f"{decision.reason}; but levers.pcie_safe_collectives: false forces P2P",
                    "set levers.pcie_safe_collectives: auto (or true) in bundle.yaml", **details)
    chosen = "auto chooses " + ("the PCIe-safe setting" if decision.pcie_safe else "P2P")
    if lever is True and not decision.pcie_safe:
        return ok(f"{decision.reason}; levers.pcie_safe_collectives: true forces the safe setting "
                  f"(auto would use P2P here){latency}", **details)
    return ok(f"{chosen}: {decision.reason}{latency}", **details)


def _smallest_message(record: dict | None, pcie_safe: bool) -> str:
    """"; 8 KiB all-reduce 13.9 us (nccl p2p on 4 GPUs)" for each group width: what a decode step pays
    per collective at batch 1, in the setting chosen."""
    if not record:
        return ""
    widths = sorted({len(g.get("gpus", ())) for g in record.get("groups", {}).values()})
    parts = []
    for width in widths:
        latency = allreduce_latency.latency_for(record, width, pcie_safe)
        if latency is not None and latency.seconds_by_bytes:
            smallest = min(latency.seconds_by_bytes)
            parts.append(f"{smallest // 1024} KiB all-reduce {latency.seconds_by_bytes[smallest] * 1e6:.1f} us "
                         f"({latency.setting} on {width} GPUs)")
    kept = f" (kept in {record['written_to']})" if record.get("written_to") else ""
    return ("; " + "; ".join(parts) + kept) if parts else ""
