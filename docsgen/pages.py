"""The generated pages: path under docs/ -> the function that writes it."""

from __future__ import annotations

from docsgen import cli, config, exit_codes, guards, lock, monitoring

PAGES = {
    "reference/cli.md": cli.reference,
    "reference/configuration.md": config.reference,
    "reference/exit-codes.md": exit_codes.reference,
    "reference/guards.md": guards.reference,
    "reference/monitoring.md": monitoring.reference,
    "reference/lock.md": lock.reference,
}
