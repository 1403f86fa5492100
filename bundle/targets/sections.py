"""The sections of bundle.yaml the wings bring: one line per target wing that has settings. Each member is
the wing's package, which declares its section (SECTION, READ_BY, and the files SCHEMA and DEFAULTS beside
it) and imports nothing, so the command line reads this list quickly; the entry point (bundle/cli.py) hands
it to the config loader (bundle/config/loader.py: install_sections), which adds each section to the core's
schema and defaults when it loads a config. The config stands below the wings and names none.

Removing a wing = its folder, its line in bundle/targets/registry.py and its line here (tests/test_wings.py).
The no-GPU modes (bundle.modes), `bundle tune` and `bundle upgrade` have no section of bundle.yaml (their settings are
flags and their own files: bundle/tune/space.schema.json), so nothing of theirs is listed.
"""

from __future__ import annotations

from bundle.targets import k8s
from bundle.targets import slurm

SECTIONS = (
    k8s,
    slurm,
)
