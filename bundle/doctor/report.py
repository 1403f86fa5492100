"""The doctor's report: a rich table with a summary line, or JSON for machines."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bundle.doctor.core import Report
from bundle.doctor.registry import CHECKS
from bundle.findings import Level

STYLE = {Level.OK: "green", Level.WARN: "yellow", Level.FAIL: "bold red", Level.SKIP: "dim"}


def render_table(report: Report, console: Console) -> None:
    titles = {c.name: c.title for c in CHECKS}
    table = Table(title="bundle doctor", show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("finding / fix")
    for result in report.results:
        body = Text(result.summary)
        if result.remediation and result.status is not Level.OK:
            body.append("\nfix: ", style="bold").append(result.remediation)
        table.add_row(titles.get(result.name, result.name),
                      Text(result.status.value, style=STYLE[result.status]), body)
    console.print(table)
    counts = report.counts()
    line = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    verdict = ("[bold red]FAIL[/]: fix the failed checks before `bundle launch`" if report.exit_code
               else "[green]ready[/]" + (" (with warnings)" if counts["WARN"] else ""))
    console.print(f"{len(report.results)} checks: {line}. {verdict}")
    skipped = [r for r in report.results if r.status is Level.SKIP]
    if skipped:
        console.print(f"[dim]SKIP means not checked here, never passed: {', '.join(r.name for r in skipped)}[/]")


def render_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2, default=str)
