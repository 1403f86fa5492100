"""The topologies as pictures, from the topology registry (bundle/topology.py) and the default
configuration: which servers run on which GPUs with what TP size, the router and its policy in
front, the port clients use, and for a disaggregated topology the KV cache's path between prefill
and decode. A topology added to the registry gets its picture; a GPU moved in defaults.yaml moves."""

from __future__ import annotations

from docsgen.svg import COLOURS, Canvas

GPU_W, GPU_H, GPU_GAP = 46, 40, 10
PAD = 3  # a server's box around its GPUs
WIDTH = 460


def _gpu_x(gpu: int, left: float) -> float:
    return left + gpu * (GPU_W + GPU_GAP)


def picture(topology, dep) -> str:
    roles = dep.roles(topology)
    host_gpus = 1 + max(g for t in _registry().TOPOLOGIES.values() for r in dep.roles(t) for g in r.gpus)
    left = (WIDTH - (host_gpus * (GPU_W + GPU_GAP) - GPU_GAP)) / 2
    router = dep.router(topology)
    canvas = Canvas(WIDTH, 372, f"The {topology.name} topology: {topology.summary}", f"topology-{topology.name}")
    canvas.text(12, 26, topology.name, size=18, weight="bold", anchor="start")

    # Clients, then the front door: the router, or the lone server.
    canvas.rect(WIDTH / 2 - 70, 10, 140, 30, **_colours("client"))
    canvas.text(WIDTH / 2, 30, "clients (OpenAI API)", size=12)
    server_top = 170
    if router is not None:
        canvas.arrow(WIDTH / 2, 40, WIDTH / 2, 92)
        canvas.text(WIDTH / 2 + 8, 72, f"port {dep.network.front_port}", size=11, anchor="start", fill="#616161")
        canvas.rect(WIDTH / 2 - 120, 94, 240, 46, **_colours("router"))
        canvas.text(WIDTH / 2, 113, "router (smg)" + (", PD mode" if topology.disaggregated else ""), weight="bold")
        canvas.text(WIDTH / 2, 131, f"policy: {router.policy}", size=11, fill="#424242")
    else:
        first = min(roles[0].gpus)
        middle = (WIDTH / 2 + _gpu_x(first, left) + 2 * GPU_W) / 2  # halfway along the arrow to the server
        canvas.text(middle + 10, 105, f"port {dep.network.front_port}", size=11, anchor="start", fill="#616161")

    # Each server: a box around its GPUs, named with its role and TP size.
    used = {}
    boxes = {}
    for role in roles:
        first, last = min(role.gpus), max(role.gpus)
        x = _gpu_x(first, left) - PAD
        w = _gpu_x(last, left) + GPU_W + PAD - x
        kind = role.service.role
        canvas.rect(x, server_top, w, 104, **_colours(kind))
        canvas.text(x + w / 2, server_top + 20, f"{role.name}: TP {role.tp_size}", weight="bold")
        boxes[role.name] = (x, w, kind)
        for gpu in role.gpus:
            used[gpu] = kind
        source = (WIDTH / 2, 140) if router is not None else (WIDTH / 2, 40)
        canvas.arrow(source[0], source[1], x + w / 2, server_top - 2)
    for gpu in range(host_gpus):
        kind = used.get(gpu, "idle")
        stroke, fill = COLOURS[kind]
        canvas.rect(_gpu_x(gpu, left), server_top + 44, GPU_W, GPU_H, stroke=stroke, fill="#ffffff", radius=4)
        canvas.text(_gpu_x(gpu, left) + GPU_W / 2, server_top + 62, "GPU", size=10, fill=stroke)
        canvas.text(_gpu_x(gpu, left) + GPU_W / 2, server_top + 77, str(gpu), size=12, weight="bold", fill=stroke)

    bottom = server_top + 104
    if topology.disaggregated:
        (px, pw, _), (dx, dw, _) = (boxes[r.name] for r in roles if r.service.role in ("prefill", "decode"))
        canvas.curve(f"M{px + pw / 2},{bottom} C{px + pw / 2},{bottom + 34} {dx + dw / 2},{bottom + 34} "
                     f"{dx + dw / 2},{bottom + 4}")
        backend = dep.section(topology).transfer_backend
        canvas.text(WIDTH / 2, bottom + 42, f"KV cache, prefill to decode: {backend}", size=11, fill="#424242")
    idle = host_gpus - len(used)
    note = f"one host, {host_gpus} GPUs" + (f" ({idle} idle)" if idle else "")
    canvas.text(WIDTH / 2, bottom + 62, note, size=11, fill="#616161")
    canvas.lines(WIDTH / 2, bottom + 82, topology.summary, width_px=WIDTH - 30, size=12)
    return canvas.svg()


def _colours(kind: str) -> dict:
    stroke, fill = COLOURS.get(kind, COLOURS["server"])
    return {"stroke": stroke, "fill": fill}


def _registry():
    from bundle import topology

    return topology


def pictures() -> list[str]:
    """Every topology of the registry, in its order, at the default configuration."""
    from bundle.config.loader import load_config

    dep = load_config(None)
    return [picture(topology, dep) for topology in _registry().TOPOLOGIES.values()]
