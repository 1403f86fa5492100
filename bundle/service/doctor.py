"""`bundle doctor` as a service: DoctorRequest in (the topology to check for, the flags' overrides of the
config), the doctor's Report out (bundle/doctor/: a registry of small checks). The verb prints the
table or the JSON and exits with Report.exit_code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle import topology as registry
from bundle.doctor.context import HostContext
from bundle.doctor.core import Report
from bundle.doctor.registry import run_checks
from bundle.errors import InputError, NotFound
from bundle.images.model import pin_for_folder
from bundle.lock import load_lock
from bundle.service.prepare import load
from bundle.reporter import Reporter


@dataclass(frozen=True)
class DoctorRequest:
    topology: str = "pd"  # a registry name: its GPU groups, its front door's port
    config: str | None = None  # bundle.yaml's path; None: $BUNDLE_CONFIG, ./bundle.yaml or the defaults
    model_path: str | None = None  # None: model.path of the config
    ports: tuple[int, ...] = ()  # other host ports that must be free
    image: str | None = None  # the NIXL check's worker image; None: image.ref, else the lock's image
    only: tuple[str, ...] | None = None  # check names (doctor/registry.py)
    skip: tuple[str, ...] | None = None
    require: tuple[str, ...] | None = None  # checks that must run here: their SKIP is a FAIL
    host_nixl: bool = True  # may the NIXL check fall back to this host's Python


def host_context(request: DoctorRequest) -> HostContext:
    """The checks' view of the deployment: config (or embedded defaults) overridden by the request."""
    dep = load(request.config)
    roles = dep.roles(registry.get(request.topology))
    image = request.image or dep.image_ref
    lock_hash, pin = None, None
    try:
        lock = load_lock()
        # The pin of the checkpoint the folder holds (DeepSeek-V4-Flash or -0731, from its config.json).
        pin = pin_for_folder(lock, Path(request.model_path or dep.model_path).expanduser())
        if not image:
            image, lock_hash = lock.image_ref, lock.hash
    except (InputError, NotFound):
        pass  # a broken lock is `bundle validate`'s to report; NIXL then runs on the host
    network = dep.network
    ports = [(network.host_address, network.front_port, f"{request.topology} front door")]
    ports += [(network.host_address, p, "--port") for p in request.ports]
    if len(roles) > 1:
        nixl_gpus = (roles[0].gpus[0], roles[1].gpus[0])  # prefill's first GPU -> decode's first GPU
    else:
        gpus = roles[0].gpus
        nixl_gpus = (gpus[0], gpus[1] if len(gpus) > 1 else gpus[0])
    return HostContext(
        model_path=request.model_path or dep.model_path,
        ports=ports,
        image=image,
        expected_lock_hash=lock_hash,
        gpu_groups={role.name: tuple(role.gpus) for role in roles},
        pcie_safe_collectives=dep.levers.pcie_safe_collectives,
        nixl_gpus=nixl_gpus,
        host_python_nixl=request.host_nixl,
        model_pin=pin,
    )


def check_host(request: DoctorRequest, reporter: Reporter | None) -> Report:
    """Every selected check on this host; each one's outcome on `reporter`'s status line as it comes
    (None: quiet, for a JSON-only stdout). A FAIL is in the report (exit_code), not raised."""
    ctx = host_context(request)
    selection = {"only": _names(request.only), "skip": _names(request.skip), "required": _names(request.require)}
    if reporter is None:
        return run_checks(ctx, **selection)
    with reporter.status("checking ...") as status:
        def progress(check, result):
            status.update(f"checked {check.title}: {result.status.value}")
        return run_checks(ctx, on_result=progress, **selection)


def _names(names: tuple[str, ...] | None) -> list[str] | None:
    return list(names) if names else None
