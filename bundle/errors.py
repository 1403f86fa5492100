"""Errors by kind, and the exit codes the `bundle` command documents.

Every error the user can act on is a `BundleError`; its CLASS says what kind of trouble it is and so
which exit code `bundle` returns (a raise names the kind, never a number). Callers catch the kinds they
handle: `except NotFound`, `except CommandFailed`, and only the command line catches every `BundleError`.

    BundleError                       one message + a `fix:` hint, no traceback unless --debug
    |-- Failed              exit 1    a check, smoke test, benchmark, build or launch failed
    |   |-- NotReady                  a stack did not become ready
    |   `-- CommandFailed             an outside command (bundle.run) exited non-zero
    |-- UsageError          exit 2    a bad combination on the command line (argparse gives 2 too)
    |-- InputError          exit 3    a bad input file or value: nothing was started
    |   `-- ConfigError               the collected problems of one input file
    |-- EnvironmentProblem  exit 4    the host lacks something
    |   |-- EngineUnreachable         no Docker engine (or `docker`) answers
    |   |-- DockerFailed              a Docker call failed (bundle.stack.engine.docker_errors)
    |   |-- NotFound                  something needed is not here: an image, a running project, a file
    |   `-- CommandMissing            an outside command is not installed (also a CommandFailed)
    `-- TimedOut            exit 5    a wait ran out of time
        `-- CommandTimedOut           an outside command gave no answer in time (also a CommandFailed)
"""

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

    `message` names what is wrong (file, key path, line where known); `hint` says what to do. The
    class decides the exit code: raise one of the kinds below, not BundleError itself.
    """

    exit_code: int = EXIT_FAILED  # a class attribute, set by each kind (typing's ClassVar costs an import)

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"


class Failed(BundleError):
    """A check, smoke test, benchmark, build or launch ran and failed."""

    exit_code = EXIT_FAILED


class NotReady(Failed):
    """A stack (a compose project, a target's job) did not become ready."""


class UsageError(BundleError):
    """A bad combination of options or arguments on the command line."""

    exit_code = EXIT_USAGE


class InputError(BundleError):
    """A bad input file or value (bundle.yaml, the lock, a record, a digest): nothing was started."""

    exit_code = EXIT_CONFIG


class ConfigError(InputError):
    """One or more problems in an input file, all collected before anything starts."""

    def __init__(self, problems: list[str], *, source: str):
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{source}: {len(problems)} {noun}; nothing was started\n{lines}")

    def __str__(self) -> str:
        return self.message


class EnvironmentProblem(BundleError):
    """The host lacks something: Docker, compose, a tool, a free port, an image, a GPU."""

    exit_code = EXIT_ENVIRONMENT


class EngineUnreachable(EnvironmentProblem):
    """No Docker engine answers, or the `docker` command is not installed."""


class DockerFailed(EnvironmentProblem):
    """A call to the Docker engine failed (the one mapping: bundle.stack.engine.docker_errors)."""


class NotFound(EnvironmentProblem):
    """Something needed is not here: an image, a running project, a file, a tool's folder."""


class TimedOut(BundleError):
    """A wait ran out of time (launch readiness, a job's nodes, a benchmark level)."""

    exit_code = EXIT_TIMEOUT


class CommandFailed(Failed):
    """An outside command (run through bundle.run, the one funnel) exited non-zero: it carries the
    command, its exit status and the tail of its output."""

    def __init__(self, message: str, *, command: list[str], returncode: int | None, output: str = "",
                 hint: str | None = None):
        super().__init__(message, hint=hint)
        self.command = command
        self.returncode = returncode  # the command's own exit status (None: it never ran or never ended)
        self.output = output  # the tail of its stdout and stderr


class CommandMissing(EnvironmentProblem, CommandFailed):
    """An outside command is not installed (exit code: the environment's)."""


class CommandTimedOut(TimedOut, CommandFailed):
    """An outside command gave no answer within its time limit (exit code: a timeout's)."""


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
