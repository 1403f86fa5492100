"""Run a rendered sbatch script under bash with stand-ins for Slurm's commands, and record what each
step would run: `srun` runs its command once per task (SLURM_PROCID set, as Slurm does) after
recording its own options; `scontrol show hostnames` prints the fake allocation; the image's
`python3` records its argv and environment instead of starting. What is recorded is what bash
really expanded: quoting, arrays, node names and the per-task rank included."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SRUN = r"""#!/bin/bash
opts=()
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do opts+=("$1"); shift; done
ntasks=1; nodelist=""
for o in "${opts[@]}"; do
  case "$o" in --ntasks=*) ntasks=${o#--ntasks=};; --nodelist=*) nodelist=${o#--nodelist=};; esac
done
IFS=, read -r -a nodes <<< "$nodelist"
printf '%s\0' "${opts[@]}" > "$RECORD_DIR/srun-$$-$RANDOM"
for ((rank = 0; rank < ntasks; rank++)); do
  SLURM_PROCID=$rank SLURMD_NODENAME=${nodes[$rank]} "$@"
done
"""
SCONTROL = r"""#!/bin/bash
[ "$1 $2" = "show hostnames" ] || exit 2
for n in $FAKE_NODES; do echo "$n"; done
"""
PYTHON = r"""#!/bin/bash
f="$RECORD_DIR/run-$$-$RANDOM"
printf '%s\0' "$@" > "$f.argv"
env -0 > "$f.env"
"""
ENTRYPOINT = """#!/bin/sh
exec "$@"
"""


@dataclass
class Run:
    argv: list[str]  # after `python3`
    env: dict[str, str]

    @property
    def node(self) -> str:
        return self.env["SLURMD_NODENAME"]

    @property
    def rank(self) -> int:
        return int(self.env["SLURM_PROCID"])


def run_script(script: Path, tmp: Path, nodes: list[str]) -> tuple[list[Run], list[list[str]], subprocess.CompletedProcess]:
    """(every python3 run, every srun's options, bash's result) of `script` on an allocation of `nodes`."""
    bin_dir, record = tmp / "stub-bin", tmp / "record"
    bin_dir.mkdir()
    record.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("python3", PYTHON),
                       ("bundle-entrypoint", ENTRYPOINT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD_DIR": str(record), "FAKE_NODES": " ".join(nodes),
           "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "fake[1-9]", "SLURM_SUBMIT_DIR": str(tmp)}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    runs = []
    for argv_file in sorted(record.glob("run-*.argv")):
        argv = argv_file.read_bytes().split(b"\0")[:-1]
        raw = argv_file.with_suffix(".env").read_bytes().split(b"\0")
        environ = dict(item.decode().split("=", 1) for item in raw if b"=" in item)
        runs.append(Run([a.decode() for a in argv], environ))
    sruns = [[o.decode() for o in f.read_bytes().split(b"\0")[:-1]] for f in sorted(record.glob("srun-*"))]
    return runs, sruns, done


def dumps(runs: list[Run]) -> str:
    return json.dumps([r.argv for r in runs], indent=1)
