"""`bundle audit`: the image checked from inside, against the lock and the config, without a GPU.

One throw-away container of the image (no network) runs probe.py with the image's own Python: it
lists every distribution and file, imports every top-level module, runs the server's and the
router's --help, resolves every rendered server command line with SGLang's own ServerArgs (the
platform reported as sm_120), lists each native library's cubins and PTX with cuobjdump and writes
a CycloneDX SBOM. The checks (checks_*.py, in registry.py's order) judge those facts on the host.

    audit(image, dep)  -> Audit (results, libraries, predicted, packages; as_dict() is the --json)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bundle import paths
from bundle import topology as topologies
from bundle.config.model import Deployment
from bundle.errors import EXIT_FAILED, Failed
from bundle.findings import Level
from bundle.images.audit import tools
from bundle.images.audit.context import AuditContext, ServerCommand, locked_packages, overlay_distribution
from bundle.images.audit.core import CheckResult, finding_dict
from bundle.lock import Lock
from bundle.render.compose import render
from bundle.render.compose_files import service_environments

HERE = Path(__file__).resolve().parent
SHIPPED_CONFIG = HERE / "deepseek_v4_flash"  # config.json written from the public description
PROBE_DIR, TOOLS_DIR, OUT_DIR, MODEL_DIR = ("/opt/bundle-audit/probe", "/opt/bundle-audit/tools",
                                            "/opt/bundle-audit/out", "/model")
PROBE_TIMEOUT = 1800.0


@dataclass
class Audit:
    image: str
    results: list[CheckResult]
    ctx: AuditContext
    seconds: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(r.level == Level.FAIL for r in self.results) else 0

    def as_dict(self) -> dict:
        from bundle.images.audit.checks_sglang import predicted
        from bundle.images.audit.checks_sm120 import libraries

        try:
            libs = libraries(self.ctx)
        except RuntimeError:
            libs = []
        facts = self.ctx.facts.get("packages") or {}
        return {
            "image": self.image,
            "lock_hash": self.ctx.lock.hash,
            "image_lock_hash": self.ctx.labels.get("io.sglang-bundle.lock-hash"),
            "config": self.ctx.config_name,
            "model_config": self.ctx.model_source,
            "status": "FAIL" if self.exit_code else "OK",
            "findings": [{**finding_dict(f), "check": r.name} for r in self.results for f in r.findings],
            "checks": [r.as_dict() for r in self.results],
            "libraries": [{"path": lib["path"], "size": lib["size"], "cubins": lib["cubins"], "ptx": lib["ptx"],
                           "runs_on_sm120": lib["runs_on_sm120"], "how": lib["how"]} for lib in libs],
            "predicted": predicted(self.ctx),
            "packages": {
                "python": facts.get("python"),
                "installed": {d["name"]: d["version"] for d in facts.get("distributions", [])
                              if d["site"].startswith("/opt/venv/")},
                "locked": {p.name: p.version for p in self.ctx.packages.values()},
            },
            "sbom": {k: v for k, v in (self.ctx.facts.get("sbom") or {}).items() if k != "path"},
            "probe_seconds": self.ctx.facts.get("_seconds", {}),
        }


def server_commands(dep: Deployment, lock: Lock) -> list[ServerCommand]:
    """Every SGLang server command line of every topology, rendered as compose will run it, with the
    environment its service sets (the levers' SGLANG_* variables included)."""
    out = []
    for name in topologies.NAMES:
        entry = topologies.get(name)
        rendered = render(dep, entry, image=lock.image_ref, lock_hash=lock.hash)
        environments = service_environments(rendered.compose_files, rendered.env)
        for role in dep.roles(entry):
            args = rendered.server_args(role.name)
            if args is None:
                continue
            env = {k: v for k, v in environments.get(role.name, {}).items() if k.startswith(("SGLANG_", "SGL_"))}
            env.update({k: v for k, v in (role.env or {}).items()})
            out.append(ServerCommand(f"{name}/{role.name}", name, role.name, ".".join(role.key_path), args, env))
    return out


def model_folder(dep: Deployment) -> tuple[Path, str]:
    """The model folder to mount at /model: the real one when it holds a config.json, else the
    DeepSeek-V4-Flash config.json shipped with the bundle."""
    real = Path(dep.model_path).expanduser()
    if (real / "config.json").is_file():
        return real, f"{real}/config.json"
    return SHIPPED_CONFIG, f"shipped {SHIPPED_CONFIG.relative_to(paths.PACKAGE_DIR.parent)}/config.json " \
                           f"({real} has none)"


def audit(image: str, dep: Deployment, lock: Lock, *, config_name: str, only: list[str] | None = None,
          skip: list[str] | None = None, deep: bool = False, sbom_out: Path | None = None,
          on_progress=None) -> Audit:
    from bundle.images.audit.kernels import choice_libraries
    from bundle.images.audit.registry import CHECKS, SECTIONS, WHOLE_LIBRARY_SCAN, run_checks
    from bundle.stack import engine

    root = paths.project_root()
    names = [c.name for c in CHECKS if not ((only and c.name not in only) or (skip and c.name in skip))]
    sections = sorted({s for n in names for s in SECTIONS[n]})
    facts_img = engine.image_facts(image)
    labels = facts_img.labels if facts_img else {}
    commands = server_commands(dep, lock)
    model_dir, model_source = model_folder(dep)
    ctx = AuditContext(image=image, lock=lock, packages=locked_packages(lock), overlay=overlay_distribution(root, lock),
                       commands=commands, config_name=config_name, model_source=model_source, labels=labels,
                       router_module=topologies.ROUTER_MODULE)
    tool_dir = tools.ensure(on_progress)
    with tempfile.TemporaryDirectory(prefix="bundle-audit-") as tmp:
        out = Path(tmp)
        out.chmod(0o777)  # the image's user (uid 10001) writes the facts here
        inp = {"sections": sections, "deep": deep,
               "lock_names": [p.name for p in ctx.packages.values()] + ([ctx.overlay] if ctx.overlay else []),
               "commands": {c.name: {"argv": c.argv, "env": c.env} for c in commands},
               "router_module": topologies.ROUTER_MODULE,
               "cuobjdump": f"{TOOLS_DIR}/{tools.CUOBJDUMP}", "tools_path": f"{TOOLS_DIR}/py",
               "sbom_path": f"{OUT_DIR}/sbom.cdx.json"}
        if not any(n in WHOLE_LIBRARY_SCAN for n in names):
            inp["library_subset"] = list(choice_libraries())
        (out / "input.json").write_text(json.dumps(inp))
        if on_progress:
            on_progress(f"probing {image} ({', '.join(sections)}) ...")
        run = engine.run_audit_container(
            image, ["python", f"{PROBE_DIR}/probe.py", f"{OUT_DIR}/input.json", f"{OUT_DIR}/facts.json"],
            volumes=[(HERE, PROBE_DIR, "ro"), (tool_dir, TOOLS_DIR, "ro"), (out, OUT_DIR, "rw"),
                     (model_dir, MODEL_DIR, "ro")],
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            timeout=PROBE_TIMEOUT)
        facts_file = out / "facts.json"
        if not facts_file.is_file():
            raise Failed(f"the audit probe wrote nothing in {image} (exit {run.returncode}): "
                         f"{run.output.strip()[-600:]}",
                         hint="run with --debug; the image needs /opt/venv/bin/python (`python` on PATH)")
        ctx.facts = json.loads(facts_file.read_text())
        if run.returncode != 0:
            ctx.facts.setdefault("probe_exit", {"returncode": run.returncode, "output": run.output[-2000:]})
        if sbom_out is not None and (out / "sbom.cdx.json").is_file():
            sbom_out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / "sbom.cdx.json", sbom_out)
    results = run_checks(ctx, only=only, skip=skip)
    return Audit(image=image, results=results, ctx=ctx)


