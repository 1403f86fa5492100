"""`bundle launch tp4|pd|dp [-c FILE] [--rehearsal] [--timeout DURATION]`: validate, write the env,
`compose up`, wait for true readiness with progress, attest what runs, print the endpoint.

On a project that is already up it reconciles, as `docker compose up` does: what is stopped or
missing is started, healthy services are left alone, and it waits until ready again.
On failure, timeout or a signal (SIGINT, SIGTERM, SIGHUP): every container's logs are saved under
the run's folder, what this launch started is stopped (volumes kept; a reconcile keeps what was
running before), and the exit code says why.
"""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import (add_config_argument, add_rehearsal_arguments, add_topology_argument,
                                     ensure_rehearsal_artifacts, prepare, rehearsal_env, sim_knobs)
from bundle.durations import parse_duration
from bundle.errors import EXIT_ENVIRONMENT, BundleError
from bundle.stack import docker, runstate
from bundle.stack.frontdoor import front_door
from bundle.stack.ready import BackgroundUp, NotReady, wait_ready, workers_away

HELP = "bring a topology up and wait until it truly serves (health, router, one generation); reconciles one that is up"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    add_rehearsal_arguments(parser,
                            rehearsal_help="no GPU: engine = the real SGLang server on CPU with a small model "
                                           "made here, sim = worker simulators; the real router (docs/rehearsal.md)",
                            sim_help="rehearsal only: a worker simulator knob, e.g. SIM_TPOT_MS=20 or "
                                     "SIM_WRONG_ANSWERS=1 (bundle/simulator/knobs.py lists them); repeatable")
    parser.add_argument("--timeout", metavar="DURATION",
                        help="readiness limit, e.g. 45m (default: lifecycle.launch_timeout)")
    parser.add_argument("--monitoring", action="store_true",
                        help="also start Prometheus (alerts) and Grafana (dashboards), and on a GPU host NVIDIA's "
                             "DCGM exporter: the compose profile `monitoring` (docs/monitoring.md)")
    parser.add_argument("--target", choices=("compose", "slurm"), default="compose",
                        help="compose (default): this host; slurm: one sbatch job (with --rehearsal: on a real "
                             "Slurm cluster of containers made here, docs/slurm.md)")
    parser.add_argument("--keep-on-failure", action="store_true",
                        help="leave the containers running after a failed start, for debugging")


def run(args: argparse.Namespace) -> int:
    return launch(args)


