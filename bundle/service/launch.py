"""`bundle launch` as a service: validate, write the env, `compose up`, wait for true readiness with
progress, attest what runs. The verb (commands/launch.py) and `bundle tune` call launch(LaunchRequest).

On a project that is already up it reconciles, as `docker compose up` with a changed file does
(bundle/stack/reconcile.py): it says which options and services change and why, recreates exactly
those one at a time (the router never stops while a worker is replaced), starts what is stopped,
leaves the rest running, and waits until ready again.
On failure, timeout or a signal (SIGINT, SIGTERM, SIGHUP): every container's logs are saved under
the run's folder, what this launch started is stopped (volumes kept), or a reconcile is rolled back
(its files, and the services it recreated, on their previous configuration; every service that ran
before runs), and the exit code says why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from typing import TYPE_CHECKING

from bundle.config.model import Deployment
from bundle.durations import parse_duration
from bundle.errors import BundleError, EnvironmentProblem, Failed, InputError, NotFound
from bundle.service.prepare import load, prepare
from bundle import modes
from bundle.api import Mode
from bundle.stack import runstate
from bundle.topology import TOOL_SERVICE
from bundle.reporter import Reporter, plain

if TYPE_CHECKING:
    from bundle.stack import reconcile as reconciling
    from bundle.stack.ready import BackgroundUp
    from bundle.verify.kv_path import ServerErrorWatch

# The Docker client (python-on-whales, about half of a second to import on the 2-core machine) and
# HTTP (requests) are imported by the steps that use them, not here: `bundle launch --help`, the
# verbs that only need LaunchRequest, and the target registry read this module without launching.


@dataclass(frozen=True)
class LaunchRequest:
    topology: str  # a registry name
    config: str | None = None  # bundle.yaml's path; None: $BUNDLE_CONFIG, ./bundle.yaml or the defaults
    mode: Mode | None = None  # a way to run with no GPU (bundle.modes), parsed at the command line
    sim: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # simulator knobs (sim only)
    timeout: str | None = None  # the readiness limit, a duration; None: lifecycle.launch_timeout
    monitoring: bool = False  # also the monitoring profile
    keep_on_failure: bool = False  # leave the containers of a failed start running
    target: str = "compose"  # the render target it launches (targets/registry.py), kept in the record
    no_recreate: bool = False  # a reconcile only starts what is stopped or missing (compose's --no-recreate)


def launch(request: LaunchRequest, *, dep: Deployment | None = None, reporter: Reporter) -> None:
    """`bundle launch` itself. `dep`: a config already loaded (bundle tune: the user's config with one
    candidate's overrides) in place of request.config's; `reporter`: where its progress goes. Raises
    BundleError (NotReady's message) when the stack does not become ready, after saving its logs and
    stopping what this launch started."""
    _Launch(request, reporter).run(dep)


class _Launch:
    """One launch, in the order it runs: everything checked before Docker is touched, the images it
    needs, the render written and recorded, then the start (or reconcile) and the wait, cleaned up on
    failure, and the ready stack attested and shown. Each step is a method; what one step learns and a
    later one needs (the project, the stack, its run folder, a reconcile's plan) is kept on the object."""

    def __init__(self, request: LaunchRequest, reporter: Reporter) -> None:
        self.request, self.reporter = request, reporter
        self.starting: BackgroundUp | None = None
        self.steps: list[reconciling.Step] = []
        self.running_before: set[str] = set()
        self.returning: set[str] = set()

    def run(self, dep: Deployment | None) -> None:
        self._check_before_docker(dep)
        self._check_docker_and_port()
        self._ensure_images()
        self._write_and_record()
        reporter, topology = self.reporter, self.topology
        what = (f"{modes.word()}: {self.request.mode.summary}" if self.request.mode
                else self.rendered.env["BUNDLE_IMAGE"])
        verb = "reconciling" if self.reconcile else "launching"
        reporter.print(f"{verb} {topology.name} as compose project [bold]{self.project}[/] ({what})")
        # 2. Start. From here on, a failure cleans up what this launch made.
        try:
            ready = self._start_and_wait()
        except (BundleError, KeyboardInterrupt) as exc:
            self._clean_up(exc)
            raise
        self._show_ready(ready)

    def _check_before_docker(self, dep: Deployment | None) -> None:
        """1. Everything that can be checked before touching Docker: a bad config stops here (its schema
        at load; the rules after the collectives decision, which render needs). A mode's image tag and
        model folder are hashes of their inputs: known before anything is built."""
        request, reporter = self.request, self.reporter
        dep = dep or load(request.config)
        self.decision = _decide_collectives(dep, request, reporter)
        prepared = prepare(request.topology, dep=dep, require_model=request.mode is None,
                           mode=request.mode, sim=request.sim, collectives=self.decision,
                           monitoring=request.monitoring)
        self.dep, self.topology, self.rendered = prepared.dep, prepared.topology, prepared.rendered
        for warning in prepared.findings.warnings:
            reporter.print(f"[yellow]warning:[/] {warning}")
        if not request.mode:
            _check_model_against_lock(self.dep)
        self.timeout = parse_duration(request.timeout or self.dep.lifecycle.launch_timeout, what="--timeout")

    def _check_docker_and_port(self) -> None:
        """The engine and compose are there; a project that is up is reconciled, else the front port
        must be free (a port another process holds would only fail minutes later, at readiness)."""
        from bundle.doctor import port_owners
        from bundle.stack import docker, engine

        dep = self.dep
        engine.require_engine()
        engine.require_compose()
        self.project = dep.project_name(self.topology.name)
        self.reconcile = bool(docker.project_containers(self.project))
        if not self.reconcile:
            host, port = dep.network.host_address, dep.network.front_port
            if not port_owners.bind_free(host, port):
                holders = [h.describe() for h in port_owners.conflicts(host, port)]
                raise EnvironmentProblem(f"{host}:{port} (network.front_port) is already in use"
                                         + (f": {'; '.join(holders)}" if holders else ""),
                                         hint="stop that process or choose another network.front_port")

    def _ensure_images(self) -> None:
        """A mode's artifacts built if their inputs changed; a GPU launch's image already here
        (a launch never builds it: that is `make image` or `bundle pull`); Prometheus's if monitored."""
        from bundle.stack import engine

        request, reporter, rendered = self.request, self.reporter, self.rendered
        if request.mode:
            reporter.print(f"{modes.word()} ({request.mode.name}): building the image if its inputs changed ...")
            request.mode.ensure_artifacts(report=plain(reporter))
        elif not engine.image_exists(rendered.env["BUNDLE_IMAGE"]):
            raise NotFound(f"image {rendered.env['BUNDLE_IMAGE']} is not on this host",
                           hint="`make image` to build it, or `bundle pull` to fetch the published one")
        if request.monitoring:
            from bundle.images import prometheus

            prometheus.ensure_image(report=plain(reporter))

    def _write_and_record(self) -> None:
        """The render written (a snapshot of the files it replaces kept first, for a reconcile's roll
        back), a run folder made, and the launch record saved before anything starts."""
        from bundle.stack import docker
        from bundle.stack import reconcile as reconciling
        from bundle.stack.frontdoor import front_door

        request, rendered, project = self.request, self.rendered, self.project
        record_path = runstate.project_dir(project) / runstate.RECORD_NAME
        collectives_path = runstate.project_dir(project) / COLLECTIVES_NAME
        self.snapshot = reconciling.Snapshot.of(rendered.written_paths() + [record_path, collectives_path])
        try:
            previous = runstate.load(project) if self.reconcile and record_path.is_file() else None
        except InputError:
            previous = None  # an unreadable record: this launch writes a new one
        self.previous = previous
        rendered.write()
        self.run_dir = runstate.new_run_dir(project, "launch")
        _record_collectives(self.decision, project, self.run_dir)
        self.stack = stack = docker.stack_of(rendered)
        record = runstate.LaunchRecord.of(rendered, mode=modes.record_value(request.mode),
                                          config=self.dep.source.name, run_dir=self.run_dir, target=request.target)
        # What `down` may count as its own: the volumes this launch's `compose up` makes (a reconcile
        # keeps the first launch's list, plus any its new options add).
        record.created_volumes = sorted(set(previous.created_volumes if previous else ())
                                        | set(stack.volumes_to_create()))
        runstate.save(record)
        self.front = front_door(self.dep, self.topology)

    def _plan_reconcile(self, expected: set[str], servers: set[str]) -> None:
        """On a project that is up: read before anything starts what runs, which options changed, what
        each service needs (recreate, start, keep), and which workers this reconcile brings back."""
        from bundle.stack import reconcile as reconciling
        from bundle.stack.ready import workers_away

        stack, reporter = self.stack, self.reporter
        before = stack.states()
        self.running_before = {st.service for st in before if st.state == "running"}
        if self.previous is not None:
            for line in _changed_options(self.previous.env, self.rendered.env):
                reporter.print(line, markup=False)
        # Every service compose would start with these profiles (the monitoring profile's too, when
        # this relaunch adds --monitoring), not only the topology's.
        hashes = stack.config_hashes()
        wanted = (expected | set(hashes)) - {TOOL_SERVICE}
        self.steps = reconciling.plan(before, hashes, wanted, servers=servers,
                                      no_recreate=self.request.no_recreate,
                                      image_ids=stack.service_image_ids(wanted))
        for step in self.steps:
            reporter.print(f"  {step.line()}", markup=False)
        self.returning = workers_away(before, self.topology, expected) | {
            s.service for s in self.steps if s.action == reconciling.RECREATE and s.service in servers}

    def _start_and_wait(self):
        """`compose up` (or the reconcile's converge) in the background, and the wait for readiness."""
        from bundle.stack import reconcile as reconciling
        from bundle.stack.ready import BackgroundUp, wait_ready

        stack, topology, dep, reporter = self.stack, self.topology, self.dep, self.reporter
        expected = {s.name for s in topology.active_services(dep.replicas(topology))}
        servers = {s.name for s in topology.servers}
        if self.reconcile:
            self._plan_reconcile(expected, servers)
        steps, no_recreate = self.steps, self.request.no_recreate
        self.starting = (BackgroundUp(stack, lambda: reconciling.converge(stack, steps, no_recreate=no_recreate))
                         if self.reconcile else BackgroundUp(stack))
        with reporter.status("waiting for readiness...") if reporter.is_terminal else _nullcontext():
            return wait_ready(stack, topology, self.front, timeout=self.timeout, prompt=dep.smoke.checks[0].prompt,
                              expected_services=expected, returning=self.returning,
                              report=plain(reporter), starting=self.starting,
                              server_errors=_server_error_watch(stack, topology, dep))

    def _clean_up(self, exc: BaseException) -> None:
        """A failed start: stop `compose up`, save every log, then roll a reconcile back or stop what
        this launch started; the error (re-raised by the caller) says which project and where the logs are."""
        from bundle.stack import reconcile as reconciling

        stack, reporter = self.stack, self.reporter
        _stop_compose_up(self.starting)
        saved = save_logs(stack, self.run_dir)
        rolled_back = ""
        if self.reconcile:
            rolled_back = reconciling.roll_back(stack, self.snapshot, self.steps, self.running_before)
            reporter.print(f"{rolled_back}; logs in {saved}", markup=False)
        elif not self.request.keep_on_failure:
            reporter.print(f"stopping what this launch started (volumes kept); logs in {saved}")
            stack.down(volumes=False)
        if isinstance(exc, KeyboardInterrupt):
            return
        head = f"{self.project} did not become ready" + (f" ({rolled_back})" if rolled_back else "")
        exc.message = f"{head}: {exc.message}\n  logs: {saved}"

    def _show_ready(self, ready) -> None:
        """Ready: its timings kept in the run folder, what runs attested, and where to reach it."""
        reporter, rendered, front, run_dir = self.reporter, self.rendered, self.front, self.run_dir
        (run_dir / "ready.json").write_text(json.dumps(
            {"seconds": round(ready.seconds, 1), "events": ready.events}, indent=2) + "\n")
        reporter.print(f"[green]ready[/] in {ready.seconds:.0f} s")
        _attest(self.dep, rendered, run_dir, reporter)
        reporter.print(f"\nendpoint: [bold]{front.url}[/] (model {front.model})")
        if self.request.monitoring:
            host = rendered.env["HOST_ADDRESS"]
            reporter.print(f"monitoring: Grafana http://{host}:{rendered.env.get('GRAFANA_HOST_PORT', '3000')}, "
                           f"Prometheus http://{host}:{rendered.env.get('PROMETHEUS_HOST_PORT', '9090')} "
                           f"(alerts: docs/monitoring.md)", markup=False)
        reporter.print("try it:\n  " + front.example_request(), markup=False)


def _server_error_watch(stack, topology, dep) -> ServerErrorWatch:
    """What ends the wait early when everything is healthy but generations fail: the servers read
    from inside their containers, the router's recent log."""
    from bundle.stack.workers import ComposeWorkers
    from bundle.verify.kv_path import ServerErrorWatch

    servers = {s.name: s.name for s in topology.servers}
    router = topology.router
    return ServerErrorWatch(topology, ComposeWorkers(stack, servers, port=dep.network.worker_port),
                            router_log=lambda: str(stack.logs(router.name, tail=200)) if router else "")


def _changed_options(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """One line per rendered variable a relaunch changes (the options behind the config hashes)."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if not keys:
        return ["options: unchanged since the last launch"]
    return ["options changed since the last launch:"] + [
        f"  {k}: {old.get(k, '(unset)')} -> {new.get(k, '(unset)')}" for k in keys]


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


def _decide_collectives(dep, request: LaunchRequest, reporter: Reporter):
    """levers.pcie_safe_collectives for this host (bundle.doctor.p2p_decision), shown with its reason.
    A project that is up keeps the decision it was launched with: its servers hold the GPUs, and
    probing them under load would measure nothing useful."""
    from bundle import topology as registry
    from bundle.config.levers import Collectives
    from bundle.doctor import p2p_decision
    from bundle.stack import docker

    topology = registry.get(request.topology)
    project = dep.project_name(topology.name)
    groups = {role.name: tuple(role.gpus) for role in dep.roles(topology)}
    decision = None
    if dep.levers.pcie_safe_collectives == "auto" and not request.mode:
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
            from bundle.lock import load_lock

            image = dep.image_ref or load_lock().image_ref
            reporter.print("deciding PCIe-safe collectives for this host (NCCL all-reduce, P2P on and off) ...")
            decision = p2p_decision.decide_for_host(dep.levers, groups, image=image)
    decision = decision or p2p_decision.decide_for_host(dep.levers, groups, image=None,
                                                         no_gpu=request.mode is not None)
    setting = ("PCIe-safe (NCCL_P2P_DISABLE=1, --disable-custom-all-reduce)" if decision.pcie_safe
               else "P2P and custom all-reduce (SGLang's default)")
    reporter.print(f"collectives: {setting}; {decision.source}: {decision.reason}", markup=False)
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

    from bundle.errors import InputError
    from bundle.lock import load_lock
    from bundle.images.model import check_folder, differences_text, pin_for_folder

    folder = Path(dep.model_path).expanduser()
    pin = pin_for_folder(load_lock(), folder)  # the original's or 0731's, as its config.json says
    if pin is None or not pin.pinned:
        return
    differences = check_folder(folder, pin)
    if differences:
        raise InputError(f"{dep.model_path} (model.path): {differences_text(differences, pin)}",
                         hint="bundle model fetch (downloads exactly the pinned revision), or `bundle model pin` "
                              "for this checkpoint")


def _attest(dep, rendered, run_dir, reporter: Reporter) -> None:
    """Record what actually runs (CUDA graphs, backends, TP...): a FAIL here fails the launch."""
    from bundle.verify import attest

    result = attest.attest(dep, rendered)
    (run_dir / "attestation.json").write_text(result.to_json() + "\n")
    attest.print_findings(result, reporter)
    if not result.ok:
        raise Failed("attestation failed: the servers do not run what the config asked for",
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
