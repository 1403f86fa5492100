"""Counters the simulator exposes on /metrics in Prometheus text format, under SGLang's own metric
names (sglang:num_requests_total, ...) so the driver reads a rehearsal and a GPU host alike. Health
checks are not counted (SGLang marks them log_metrics=False). The sglang_simulator:* series exist
only here: PD bootstrap rooms seen by prefill and served by decode."""

from __future__ import annotations

import threading
from collections import defaultdict


class Counters:
    def __init__(self, model_name: str, role: str):
        self._lock = threading.Lock()
        self._values: dict[tuple[str, tuple], float] = defaultdict(float)
        self.model_name = model_name
        self.role = role

    def add(self, name: str, value: float = 1.0, **labels) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self._values[key] += value

    def get(self, name: str, **labels) -> float:
        with self._lock:
            return sum(v for (n, lab), v in self._values.items()
                       if n == name and all((k, str(val)) in lab for k, val in labels.items()))

    def request_done(self, *, streaming: bool, prompt_tokens: int, completion_tokens: int) -> None:
        s = "true" if streaming else "false"
        self.add("sglang:num_requests_total", is_streaming=s)
        self.add("sglang:prompt_tokens_total", prompt_tokens, is_streaming=s)
        self.add("sglang:generation_tokens_total", completion_tokens, is_streaming=s)

    def render(self) -> str:
        lines, seen = [], set()
        with self._lock:
            items = sorted(self._values.items())
        for (name, labels), value in items:
            if name not in seen:
                seen.add(name)
                lines.append(f"# TYPE {name} counter")
            all_labels = (("model_name", self.model_name),) + labels
            text = ",".join(f'{k}="{v}"' for k, v in all_labels)
            lines.append(f"{name}{{{text}}} {value}")
        return "\n".join(lines) + "\n"