def launch(args: argparse.Namespace, *, dep=None) -> int:
    """`bundle launch` itself (args as its command line gives them). `dep`: a config already loaded
    (bundle tune: the user's config with one candidate's overrides) in place of args.config's."""
    from bundle.doctor import port_owners

    from bundle.verify import report

    if getattr(args, "target", "compose") == "slurm":
        from bundle.commands._slurm import launch_job

        return launch_job(args, dep=dep)
    console = report.console()
    knobs = sim_knobs(args)  # also resolves args.rehearsal to None, "engine" or "sim"
    # The image's tag and the engine's model folder are hashes of their inputs: known before anything is built.
    extra = rehearsal_env(args.rehearsal, knobs=knobs)
    # 1. Everything that can be checked before touching Docker: a bad config stops here (its schema
    # at load; the rules after the collectives decision, which render needs).
    from bundle.commands._common import load

    dep = dep or load(args)
    decision = _decide_collectives(dep, args, console)
    prepared = prepare(args, args.topology, require_model=not args.rehearsal, rehearsal=args.rehearsal,
                       extra_env=extra, dep=dep, collectives=decision,
                       monitoring=getattr(args, "monitoring", False))
    dep, topology = prepared.dep, prepared.topology
    for warning in prepared.findings.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if not args.rehearsal:
        _check_model_against_lock(dep)
    timeout = parse_duration(args.timeout or dep.lifecycle.launch_timeout, what="--timeout")
    docker.require_engine()
    docker.require_compose()
    project = dep.project_name(topology.name)
    reconcile = bool(docker.project_containers(project))
    if not reconcile:
        host, port = dep.network.host_address, dep.network.front_port
        if not port_owners.bind_free(host, port):
            holders = [h.describe() for h in port_owners.conflicts(host, port)]
            raise BundleError(f"{host}:{port} (network.front_port) is already in use"
                              + (f": {'; '.join(holders)}" if holders else ""),
                              hint="stop that process or choose another network.front_port",
                              exit_code=EXIT_ENVIRONMENT)
    rendered = prepared.rendered
    if args.rehearsal:
        console.print(f"rehearsal ({args.rehearsal}): building the image if its inputs changed ...")
        ensure_rehearsal_artifacts(args.rehearsal, report=lambda line: console.print(line, markup=False))
    elif not docker.image_exists(rendered.env["BUNDLE_IMAGE"]):
        raise BundleError(f"image {rendered.env['BUNDLE_IMAGE']} is not on this host",
                          hint="`make image` to build it, or `bundle pull` to fetch the published one",
                          exit_code=EXIT_ENVIRONMENT)
    if getattr(args, "monitoring", False):
        from bundle.images import prometheus

        prometheus.ensure_image()
    rendered.write()
    run_dir = runstate.new_run_dir(project, "launch")
    _record_collectives(decision, project, run_dir)
    runstate.save(runstate.LaunchRecord.of(rendered, rehearsal=args.rehearsal, config=dep.source.name,
                                           run_dir=run_dir))
    stack = docker.stack_of(rendered)
    front = front_door(dep, topology)
    what = {None: rendered.env["BUNDLE_IMAGE"], "sim": "rehearsal: simulated workers",
            "engine": "rehearsal: the real SGLang server on CPU"}[args.rehearsal]
    verb = "reconciling" if reconcile else "launching"
    console.print(f"{verb} {topology.name} as compose project [bold]{project}[/] ({what})")
    # 2. Start. From here on, a failure cleans up what this launch made.
    starting = None
    expected = {s.name for s in topology.active_services(dep.replicas(topology))}
    # Read before `compose up` starts them: which workers this reconcile brings back.
    returning = workers_away(stack.states(), topology, expected) if reconcile else set()
    try:
        starting = BackgroundUp(stack)
        with console.status("waiting for readiness...") if console.is_terminal else _nullcontext():
            ready = wait_ready(stack, topology, front, timeout=timeout, prompt=dep.smoke.checks[0].prompt,
                               expected_services=expected, returning=returning,
                               report=lambda line: console.print(line, markup=False), starting=starting)
    except (NotReady, BundleError, KeyboardInterrupt) as exc:
        _stop_compose_up(starting)
        saved = save_logs(stack, run_dir)
        if reconcile:
            console.print(f"the project was up before this launch: left as it is; logs in {saved}")
        elif not args.keep_on_failure:
            console.print(f"stopping what this launch started (volumes kept); logs in {saved}")
            stack.down(volumes=False)
        if isinstance(exc, KeyboardInterrupt):
            raise
        exc.message = f"{project} did not become ready: {exc.message}\n  logs: {saved}"
        raise
    (run_dir / "ready.json").write_text(json.dumps(
        {"seconds": round(ready.seconds, 1), "events": ready.events}, indent=2) + "\n")
    console.print(f"[green]ready[/] in {ready.seconds:.0f} s")
    _attest(dep, rendered, run_dir, console)
    console.print(f"\nendpoint: [bold]{front.url}[/] (model {front.model})")
    if getattr(args, "monitoring", False):
        host = rendered.env["HOST_ADDRESS"]
        console.print(f"monitoring: Grafana http://{host}:{rendered.env.get('GRAFANA_HOST_PORT', '3000')}, "
                      f"Prometheus http://{host}:{rendered.env.get('PROMETHEUS_HOST_PORT', '9090')} "
                      f"(alerts: docs/monitoring.md)", markup=False)
    console.print("try it:\n  " + front.example_request(), markup=False)
    return 0


def _stop_compose_up(starting: BackgroundUp | None) -> None:
    """A signal reaches the driver, not the `docker compose up` it runs: stop that first, or it
    would go on creating containers after the clean-up removed them."""
    if starting is None or starting.done():
        return
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.terminate()
        except psutil.Error:
            pass
    starting.join(timeout=30)


