"""`bundle validate` as a service: the config loaded once, each topology's render checked (schema, rules,
the pinned parsers; nothing starts), and what SGLang will pick on sm_120 as the last `bundle audit` of this
lock's image with this config recorded it (running SGLang takes a minute; validate stays fast by reading
the audit's record). The verb prints the warnings, one line per topology and the predictions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bundle import topology as registry
from bundle.service.prepare import load, prepare


@dataclass(frozen=True)
class ValidateRequest:
    topology: str | None = None  # a registry name; None: every topology
    config: str | None = None  # -c FILE; None: $BUNDLE_CONFIG, ./bundle.yaml, else the embedded defaults


@dataclass(frozen=True)
class TopologyValid:
    topology: str
    project: str  # the compose project it would run as
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Predicted:
    server: str  # "<topology>/<service>"
    choices: dict  # attention_backend, page_size, moe_runner_backend, ... as the audit recorded them


class Validation:
    """One validate run: the config loaded (a ConfigError for a bad file, before anything else), then each
    topology checked as the verb reads them (topologies(): a problem in the second stops it after the
    first was reported), then the predictions (predicted())."""

    def __init__(self, request: ValidateRequest) -> None:
        self.dep = load(request.config)
        self.names = [request.topology] if request.topology else list(registry.NAMES)

    @property
    def source(self) -> str:
        return self.dep.source.name

    def topologies(self) -> Iterator[TopologyValid]:
        for name in self.names:
            prepared = prepare(name, dep=self.dep)
            yield TopologyValid(name, self.dep.project_name(name), tuple(prepared.findings.warnings))

    def predicted(self) -> tuple[str | None, tuple[Predicted, ...]]:
        """The audit record's file name (None: no audit of this lock's image with this config) and what it
        predicts for the topologies checked."""
        # Imported here: the audit record's reader and the lock are read only once the config is valid.
        from bundle.images.audit_record import latest_predicted
        from bundle.lock import load_lock

        found = latest_predicted(load_lock().hash, self.source)
        if found is None:
            return None, ()
        path, predicted = found
        return path.name, tuple(Predicted(server, p) for server, p in sorted(predicted.items())
                                if server.split("/")[0] in self.names)


def validate(request: ValidateRequest) -> Validation:
    return Validation(request)
