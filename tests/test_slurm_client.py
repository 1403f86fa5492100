"""The Slurm client's commands go wrong by their kind (bundle/errors.py: the class decides the exit code):
real processes standing in for Slurm's commands on PATH, run through the one funnel (bundle/run.py)."""

from __future__ import annotations

import pytest

from bundle.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_TIMEOUT, CommandFailed
from bundle.targets.slurm.client import SlurmClient, SlurmCommandFailed


@pytest.fixture
def slurm_bin(tmp_path, monkeypatch):
    """A folder first on PATH where a test writes its own `squeue`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")

    def write(name: str, body: str) -> None:
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)

    return write


def test_a_refusing_command_is_a_failed_command_naming_it_and_its_stderr(slurm_bin):
    slurm_bin("squeue", 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1')
    with pytest.raises(SlurmCommandFailed) as caught:
        SlurmClient().queue("42")
    error = caught.value
    assert isinstance(error, CommandFailed) and error.exit_code == EXIT_FAILED
    assert error.command[:3] == ["squeue", "-j", "42"] and error.returncode == 1
    assert "Invalid job id" in error.message and "Invalid job id" in error.output


def test_a_command_that_hangs_is_a_timeout(slurm_bin):
    slurm_bin("squeue", "sleep 30")
    with pytest.raises(CommandFailed) as caught:
        SlurmClient().run(["squeue"], timeout=0.5)
    assert caught.value.exit_code == EXIT_TIMEOUT and "gave no answer within" in caught.value.message
    assert "scontrol ping" in caught.value.hint


def test_a_missing_command_is_the_hosts_lack(slurm_bin):
    with pytest.raises(CommandFailed) as caught:
        SlurmClient().run(["sinfo"])
    assert caught.value.exit_code == EXIT_ENVIRONMENT and "Slurm submit host" in caught.value.message


def test_no_accounting_is_none_not_an_error(slurm_bin):
    slurm_bin("sacct", 'echo "Slurm accounting storage is disabled" >&2; exit 1')
    assert SlurmClient().accounting("42") is None