def sbom_of(image: str) -> bytes:
    """The CycloneDX SBOM (JSON, reproducible: no serial number or timestamp) of `image`'s venv,
    written by cyclonedx-bom inside a container of it; a BundleError when it cannot be made."""
    from bundle.stack import engine

    tool_dir = tools.ensure()
    with tempfile.TemporaryDirectory(prefix="bundle-sbom-") as tmp:
        out = Path(tmp)
        out.chmod(0o777)
        (out / "input.json").write_text(json.dumps({"sections": ["sbom"], "tools_path": f"{TOOLS_DIR}/py",
                                                    "sbom_path": f"{OUT_DIR}/sbom.cdx.json"}))
        run = engine.run_audit_container(
            image, ["python", f"{PROBE_DIR}/probe.py", f"{OUT_DIR}/input.json", f"{OUT_DIR}/facts.json"],
            volumes=[(HERE, PROBE_DIR, "ro"), (tool_dir, TOOLS_DIR, "ro"), (out, OUT_DIR, "rw")],
            env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout=600)
        sbom = out / "sbom.cdx.json"
        if not sbom.is_file():
            facts = json.loads((out / "facts.json").read_text()) if (out / "facts.json").is_file() else {}
            raise Failed(f"the SBOM of {image} could not be written: "
                         f"{(facts.get('sbom') or {}).get('error') or run.output.strip()[-400:]}",
                         hint="run with --debug; bundle build --no-sbom skips it")
        return sbom.read_bytes()
