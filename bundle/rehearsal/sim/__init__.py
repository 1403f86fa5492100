"""The simulator rehearsal: worker simulators (bundle/rehearsal/simulator/, run inside the rehearsal image) behind
the real router; their speeds are the simulator's settings, the --sim knobs.

MODE is its one entry in bundle/rehearsal/registry.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from bundle.api import Mode
from bundle.rehearsal.shared import artifacts
from bundle.rehearsal.shared import env as rehearsal_env


def _env(tag: str, knobs: Mapping[str, str]) -> dict[str, str]:
    return rehearsal_env.env_values(tag, knobs=dict(knobs))


MODE = Mode("sim", "simulated workers",
            "worker simulators behind the real router (speeds are the simulator's settings)",
            overlay="rehearsal-{topology}.yaml", env=_env,
            image_tag=artifacts.image_tag, ensure_image=artifacts.ensure_image,
            takes_knobs=True, hardware_bound=False,
            notes={"kind": "a simulator rehearsal",
                   "tune": "REHEARSAL: simulated workers, SIMULATED speeds (SIM_* knobs), not a GPU measurement",
                   "table": " (REHEARSAL: simulated workers; the numbers are the simulator's settings)",
                   "table short": " (REHEARSAL: simulated workers)",
                   "plot": "REHEARSAL (simulated workers, not a GPU measurement): "})
