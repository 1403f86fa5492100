"""`bundle launch --target slurm` with a no-GPU mode (bundle.modes): the topology as one Slurm job on the
container cluster (cluster.py: a controller and two node daemons in containers made here), ready with the
meaning of ready of one box. The job script is the Slurm render target's (script.py), with the container
cluster's one substitution."""

from __future__ import annotations

from bundle import log_lines
from bundle.config.model import Deployment
from bundle.errors import BundleError, Failed, TimedOut, UsageError
from bundle import modes
from bundle.targets.slurm import config as slurm_config
from bundle.targets.slurm import script as slurm_render
from bundle.targets.slurm import rules as slurm_rules
from bundle.service.launch import LaunchRequest
from bundle.service.render import render_target
from bundle.reporter import Reporter, plain


def launch(request: LaunchRequest, *, dep: Deployment | None = None, reporter: Reporter) -> None:
    """`bundle launch TOPOLOGY --target slurm` with a no-GPU mode: submit the rendered job (to the
    container cluster, brought up first if it is not) and wait until ready through the front
    door, with the meaning of ready of one box: every server's /health, the router's readiness with
    all its workers, one real generation."""
    import json
    import time

    from bundle.durations import parse_duration
    from bundle.targets.slurm import job as jobs
    from bundle.stack import engine, runstate
    from bundle.stack.frontdoor import front_door
    say = plain(reporter)
    mode = request.mode
    # The one pipeline `bundle render --target slurm` takes: compose's rules, Slurm's, and problems().
    made = render_target(slurm_render, slurm_rules, request.topology, config=request.config, dep=dep,
                         mode=mode, sim=request.sim)
    job = made.output
    dep, topology, rendered = made.prepared.dep, made.prepared.topology, made.prepared.rendered
    for warning in made.warnings:
        reporter.print(f"[yellow]warning:[/] {warning}")
    if not mode:
        raise UsageError(f"launch --target slurm submits to the {modes.word()} cluster only (this host cannot "
                         "reach a real one's front door through the driver yet)",
                         hint=f"`bundle render --target slurm {topology.name} -o DIR` and `sbatch DIR/job.sbatch` "
                              f"on the cluster (docs/slurm.md), or add {modes.flag()}")
    from bundle.targets.slurm import cluster as clusters, image as node_image
    from bundle.targets.slurm.stack import SlurmClusterStack

    timeout = parse_duration(request.timeout or dep.lifecycle.launch_timeout, what="--timeout")
    engine.require_engine()
    engine.require_compose()
    project = clusters.project_for(dep.project_name(topology.name))
    cluster = clusters.Cluster(project)
    if cluster.containers():
        raise UsageError(f"{project}: a {modes.word()} cluster is up already",
                         hint="`bundle down` first (a Slurm job is not reconciled in place)")
    start = time.monotonic()
    reporter.print(f"{modes.word()} ({mode.name}) on Slurm: the node image (built once per hash of its inputs) ...")
    image = node_image.ensure_image(mode.ensure_artifacts(report=say), report=say)
    cluster.write(image=image, topology=topology, front_port=dep.network.front_port, front_target_port=job.front_port,
                  mode_env=rendered.env, host_address=dep.network.host_address, gres=slurm_config.of(dep).gres)
    run_dir = runstate.new_run_dir(project, "launch")
    stack = None
    created_volumes = cluster.stack().volumes_to_create()  # read before `up` makes them: down's to remove
    try:
        reporter.print(f"starting the cluster {project}: {clusters.CONTROLLER} + {', '.join(clusters.NODES)}")
        cluster.up()
        client = _wait_cluster(cluster, say)
        (cluster.shared_dir / slurm_config.of(dep).log_dir).mkdir(parents=True, exist_ok=True)
        (cluster.shared_dir / "job.sbatch").write_text(job.native_script())
        job_id = client.sbatch(job.native_script())
        reporter.print(f"submitted job {job_id} ({job.total_nodes} nodes: {', '.join(s.name for s in job.steps)})")
        nodes = jobs.wait_allocated(client, job_id, timeout=120, report=say)
        shared_logs = cluster.shared_dir / slurm_config.of(dep).log_dir / job_id
        record = jobs.JobRecord(project, job_id, nodes, job.placement(nodes), str(shared_logs), mode.name,
                                client.container, client.workdir)
        jobs.save(record)
        launch = runstate.LaunchRecord.of(rendered, mode=modes.record_value(mode), config=dep.source.name, run_dir=run_dir)
        launch.compose_files, launch.env_file = [str(clusters.compose_file())], str(cluster.env_file)
        launch.profiles = []
        launch.env = {**rendered.env, topology.front_port_variable: str(job.front_port)}
        launch.project, launch.target = project, request.target
        launch.created_volumes = created_volumes
        runstate.save(launch)
        say(client.queue(job_id).rstrip())
        stack = SlurmClusterStack(project)
        front = front_door(dep, topology)
        seconds = _wait_ready(stack, record, job, topology, front, dep, timeout=timeout - (time.monotonic() - start),
                              say=say)
    except (BundleError, KeyboardInterrupt) as exc:
        saved = _save_logs(cluster, run_dir)
        if not request.keep_on_failure:
            reporter.print(f"removing the cluster (logs in {saved})")
            (stack or SlurmClusterStack(project)).down()
        if isinstance(exc, KeyboardInterrupt):
            raise
        exc.message = f"{project} did not become ready on Slurm: {exc.message}\n  logs: {saved}"
        raise
    (run_dir / "ready.json").write_text(json.dumps({"seconds": round(seconds, 1), "job": record.job_id,
                                                    "placement": record.placement}, indent=2) + "\n")
    reporter.print(f"[green]ready[/] in {seconds:.0f} s: job {record.job_id} on {', '.join(record.nodes)}; "
                  + "; ".join(f"{role} on {', '.join(n)}" for role, n in record.placement.items()))
    reporter.print(f"\nendpoint: [bold]{front.url}[/] (model {front.model}); logs: {record.log_dir}")


