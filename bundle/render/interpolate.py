"""Compose's variable interpolation and command splitting, for the fast path of `bundle validate`.

`bundle render` asks compose itself (`docker compose config`); validate must answer in well under
a second without Docker, so it resolves the compose files' commands here. A contract test
(tests/test_render.py) checks that this gives exactly compose's own result, default and
non-default configs alike.
"""

from __future__ import annotations

import re
import shlex

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}, $VAR, and $$ (a literal $).
_PATTERN = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>(?:[^{}]|\{[^{}]*\})*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("named")
        op, arg = match.group("op"), match.group("arg")
        value = env.get(name)
        unset_or_empty = value is None or (value == "" and op is not None and op.startswith(":"))
        if op in (":-", "-") and (value is None if op == "-" else unset_or_empty):
            return interpolate(arg, env)
        if op in (":?", "?") and (value is None if op == "?" else unset_or_empty):
            raise MissingVariable(f"{name}: {arg}")
        return value or ""

    return _PATTERN.sub(replace, text)


def split_command(command: str | list[str], env: dict[str, str]) -> list[str]:
    """The argv compose runs for a service `command:` (a string is split like a shell would)."""
    if isinstance(command, list):
        return [interpolate(part, env) for part in command]
    return shlex.split(interpolate(command, env))
