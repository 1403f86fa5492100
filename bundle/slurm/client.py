"""Slurm's own commands (sbatch, squeue, scontrol, sinfo, scancel, sacct), run on a submit host or,
for the rehearsal, inside its controller container (`docker exec`, through the engine's funnel,
bundle/stack/engine.py): the same commands either way. Non-zero exits become one BundleError naming
the command and its stderr."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from bundle import log_lines
from bundle.errors import EXIT_ENVIRONMENT, BundleError
from bundle.stack import engine


def _run_here(args: list[str], *, stdin: str | None, workdir: str | None, timeout: float) -> tuple[int, str, str]:
    """A Slurm command on this (submit) host."""
    try:
        done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    except FileNotFoundError:
        raise BundleError(f"{args[0]}: not found; run this on a Slurm submit host", exit_code=EXIT_ENVIRONMENT) from None
    except subprocess.TimeoutExpired:
        raise BundleError(f"{' '.join(args)} gave no answer within {timeout:.0f} s",
                          exit_code=EXIT_ENVIRONMENT) from None
    return done.returncode, done.stdout, done.stderr


@dataclass(frozen=True)
class SlurmClient:
    container: str | None = None  # None on a submit host; the controller's container in the rehearsal
    workdir: str | None = None  # where sbatch runs (the job's SLURM_SUBMIT_DIR)

    @classmethod
    def in_container(cls, container: str, workdir: str) -> SlurmClient:
        return cls(container, workdir)

    def run(self, args: list[str], *, stdin: str | None = None, timeout: float = 30) -> str:
        if self.container:
            code, stdout, stderr = engine.exec_with_input(self.container, args, stdin=stdin, workdir=self.workdir,
                                                          timeout=timeout)
        else:
            code, stdout, stderr = _run_here(args, stdin=stdin, workdir=self.workdir, timeout=timeout)
        if code != 0:
            raise BundleError(f"{' '.join(args)} failed ({code}): {stderr.strip()[-500:]}",
                              exit_code=EXIT_ENVIRONMENT)
        return stdout

    def sbatch(self, script: str) -> str:
        """Submit a script (read from stdin, as sbatch allows); returns the job id."""
        return self.run(["sbatch", "--parsable"], stdin=script).strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o`: the job's fields (JobState, NodeList, Reason, ...); {} once forgotten."""
        try:
            out = self.run(["scontrol", "show", "job", "-o", job_id])
        except BundleError as exc:
            if "Invalid job id" in exc.message:
                return {}
            raise
        fields = {}
        for token in out.split():
            key, sep, value = token.partition("=")
            if sep and key not in fields:
                fields[key] = value
        return fields

    def hostnames(self, nodelist: str) -> list[str]:
        return self.run(["scontrol", "show", "hostnames", nodelist]).split()

    def steps(self, job_id: str) -> dict[str, str]:
        """The job's running steps: step name -> its node list (`squeue -s`)."""
        out = self.run(["squeue", "-h", "-s", "-j", job_id, "-o", "%j|%N"])
        return dict(line.split("|", 1) for line in log_lines.lines(out) if "|" in line)

    def queue(self, job_id: str) -> str:
        """squeue's line for the job (state, time, nodes) as an operator reads it."""
        return self.run(["squeue", "-j", job_id, "-o", "%.10i %.20j %.9T %.10M %.6D %R"])

    def nodes(self, names: list[str]) -> dict[str, tuple[str, str]]:
        """Node -> (state, reason) from sinfo (down*, idle, allocated ...)."""
        out = self.run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%T|%E"])
        found = {}
        for line in log_lines.lines(out):
            name, state, reason = (line.split("|") + ["", ""])[:3]
            found[name] = (state, reason)
        return found

    def accounting(self, job_id: str) -> str | None:
        """sacct's record of the job, or None where the cluster keeps no accounting (the rehearsal)."""
        try:
            return self.run(["sacct", "-j", job_id, "-o", "JobID,JobName,State,ExitCode,NodeList", "-P"])
        except BundleError:
            return None

    def scancel(self, job_id: str) -> None:
        self.run(["scancel", job_id])
