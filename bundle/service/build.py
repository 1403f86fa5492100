"""BuildRequest -> the layered images of a lock built, unchanged layers reused (Built); or, without
building, the plan: each layer's tag, build arguments and whether it is built already (Planned)."""

from __future__ import annotations

from dataclasses import dataclass

from bundle.errors import EnvironmentProblem
from bundle.images import build as images
from bundle.images.build import LAYER_NAMES  # noqa: F401  (the layers, for `bundle build --help`)
from bundle.lock import load_lock
from bundle.reporter import Reporter
from bundle.stack import engine


@dataclass(frozen=True)
class BuildRequest:
    lock: str | None = None  # the lock's path (None: docker/lock.toml)
    layers: tuple[str, ...] | None = None  # only these, rebuilt even if tagged (None: every one, reused)
    use_cache: bool = True
    standin: bool = False  # a local build, never pushed, named without the registry
    kernels: tuple[str, ...] | None = None  # the FlashInfer modules of the kernels layer (None: its default)
    with_sbom: bool = True


@dataclass(frozen=True)
class Planned:
    plan: images.Plan
    layers: list[images.LayerPlan]  # the ones the request builds, in order
    states: dict[str, str]  # layer -> "(built: will be reused)" / "(to build)"; empty when no engine answers


@dataclass(frozen=True)
class Built:
    results: list[images.LayerResult]
    image: str  # the runtime image's name
    lock_hash: str

    @property
    def built(self) -> int:
        return sum(1 for r in self.results if r.action == "built")

    @property
    def reused(self) -> int:
        return len(self.results) - self.built


def _plan(request: BuildRequest) -> tuple[images.Plan, list[images.LayerPlan]]:
    plan = images.make_plan(load_lock(request.lock), standin=request.standin,
                            kernels=list(request.kernels) if request.kernels is not None else None)
    return plan, images.select_layers(plan, list(request.layers) if request.layers is not None else None)


def plan(request: BuildRequest) -> Planned:
    """What a build would do; builds nothing."""
    plan, layers = _plan(request)
    return Planned(plan, layers, _states(layers))


def build(request: BuildRequest, reporter: Reporter) -> Built:
    """Build the request's layers; each step on the reporter, BuildKit's output dimmed under it."""
    plan, layers = _plan(request)
    results = images.execute(plan, layers, use_cache=request.use_cache, force=bool(request.layers),
                             with_sbom=request.with_sbom,
                             report=lambda msg: reporter.print(msg, markup=False),
                             progress=lambda msg: reporter.print(f"    {msg}", style="dim", markup=False,
                                                                 soft_wrap=True))
    last = plan.layers[-1]
    return Built(results, last.extra_tags[0] if last.extra_tags else last.tag, plan.lock.hash)


def _states(layers: list[images.LayerPlan]) -> dict[str, str]:
    """'(built: will be reused)' / '(to build)' per layer, or nothing when no engine answers."""
    try:
        engine.require_engine()
    except EnvironmentProblem:
        return {}
    return {lp.name: "(built: will be reused)" if engine.image_facts(lp.tag) else "(to build)"
            for lp in layers}
