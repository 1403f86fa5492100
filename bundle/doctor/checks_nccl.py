"""A timed NCCL all-reduce over each server's GPUs, with P2P on and off: does P2P work on this
host, and what does levers.pcie_safe_collectives: auto choose here (bundle.doctor.collectives)."""

from __future__ import annotations

from bundle.doctor import collectives, nccl_check
from bundle.doctor.checks_gpu import _no_gpu_facts
from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn


def nccl_allreduce(ctx: HostContext) -> CheckResult:
    unavailable = _no_gpu_facts(ctx)
    if unavailable:
        return unavailable
    groups = {name: gpus for name, gpus in (ctx.gpu_groups or {"all": tuple(g.index for g in ctx.gpus)}).items()}
    if not any(len(g) >= 2 for g in groups.values()):
        return skip("no server of the topology spans two GPUs: no all-reduce to test")
    where = collectives.where_to_probe(ctx.image)
    if where is None:
        return skip("neither the worker image nor a CUDA-enabled torch in this host's Python is here",
                    "build or pull the image (`make image` / `bundle pull`), then run the doctor again")
    runs = collectives.probe_groups(groups, image=ctx.image, where=where)  # pragma: no cover - gpu
    return judge(runs, collectives.topology_links(groups, ctx.topology), ctx.pcie_safe_collectives)


def judge(runs, links, lever) -> CheckResult:
    """The check's verdict on probe runs (pure: tested on captured and synthetic probe outputs)."""
    decision = nccl_check.decide(runs, links)
    details = {"decision": decision.as_dict(), "lever": lever}
    broken = nccl_check.without_p2p_failures(runs)
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
                  f"(auto would use P2P here)", **details)
    return ok(f"{chosen}: {decision.reason}", **details)
