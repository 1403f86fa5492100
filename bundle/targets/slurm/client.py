"""Slurm's own commands (sbatch, squeue, scontrol, sinfo, scancel, sacct), run on a submit host or,
for the container cluster, inside its controller container (`docker exec`, through the engine's funnel,
bundle/stack/engine.py) or through the funnel for outside commands here (bundle/run.py): the same
commands either way, each going wrong by its kind (bundle/errors.py): a missing command is the host's lack
(CommandMissing, exit 4), a hang a timeout (CommandTimedOut, exit 5), a non-zero exit a failed command
(SlurmCommandFailed, exit 1), each naming the command and the tail of its stderr."""

from __future__ import annotations

from dataclasses import dataclass

from bundle import log_lines
from bundle.errors import CommandFailed, CommandMissing, CommandTimedOut, EnvironmentProblem
from bundle.run import Finished, run
from bundle.stack import engine


def _run_here(args: list[str], *, stdin: str | None, workdir: str | None, timeout: float) -> Finished:
    """A Slurm command on this (submit) host."""
    try:
        return run(args, input=stdin, cwd=workdir, timeout=timeout, check=False)
    except CommandMissing:
        raise CommandMissing(f"{args[0]}: not found; run this on a Slurm submit host", command=args,
                             returncode=None) from None
    except CommandTimedOut as exc:
        raise CommandTimedOut(f"{' '.join(args)} gave no answer within {timeout:.0f} s", command=args,
                              returncode=None, output=exc.output,
                              hint="is slurmctld answering? (`scontrol ping` on the submit host)") from None


class SlurmCommandFailed(CommandFailed):
    """A Slurm command answered with a non-zero exit (the cluster refused or does not know): a failed
    command, not a lack of the host's."""


@dataclass(frozen=True)
class SlurmClient:
    container: str | None = None  # None on a submit host; the controller's container in the container cluster
    workdir: str | None = None  # where sbatch runs (the job's SLURM_SUBMIT_DIR)

    @classmethod
    def in_container(cls, container: str, workdir: str) -> SlurmClient:
        return cls(container, workdir)

    def run(self, args: list[str], *, stdin: str | None = None, timeout: float = 30) -> str:
        if self.container:
            done = engine.exec_with_input(self.container, args, stdin=stdin, workdir=self.workdir, timeout=timeout)
        else:
            done = _run_here(args, stdin=stdin, workdir=self.workdir, timeout=timeout)
        if not done.ok:
            raise SlurmCommandFailed(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}",
                                     command=args, returncode=done.returncode, output=done.stderr.strip()[-500:])
        return done.stdout

    def sbatch(self, script: str) -> str:
        """Submit a script (read from stdin, as sbatch allows); returns the job id."""
        return self.run(["sbatch", "--parsable"], stdin=script).strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o`: the job's fields (JobState, NodeList, Reason, ...); {} once forgotten."""
        try:
            out = self.run(["scontrol", "show", "job", "-o", job_id])
        except SlurmCommandFailed as exc:
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
        """sacct's record of the job, or None where the cluster keeps no accounting (the container cluster)."""
        try:
            return self.run(["sacct", "-j", job_id, "-o", "JobID,JobName,State,ExitCode,NodeList", "-P"])
        except (SlurmCommandFailed, EnvironmentProblem):  # refused, or no sacct installed
            return None

    def scancel(self, job_id: str) -> None:
        self.run(["scancel", job_id])
