"""levers.pcie_safe_collectives, decided for this host: forced by the config, or (auto) measured by
doctor's P2P topology and the NCCL probe over each server's GPUs, with P2P on and off.

`bundle launch` calls `decide_for_host` before it renders (the GPUs are still free then); the
doctor's `nccl` check calls `probe_groups` and `nccl_check.decide` the same way. Without a GPU, or
with nothing to run the probe in, auto takes the safe setting and the reason says why.
"""

from __future__ import annotations

from bundle.config.levers import Collectives, unprobed_collectives
from bundle.config.model import Levers
from bundle.doctor import nccl_check, nvidia_smi
from bundle.errors import EnvironmentProblem


def _image_here(image: str | None) -> bool:
    if not image:
        return False
    from bundle.stack import engine

    try:
        engine.require_engine()
        return engine.image_facts(image) is not None
    except EnvironmentProblem:
        return False


def where_to_probe(image: str | None) -> str | None:
    """'image' (the worker image is here), 'host' (a CUDA torch in this Python), or None."""
    if _image_here(image):
        return "image"
    if nccl_check.host_python_can_probe():
        return "host"
    return None


def probe_groups(groups: dict[str, tuple[int, ...]], *, image: str | None, where: str,
                 runner=None) -> dict[str, dict[str, nccl_check.NcclRun]]:  # pragma: no cover - gpu
    """Each group of two GPUs or more, probed with P2P on and then off. `runner(gpus, p2p)` is for
    tests; by default the probe runs in the image or on the host, as `where` says."""
    if runner is None:
        def runner(gpus, p2p):
            if where == "image":
                return nccl_check.run_in_image(image, gpus, p2p)
            return nccl_check.run_on_host(gpus, p2p)
    runs = {}
    for name, gpus in groups.items():
        if len(gpus) < 2:
            continue
        runs[name] = {p2p: runner(tuple(gpus), p2p) for p2p in ("on", "off")}
    return runs


def topology_links(groups: dict[str, tuple[int, ...]], topology: nvidia_smi.Topology) -> dict[str, list[str]]:
    """Doctor's P2P probe, per group: the `nvidia-smi topo -m` link of each GPU pair."""
    return {name: [f"{a}-{b} {code}" for a, b, code in topology.pairs(tuple(gpus))] for name, gpus in groups.items()}


def decide_for_host(levers: Levers, groups: dict[str, tuple[int, ...]], *, image: str | None,
                    rehearsal: bool = False, probe=None) -> Collectives:
    """The decision a launch renders. `probe(groups) -> runs` is for tests."""
    if levers.pcie_safe_collectives != "auto":
        return unprobed_collectives(levers)
    if rehearsal:
        return unprobed_collectives(levers, "a rehearsal runs on CPU (the engine or the simulator): no GPU to probe")
    if not any(len(g) >= 2 for g in groups.values()):
        return Collectives(False, "probe", "no server spans two GPUs: no all-reduce to make safe")
    try:
        topology = nvidia_smi.query_topology()
    except nvidia_smi.NvidiaSmiUnavailable as exc:
        return unprobed_collectives(levers, f"no GPU facts here ({exc})")
    except ValueError as exc:
        return unprobed_collectives(levers, f"nvidia-smi topo -m was unreadable ({exc})")
    links = topology_links(groups, topology)
    if probe is None:
        where = where_to_probe(image)
        if where is None:
            nvlink = all(len(topology.nvlink_pairs(tuple(g))) == len(topology.pairs(tuple(g))) > 0
                         for g in groups.values() if len(g) >= 2)
            if nvlink:
                # The known hangs are PCIe-only boxes; NVLink between every pair is P2P's home ground.
                return Collectives(False, "probe", "NVLink between every pair of GPUs of every server "
                                   "(nvidia-smi topo -m); the NCCL probe had nothing to run in",
                                   {"groups": {}, "links": links})
            return unprobed_collectives(levers, "neither the worker image nor a CUDA-enabled torch in this "
                                                "host's Python is here to run the NCCL probe in, and the GPUs "
                                                "are not all joined by NVLink")
        runs = probe_groups(groups, image=image, where=where)  # pragma: no cover - gpu
    else:
        runs = probe(groups)
    return nccl_check.decide(runs, links)