COLLECTIVES_NAME = "collectives.json"


def _decide_collectives(dep, args, console):
    """levers.pcie_safe_collectives for this host (bundle.doctor.collectives), shown with its reason.
    A project that is up keeps the decision it was launched with: its servers hold the GPUs, and
    probing them under load would measure nothing useful."""
    from bundle import topology as registry
    from bundle.config.levers import Collectives
    from bundle.doctor import collectives

    topology = registry.get(args.topology)
    project = dep.project_name(topology.name)
    groups = {role.name: tuple(role.gpus) for role in dep.roles(topology)}
    decision = None
    if dep.levers.pcie_safe_collectives == "auto" and not args.rehearsal:
        saved = runstate.project_dir(project) / COLLECTIVES_NAME
        try:
            up = bool(docker.project_containers(project))
        except BundleError:
            up = False
        if up and saved.is_file():
            data = json.loads(saved.read_text())
            decision = Collectives(data["pcie_safe"], data["source"],
                                   f"kept from the launch that started the running project: {data['reason']}",
                                   data.get("evidence", {}))
        else:
            from bundle.images.lock import load_lock

            image = dep.image_ref or load_lock().image_ref
            console.print("deciding PCIe-safe collectives for this host (NCCL all-reduce, P2P on and off) ...")
            decision = collectives.decide_for_host(dep.levers, groups, image=image)
    decision = decision or collectives.decide_for_host(dep.levers, groups, image=None, rehearsal=args.rehearsal)
    setting = ("PCIe-safe (NCCL_P2P_DISABLE=1, --disable-custom-all-reduce)" if decision.pcie_safe
               else "P2P and custom all-reduce (SGLang's default)")
    console.print(f"collectives: {setting}; {decision.source}: {decision.reason}", markup=False)
    return decision


def _record_collectives(decision, project: str, run_dir) -> None:
    """The decision and its evidence, in the launch's folder and as the project's latest."""

    text = json.dumps(decision.as_dict(), indent=2) + "\n"
    (run_dir / COLLECTIVES_NAME).write_text(text)
    (runstate.project_dir(project) / COLLECTIVES_NAME).write_text(text)


def _check_model_against_lock(dep) -> None:
    """The same lock means the same weights: a model folder that differs from the checkpoint the
    lock pins (file sizes, small files' sha256) is refused before anything starts."""
    from pathlib import Path

    from bundle.errors import EXIT_CONFIG
    from bundle.images.lock import load_lock
    from bundle.images.model import check_folder, differences_text, pin_for_folder

    folder = Path(dep.model_path).expanduser()
    pin = pin_for_folder(load_lock(), folder)  # the original's or 0731's, as its config.json says
    if pin is None or not pin.pinned:
        return
    differences = check_folder(folder, pin)
    if differences:
        raise BundleError(f"{dep.model_path} (model.path): {differences_text(differences, pin)}",
                          exit_code=EXIT_CONFIG,
                          hint="bundle model fetch (downloads exactly the pinned revision), or `bundle model pin` "
                               "for this checkpoint")


def _attest(dep, rendered, run_dir, console) -> None:
    """Record what actually runs (CUDA graphs, backends, TP...): a FAIL here fails the launch."""
    from bundle.verify import attest

    result = attest.attest(dep, rendered)
    (run_dir / "attestation.json").write_text(result.to_json() + "\n")
    attest.print_findings(result, console)
    if not result.ok:
        raise BundleError("attestation failed: the servers do not run what the config asked for",
                          hint=f"see {run_dir / 'attestation.json'}; the stack is left running for a look")


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def save_logs(stack, run_dir) -> str:
    """Every container's full log (stopped ones too) under run_dir/logs/, before anything is removed."""
    folder = run_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        states = stack.states()
    except BundleError:
        states = []
    for st in states:
        (folder / f"{st.service}.log").write_text(stack.container_logs(st.name))
        (folder / f"{st.service}.state.json").write_text(json.dumps(
            {"state": st.state, "health": st.health, "exit_code": st.exit_code,
             "restarts": st.restart_count}, indent=2) + "\n")
    return str(folder)
