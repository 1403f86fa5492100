"""The one user-facing error type and the exit codes the `bundle` command documents."""

from __future__ import annotations

# Exit codes (documented in README.md, "Exit codes").
EXIT_OK = 0
EXIT_FAILED = 1  # a check, smoke test, benchmark or launch failed
EXIT_USAGE = 2  # bad command line (argparse's own code)
EXIT_CONFIG = 3  # bad bundle.yaml, lock or other input file: nothing was started
EXIT_ENVIRONMENT = 4  # the host lacks something: Docker, compose, buildx, a free port, a GPU
EXIT_TIMEOUT = 5  # a wait ran out of time (launch readiness, a benchmark level)
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM gives 143 and SIGHUP 129 (128 + the signal's number)


class BundleError(Exception):
    """An error the user can act on: printed as one message, no traceback unless --debug.

    `message` names what is wrong (file, key path, line where known); `hint` says what to do.
    """

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"


class ConfigError(BundleError):
    """One or more problems in an input file, all collected before anything starts."""

    def __init__(self, problems: list[str], *, source: str):
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{source}: {len(problems)} {noun}; nothing was started\n{lines}",
                         exit_code=EXIT_CONFIG)

    def __str__(self) -> str:
        return self.message


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where SIGINT would raise KeyboardInterrupt, so every verb cleans up
    after a CI timeout, systemd or `timeout` exactly as after Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
