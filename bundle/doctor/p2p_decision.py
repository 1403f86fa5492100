"""levers.pcie_safe_collectives, decided for this host: forced by the config, or (auto) measured by
doctor's P2P topology and the all-reduce probe over each server's GPUs, with P2P on and off.

`bundle launch` calls `decide_for_host` before it renders (the GPUs are still free then); the
doctor's `nccl` check calls `probe_groups` and `decide` the same way. Without a GPU, or
with nothing to run the probe in, auto takes the safe setting and the reason says why.
"""

from __future__ import annotations

from bundle import modes
from bundle.config.levers import Collectives, unprobed_collectives
from bundle.config.model import Levers
from bundle.doctor import allreduce_runs, nvidia_smi
from bundle.doctor.allreduce_runs import AllReduceRun
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
    if allreduce_runs.host_python_can_probe():
        return "host"
    return None


def probe_groups(groups: dict[str, tuple[int, ...]], *, image: str | None, where: str,
                 runner=None) -> dict[str, dict[str, AllReduceRun]]:  # pragma: no cover - gpu
    """Each group of two GPUs or more, probed with P2P on and then off. `runner(gpus, p2p)` is for
    tests; by default the probe runs in the image or on the host, as `where` says."""
    if runner is None:
        def runner(gpus, p2p):
            if where == "image":
                return allreduce_runs.run_in_image(image, gpus, p2p)
            return allreduce_runs.run_on_host(gpus, p2p)
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
                    no_gpu: bool = False, probe=None) -> Collectives:
    """The decision a launch renders. `probe(groups) -> runs` is for tests."""
    if levers.pcie_safe_collectives != "auto":
        return unprobed_collectives(levers)
    if no_gpu:
        return unprobed_collectives(levers, f"a {modes.word()} runs on CPU (the engine or the simulator): no GPU to probe")
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
    return decide(runs, links)


# ---- the decision from the runs ------------------------------------------------------------------------------
def decide(runs: dict[str, dict[str, AllReduceRun]], links: dict[str, list[str]] | None = None) -> Collectives:
    """levers.pcie_safe_collectives: auto for this host, from each group's runs {"on": ..., "off": ...}
    and doctor's P2P topology (group -> nvidia-smi link codes), as evidence.

    P2P (and SGLang's custom all-reduce, which needs P2P) only where every group's all-reduce with
    P2P finished, was right, used P2P between GPUs that can access each other, and was not slower
    than without it; anything else takes the safe setting.
    """
    evidence = {"groups": {name: {p2p: run.as_dict() for p2p, run in pair.items()} for name, pair in runs.items()},
                "links": links or {}}
    if not runs:
        return Collectives(True, "fallback", "no GPU group was probed: the safe setting", evidence)
    problems, notes = [], []
    for name, pair in runs.items():
        on, off = pair.get("on"), pair.get("off")
        if on is None or not on.ok:
            what = on.describe() if on else "not run"
            rescue = (f"; without P2P it {off.describe()}" if off is not None else "")
            problems.append(f"{name} (GPUs {','.join(map(str, on.gpus if on else ()))}): all-reduce with P2P {what}{rescue}")
            continue
        denied = sorted(pair for pair, ok in (on.peer_access or {}).items() if not ok)
        if denied:
            # SGLang's custom all-reduce maps its peers' buffers: without peer access it cannot work.
            problems.append(f"{name}: no peer access between GPUs {', '.join(denied)} (torch.cuda.can_device_access_peer)")
            continue
        if "P2P" not in on.kinds and on.transports:
            problems.append(f"{name}: NCCL chose {', '.join(sorted(on.kinds))} even with P2P allowed: P2P is "
                            f"not used here, so disabling it costs nothing")
            continue
        if off is not None and off.ok and on.busbw_gbps and off.busbw_gbps and on.busbw_gbps < off.busbw_gbps:
            problems.append(f"{name}: P2P is slower ({on.busbw_gbps:.1f} GB/s) than without it "
                            f"({off.busbw_gbps:.1f} GB/s)")
            continue
        notes.append(f"{name}: with P2P {on.describe()}"
                     + (f", without {off.describe()}" if off is not None else ""))
    if problems:
        return Collectives(True, "probe", "PCIe-safe collectives (NCCL_P2P_DISABLE=1, --disable-custom-all-reduce): "
                                          + "; ".join(problems), evidence)
    return Collectives(False, "probe", "P2P collectives (SGLang's default): " + "; ".join(notes), evidence)


def without_p2p_failures(runs: dict[str, dict[str, AllReduceRun]]) -> list[str]:
    """Groups whose all-reduce fails even with P2P off: the servers will not start there."""
    return [f"{name}: {pair['off'].describe()}" for name, pair in runs.items()
            if pair.get("off") is not None and not pair["off"].ok]
