"""The one user-facing error type and the exit codes the `bundle` command documents."""

from __future__ import annotations

# Exit codes (the documentation site's exit-code reference is generated from EXIT_CODES).
EXIT_OK = 0
EXIT_FAILED = 1  # a check, smoke test, benchmark or launch failed
EXIT_USAGE = 2  # bad command line (argparse's own code)
EXIT_CONFIG = 3  # bad bundle.yaml, lock or other input file: nothing was started
EXIT_ENVIRONMENT = 4  # the host lacks something: Docker, compose, buildx, a free port, a GPU
EXIT_TIMEOUT = 5  # a wait ran out of time (launch readiness, a benchmark level)
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM gives 143 and SIGHUP 129 (128 + the signal's number)

# Every exit code `bundle` returns and what it means, as the reference page lists them.
EXIT_CODES: tuple[tuple[str, str], ...] = (
    (str(EXIT_OK), "success"),
    (str(EXIT_FAILED), "a check, smoke test, benchmark or launch failed"),
    (str(EXIT_USAGE), "bad command line"),
    (str(EXIT_CONFIG), "bad input file (bundle.yaml, lock): nothing was started"),
    (str(EXIT_ENVIRONMENT), "the host lacks something (Docker, compose, buildx, a free port, the image, a GPU)"),
    (str(EXIT_TIMEOUT), "a wait ran out of time (launch readiness, a benchmark level)"),
    ("130 / 143 / 129", "interrupted by SIGINT / SIGTERM / SIGHUP (cleaned up as after Ctrl-C)"),
)


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


def did_you_mean(word: str, choices) -> str:
    """"did you mean 'x'?" for the one choice closest to a mistyped `word` (difflib), else ""."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"did you mean {close[0]!r}?" if close else ""