def _wait_cluster(cluster, say, timeout: float = 90):
    """The controller answers and every node is idle (registered, not drained)."""
    import time

    from bundle.targets.slurm.client import SlurmClient
    from bundle.targets.slurm.cluster import CONTROLLER, NODES, SHARED_MOUNT

    client = SlurmClient.in_container(f"{cluster.project}-{CONTROLLER}-1", SHARED_MOUNT)
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        try:
            states = client.nodes(list(NODES))
        except BundleError as exc:
            states, last = {}, exc.message
        if states and all(state == "idle" for state, _ in states.values()) and len(states) == len(NODES):
            say("cluster: " + ", ".join(f"{n} idle" for n in sorted(states)))
            return client
        time.sleep(1)
    raise Failed(f"the {modes.word()} cluster's nodes did not register within {timeout:.0f} s: {last or states}")


def _wait_ready(stack, record, job, topology, front, dep, *, timeout: float, say) -> float:
    import time

    import requests

    from bundle.targets.slurm import job as jobs
    from bundle.stack.ready import first_generation, front_door_state
    from bundle.stack.workers import ComposeWorkers

    start, deadline = time.monotonic(), time.monotonic() + max(timeout, 1)
    servers = [s.name for s in job.steps if s.role != "router"]
    workers = ComposeWorkers(stack, {s: s for s in servers}, port=dep.network.worker_port)
    healthy: set[str] = set()
    starting = set(record.placement)  # steps Slurm has not listed yet: not lost, still launching
    said = ""
    while time.monotonic() < deadline:
        lost = jobs.lost_roles(record, starting=starting)
        if lost:
            role, why = next(iter(lost.items()))
            tail = "".join(f"{line}\n" for line in log_lines.lines(stack.logs(role, tail=5))[-5:])
            raise Failed(f"{role} was lost: {why}" + (f"\n{tail}" if tail else ""))
        for name in servers:
            if name not in healthy and workers.get(name, "/health", timeout=10).status == 200:
                healthy.add(name)
                say(f"{name}: /health 200 after {time.monotonic() - start:.0f} s")
        if len(healthy) == len(servers):
            ok, detail = front_door_state(front, timeout=10, workers=len(servers) if topology.has_router else 0)
            if ok:
                try:
                    answer = first_generation(front, dep.smoke.checks[0].prompt, timeout=120)
                except (requests.RequestException, ValueError, KeyError) as exc:
                    raise Failed(f"the router is ready but a generation through it failed: {exc}") from None
                say(f"front door: {detail}; a generation through it: {answer[:60]!r}")
                return time.monotonic() - start
            if detail != said:
                say(f"front door: {detail}")
                said = detail
        time.sleep(2)
    raise TimedOut(f"not ready within {timeout:.0f} s (healthy: {', '.join(sorted(healthy)) or 'none'})")


def _save_logs(cluster, run_dir) -> str:
    """The daemons' logs and the job's files, before the cluster is removed."""
    import shutil

    from bundle.stack import docker

    folder = run_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stack = cluster.stack()
    for name in docker.project_containers(cluster.project):
        (folder / f"{name}.log").write_text(stack.container_logs(name))
    logs = cluster.shared_dir
    if logs.is_dir():
        shutil.copytree(logs, folder / "shared", dirs_exist_ok=True)
    return str(folder)
