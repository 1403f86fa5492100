"""Running one of the scripts that make a local root image (docker/debian-root.sh,
docker/standin-root.sh): minutes of debootstrap on a fresh host, so each line the script prints is
passed on as it comes (the scripts condense debootstrap's log to progress lines), and the last lines
name the cause when it fails."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from bundle.run import stream


def run_root_script(script: Path, tag: str, *, label: str, report: Callable[[str], None]) -> tuple[int, list[str]]:
    """Run `script tag`, reporting each output line as `  label | line`; the exit code and the last
    three lines (stdout and stderr together, in order)."""
    tail: list[str] = []

    def line(text: str) -> None:
        tail[:] = (tail + [text])[-3:]
        report(f"  {label} | {text}")

    returncode = stream([str(script), tag], line,
                        on_quiet=lambda seconds: report(f"  {label} | ... still running, {seconds:.0f} s"))
    return returncode, tail
