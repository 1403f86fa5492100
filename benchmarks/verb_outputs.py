"""Every verb's user-visible output, old tree against new: stdout, stderr, the exit code and the files a
render writes, for a fixed list of invocations that need no GPU and start nothing.

    git worktree add /tmp/old 17abb57
    .venv/bin/python benchmarks/verb_outputs.py /tmp/old . [--diff] [--only TEXT]

Both trees run with the same interpreter (PYTHONPATH switches the `bundle` package), each with its own
runs folder and scratch folder; the trees' own paths and the scratch paths are replaced by <TREE> and
<TMP> before comparing, so only what a user would see differently counts. The verbs that read the Docker
engine (status, down, logs) run against a project name no one uses, so they find nothing and stop nothing.

Prints one line per invocation (same / DIFFERENT, and in what) and, with --diff, the differences.
Exit status: 0 when every output is the same, 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# A project nobody runs: status, down and logs read the engine for it and find nothing to stop.
UNUSED_PROJECT = "verb-outputs-nobody"

FIXTURES = {
    "unused.yaml": f"project: {UNUSED_PROJECT}\n",
    "bad-schema.yaml": "project: demo\nnetwork:\n  front_port: eighty\nlevers:\n  speculativ: mtp\n",
    "bad-yaml.yaml": "project: demo\nmodel:\n  path: [unclosed\n",
    "not-a-mapping.yaml": "- just\n- a list\n",
}

VERBS = ("audit", "bench", "build", "doctor", "down", "launch", "lock", "logs", "model", "pull", "push",
         "render", "sign", "smoke", "status", "top", "tune", "upgrade", "validate", "verify")

# (label, arguments after `bundle`). {out}: a fresh folder for what the invocation writes; {fx}: fixtures.
CASES: list[tuple[str, list[str]]] = [
    ("bundle --help", ["--help"]),
    ("bundle --version", ["--version"]),
    ("bundle (no verb)", []),
    ("bundle nonsense", ["nonsense"]),
    *[(f"{verb} --help", [verb, "--help"]) for verb in VERBS],
    ("lock set-digest --help", ["lock", "set-digest", "--help"]),
    ("model check --help", ["model", "check", "--help"]),
    ("model pin --help", ["model", "pin", "--help"]),
    ("model fetch --help", ["model", "fetch", "--help"]),
    ("validate", ["validate"]),
    *[(f"validate {t}", ["validate", t]) for t in ("tp4", "pd", "dp")],
    ("validate (unknown topology)", ["validate", "nope"]),
    ("validate -c (missing file)", ["validate", "-c", "{fx}/missing.yaml"]),
    ("validate -c (schema errors)", ["validate", "-c", "{fx}/bad-schema.yaml"]),
    ("validate -c (YAML syntax error)", ["validate", "-c", "{fx}/bad-yaml.yaml"]),
    ("validate -c (not a mapping)", ["validate", "-c", "{fx}/not-a-mapping.yaml"]),
    ("validate -c (a folder)", ["validate", "-c", "{fx}"]),
    *[(f"render {t}", ["render", t]) for t in ("tp4", "pd", "dp")],
    *[(f"render {t} --target {target} -o DIR", ["render", t, "--target", target, "-o", "{out}"])
      for t in ("tp4", "pd", "dp") for target in ("k8s", "slurm")],
    ("render pd --rehearsal sim", ["render", "pd", "--rehearsal", "sim"]),
    ("render pd --target nope", ["render", "pd", "--target", "nope"]),
    ("render pd --target k8s (no -o)", ["render", "pd", "--target", "k8s"]),
    ("render (unknown topology)", ["render", "nope"]),
    ("model check (no model folder)", ["model", "check"]),
    ("status (nothing running)", ["status", "-c", "{fx}/unused.yaml"]),
    ("status --json (nothing running)", ["status", "-c", "{fx}/unused.yaml", "--json"]),
    ("status pd (nothing running)", ["status", "pd", "-c", "{fx}/unused.yaml"]),
    ("down pd (nothing running)", ["down", "pd", "-c", "{fx}/unused.yaml"]),
    ("down (nothing running)", ["down", "-c", "{fx}/unused.yaml"]),
    ("logs pd (nothing running)", ["logs", "pd", "-c", "{fx}/unused.yaml"]),
    ("logs (nothing running)", ["logs", "-c", "{fx}/unused.yaml"]),
    ("smoke pd (nothing running)", ["smoke", "pd", "-c", "{fx}/unused.yaml"]),
]


@dataclass
class Output:
    rc: int
    stdout: str
    stderr: str
    files: dict[str, str]


def run_case(tree: Path, scratch: Path, index: int, args: list[str], python: str) -> Output:
    """One invocation with `tree`'s code; its paths normalised."""
    out = scratch / f"out-{index}"
    runs = scratch / f"runs-{index}"  # its own, so the files an invocation writes there are its own
    fx = scratch / "fixtures"
    argv = [a.replace("{out}", str(out)).replace("{fx}", str(fx)) for a in args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BUNDLE_", "PYTHON"))}
    env |= {"PYTHONPATH": str(tree), "BUNDLE_RUNS_DIR": str(runs), "NO_COLOR": "1",
            "COLUMNS": "100", "TERM": "dumb"}
    try:
        done = subprocess.run([python, "-m", "bundle", *argv], cwd=scratch, env=env, capture_output=True,
                              text=True, timeout=180)
        rc, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        rc, stdout, stderr = -1, "", "(timed out after 180 s)"
    files = {}
    for folder, name in ((out, "-o DIR"), (runs, "runs")):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                files[f"{name}/{path.relative_to(folder)}"] = path.read_text(errors="replace")

    def norm(text: str) -> str:
        return text.replace(str(out), "<OUT>").replace(str(runs), "<RUNS>").replace(str(scratch), "<TMP>").replace(str(tree), "<TREE>")

    return Output(rc, norm(stdout), norm(stderr), {k: norm(v) for k, v in files.items()})


def differences(old: Output, new: Output) -> list[str]:
    what = []
    if old.rc != new.rc:
        what.append(f"exit {old.rc} -> {new.rc}")
    if old.stdout != new.stdout:
        what.append("stdout")
    if old.stderr != new.stderr:
        what.append("stderr")
    if old.files != new.files:
        changed = sorted(k for k in set(old.files) | set(new.files) if old.files.get(k) != new.files.get(k))
        what.append(f"files ({len(changed)}: {', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''})")
    return what


def unified(label: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"old {label}", f"new {label}", n=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the old tree (a checkout of the release)")
    parser.add_argument("new", type=Path, help="the new tree")
    parser.add_argument("--diff", action="store_true", help="print each difference")
    parser.add_argument("--only", metavar="TEXT", help="only the invocations whose label contains TEXT")
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    cases = [(i, label, argv) for i, (label, argv) in enumerate(CASES) if not args.only or args.only in label]
    with tempfile.TemporaryDirectory(prefix="verb-outputs-") as tmp:
        scratch = {}
        for name in trees:
            scratch[name] = Path(tmp) / name
            (scratch[name] / "fixtures").mkdir(parents=True)
            for file, text in FIXTURES.items():
                (scratch[name] / "fixtures" / file).write_text(text)
        width = max(len(label) for _, label, _ in cases)
        different = 0
        print(f"{'invocation':{width}}  verdict")
        for index, label, argv in cases:
            outputs = {name: run_case(tree, scratch[name], index, argv, sys.executable)
                       for name, tree in trees.items()}
            what = differences(outputs["old"], outputs["new"])
            different += bool(what)
            print(f"{label:{width}}  {'DIFFERENT: ' + '; '.join(what) if what else 'same'}"
                  f"  (exit {outputs['new'].rc})", flush=True)
            if what and args.diff:
                old, new = outputs["old"], outputs["new"]
                for part in ("stdout", "stderr"):
                    print(unified(f"{label} {part}", getattr(old, part), getattr(new, part)), end="")
                for file in sorted(set(old.files) | set(new.files)):
                    if old.files.get(file) != new.files.get(file):
                        print(unified(f"{label} {file}", old.files.get(file, ""), new.files.get(file, "")), end="")
        print(f"\n{len(cases) - different} of {len(cases)} the same, {different} different")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
