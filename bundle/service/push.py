"""PushRequest -> this lock's runtime image published to `[image] repo`, proven this lock's with its SBOM
first; the values a release records (repo, registry, tag, lock hash; digest, ref, SBOM hash after a push),
appended as KEY=VALUE lines to a file when asked ($GITHUB_OUTPUT)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.images import publish
from bundle.lock import load_lock
from bundle.reporter import Reporter
from bundle.stack import engine


@dataclass(frozen=True)
class PushRequest:
    lock: str | None = None  # the lock's path (None: docker/lock.toml)
    image: str | None = None  # the local image (None: the lock's <repo>:lock-<hash>)
    dry_run: bool = False  # push nothing: the values a push would start from
    output: Path | None = None  # append the values as KEY=VALUE lines here
    sbom_out: Path | None = None  # write the image's CycloneDX SBOM here


@dataclass(frozen=True)
class Pushed:
    values: dict[str, str]  # in the order they are printed and written
    published: bool  # False for a dry run


def push(request: PushRequest, reporter: Reporter) -> Pushed:
    plan = publish.plan_push(load_lock(request.lock), request.image)
    if request.dry_run:
        values, published = plan.outputs(), False
    else:
        engine.require_engine()
        reporter.print(f"pushing {plan.source} as {plan.tag} to {plan.registry} ...", markup=False)
        values, published = publish.push(plan, sbom_out=request.sbom_out).outputs(), True
    return Pushed(values, published)


def write_outputs(request: PushRequest, pushed: Pushed) -> None:
    """The values appended to request.output, if it names a file."""
    if request.output is not None:
        publish.write_outputs(request.output, pushed.values)
