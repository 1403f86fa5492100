"""One release's parser contract, read without building anything: its wheel installed with --no-deps
into a throw-away folder put first on PYTHONPATH (the rest of the stack from the driver's own
environment), then argspec's own snapshot code, plus each option's default (what the bundle inherits
where it sets nothing).

`python -m bundle.upgrade.parser_snapshot OUT.json` is the child process run with that PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bundle.errors import EnvironmentProblem
from bundle.run import run

# parser name (bundle.rules.argspec.SPECS) -> the distribution that owns it
PARSERS = {"sglang-server": "sglang", "smg": "smg"}


def _jsonable(value):
    if value is argparse.SUPPRESS:
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


def snapshot_here() -> dict:
    """Run inside the child: {parser name: argspec snapshot whose options also carry `default`}."""
    from importlib.metadata import version

    from bundle.rules.argspec import real_parser, spec_from_parser

    out = {}
    for name, dist in PARSERS.items():
        parser = real_parser(name)
        spec = spec_from_parser(parser, package_version=version(dist))
        defaults = {a.dest: _jsonable(a.default) for a in parser._actions if a.option_strings}
        for option in spec["options"]:
            option["default"] = defaults.get(option["dest"])
        out[name] = spec
    return out


def site_folder(wheels: list[Path]) -> Path:
    """A folder with exactly these wheels installed (--no-deps), made once per set of wheels."""
    key = "-".join(sorted(w.name.split("-")[0] + "-" + w.name.split("-")[1] for w in wheels))
    site = Path(tempfile.gettempdir()) / "bundle-upgrade" / f"site-{key}"
    if (site / ".complete").is_file():
        return site
    site.mkdir(parents=True, exist_ok=True)
    proc = run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--upgrade",
                "--target", str(site), *map(str, wheels)], timeout=900, check=False)  # unpacking local wheels
    if proc.returncode != 0:
        raise EnvironmentProblem(f"could not unpack {', '.join(w.name for w in wheels)} into {site}: "
                                 f"{proc.stderr.strip()[-400:]}",
                                 hint="check the disk space of the temporary folder; run again")
    (site / ".complete").write_text("")
    return site


def snapshot(wheels: list[Path], project_root: Path) -> dict:
    """The parsers of the given wheels, read in a child process (a minute: sglang imports torch), kept
    beside the unpacked wheels for the next run."""
    site = site_folder(wheels)
    kept = site / ".snapshot.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(project_root)]),
               "PYTHONDONTWRITEBYTECODE": "1"}
        proc = run([sys.executable, "-m", "bundle.upgrade.parser_snapshot", out.name], env=env, timeout=900,
                   check=False)
        if proc.returncode != 0:
            raise EnvironmentProblem(f"the parsers of {', '.join(w.name for w in wheels)} could not be read: "
                                     f"{(proc.stderr or proc.stdout).strip()[-600:]}",
                                     hint="the driver's environment needs the parser's light dependencies "
                                          "(requirements/dev.txt)")
        kept.write_text(Path(out.name).read_text())
        return json.loads(kept.read_text())


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(snapshot_here(), indent=1))
