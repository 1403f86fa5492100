"""The audit as a rich table (one row per check, its findings under it) or as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bundle.findings import Level
from bundle.images.audit import Audit

STYLE = {Level.OK: "green", Level.INFO: "cyan", Level.SKIP: "dim", Level.WARN: "yellow", Level.FAIL: "bold red"}


def render_json(audit: Audit) -> str:
    return json.dumps(audit.as_dict(), indent=2, default=str)


def render_table(audit: Audit, console: Console, *, verbose: bool = False) -> None:
    table = Table(title=f"bundle audit {audit.image}", show_lines=False, expand=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("what was found", overflow="fold")
    for r in audit.results:
        table.add_row(r.title, f"[{STYLE[r.level]}]{r.level.value}[/]", r.summary)
        shown = [f for f in r.findings if verbose or f.level in (Level.WARN, Level.FAIL)
                 or (r.name == "predicted" and f.level == Level.INFO)]
        for f in shown[:12]:
            text = f.what + (f"\n  fix: {f.fix}" if f.fix and f.level in (Level.WARN, Level.FAIL) else "")
            table.add_row("", f"[{STYLE[f.level]}]{f.level.value}[/]", text)
        if len(shown) > 12:
            table.add_row("", "", f"... {len(shown) - 12} more (--json lists all)")
    console.print(table)
    fails = sum(1 for r in audit.results for f in r.findings if f.level == Level.FAIL)
    warns = sum(1 for r in audit.results for f in r.findings if f.level == Level.WARN)
    console.print(f"{'FAIL' if fails else 'OK'}: {fails} failure(s), {warns} warning(s); lock "
                  f"{audit.ctx.lock.hash}, image label {audit.ctx.labels.get('io.sglang-bundle.lock-hash', 'none')}",
                  style="bold red" if fails else "green", markup=False)



def save(audit: Audit) -> Path:
    """The JSON report under runs/audit/lock-<hash>/ (bundle/images/audit_record.py), where
    `bundle validate` reads the predicted choices from."""
    from bundle.images import audit_record

    return audit_record.save(audit.ctx.lock.hash, render_json(audit))
