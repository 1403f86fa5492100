"""The images the Docker tier stands on, built before it by `make test`, as many at once as their
parents allow. Each line is prefixed with the branch it comes from:

    chain       the stand-in chain through pd (base, framework, pd), then kernels, overlay, runtime
    rehearsal   once pd is built: the rehearsal image, then the Slurm node image on it
    monitoring  from the start: the Debian root and Prometheus (nothing of the chain is under them)

Built here rather than inside a test, so that no two workers build one image and a cold engine's
quarter of an hour shows its progress. Everything that exists is reused, so on a warm engine this
takes seconds. `make test` runs it beside the fast tier, which needs no image.

In the cold CI run of 2026-12-03 the chain and then the rehearsal image were built one after the
other (12:45 and 15:25 into the run), and the Slurm node and Prometheus images were built inside
their tests: 268 s for one test on a cold engine.

    python -m tests.docker_tier_images      # exit 0 when every image is there
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from bundle.errors import BundleError

_print_lock = threading.Lock()


def _reporter(branch: str) -> Callable[[str], None]:
    def report(message: str) -> None:
        with _print_lock:
            for line in str(message).splitlines() or [""]:
                print(f"{branch:<10} | {line}", flush=True)
    return report


def _chain_through(plan, last: str, report) -> None:
    from bundle.images.build import execute

    names = [lp.name for lp in plan.layers]
    execute(plan, plan.layers[:names.index(last) + 1], report=report, progress=report)


def _chain_after(plan, last: str, report) -> None:
    from bundle.images.build import execute

    names = [lp.name for lp in plan.layers]
    rest = plan.layers[names.index(last) + 1:]
    if rest:
        execute(plan, rest, report=report, progress=report)


def _rehearsal_and_slurm(report) -> None:
    from bundle.images import rehearsal
    from bundle.slurm import image as slurm_image

    report(f"ready: {rehearsal.ensure_image(report=report)}")
    report(f"ready: {slurm_image.ensure_image(report=report)}")


def _monitoring(report) -> None:
    from bundle.images import prometheus

    report(f"ready: {prometheus.ensure_image(report=report)}")


def build_all() -> list[str]:
    """Build every image; the failures, one line each (empty when all are there)."""
    from bundle.images import rehearsal
    from bundle.images.build import make_plan
    from bundle.lock import load_lock

    plan = make_plan(load_lock(), standin=True)  # what `bundle build --standin` builds
    failures: list[str] = []

    def branch(name: str, work: Callable[[Callable[[str], None]], None]) -> Callable[[], None]:
        report = _reporter(name)

        def run() -> None:
            started = time.monotonic()
            try:
                work(report)
            except BundleError as exc:
                failures.append(f"{name}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
                raise
            report(f"done in {time.monotonic() - started:.0f} s")
        return run

    with ThreadPoolExecutor(max_workers=3) as pool:
        monitoring = pool.submit(branch("monitoring", _monitoring))
        through_pd = pool.submit(branch("chain", lambda r: _chain_through(plan, rehearsal.PARENT_LAYER, r)))
        later: list[Future] = [monitoring]
        if _ok(through_pd):
            later += [pool.submit(branch("chain", lambda r: _chain_after(plan, rehearsal.PARENT_LAYER, r))),
                      pool.submit(branch("rehearsal", _rehearsal_and_slurm))]
        for future in later:
            _ok(future)
    return failures


def _ok(future: Future) -> bool:
    """Whether the branch finished; a BundleError was recorded by the branch itself, anything else
    is a bug and goes up with its traceback."""
    try:
        future.result()
    except BundleError:
        return False
    return True


def main() -> int:
    started = time.monotonic()
    failures = build_all()
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    if not failures:
        print(f"the Docker tier's images are ready ({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
