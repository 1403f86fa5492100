"""The census of SGLang's own DeepSeek-V4 model, and the closed form held to it.

census_probe.py builds the pinned SGLang's `DeepseekV4ForCausalLM` on the meta device inside the no-GPU
image (where SGLang's whole closure is installed) and counts what one rank holds, by weight class, for
each rank layout; `run_in_image` runs it there and returns its JSON. `compare` sets the closed form of
cost_model.py against a census, class by class and layout by layout: every class the census counts must
be in the closed form within TOLERANCE (or, for a class under SMALL_BYTES, within SMALL_BYTES), and every
class the closed form reads must be in the census, so a dropped class or a changed dtype shows.

The config.json counted is the one in use: the model folder's when it is there, else the image audit's
copy of DeepSeek-V4-Flash's (bundle/images/audit/deepseek_v4_flash/config.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bundle import log_lines
from bundle import paths
from bundle.verify import cost_model

PROBE = Path(__file__).resolve().with_name("census_probe.py")
AUDIT_CONFIG = Path("bundle/images/audit/deepseek_v4_flash/config.json")
# The layouts the topologies use: TP 1, 2, 4, 8 with EP off, and EP on (EP = TP) where it differs.
LAYOUTS: tuple[cost_model.Layout, ...] = (
    cost_model.Layout(1), cost_model.Layout(2), cost_model.Layout(4), cost_model.Layout(8),
    cost_model.Layout(2, 2), cost_model.Layout(4, 4), cost_model.Layout(8, 8))
TOLERANCE = 0.03
SMALL_BYTES = 2_000_000  # a class this small (norms) is held to this many bytes, not to a percentage
# Tables a step reads only by the rows its tokens index: counted by the census (what the rank holds), not
# part of a step's bytes, and not modelled by the closed form beyond the embedding.
INDEXED_TABLES = ("rotary tables", "hash routing table")
TIMEOUT_S = 1800.0
MOUNT = "/census"


def config_in_use(model_folder: str | Path | None) -> Path:
    """The model folder's config.json when it is there, else the audit's DeepSeek-V4-Flash config.json."""
    if model_folder and (Path(model_folder) / "config.json").is_file():
        return Path(model_folder) / "config.json"
    return paths.project_root() / AUDIT_CONFIG


def layout_args(layouts: tuple[cost_model.Layout, ...] = LAYOUTS) -> list[str]:
    out = []
    for layout in layouts:
        out += ["--layout", f"{layout.tp}:{layout.ep}" + (":dpa" if layout.dp_attention else "")]
    return out


def run_in_image(image: str, config: Path, out_dir: Path, *, layouts: tuple[cost_model.Layout, ...] = LAYOUTS,
                 timeout: float = TIMEOUT_S, draft: str | None = None) -> dict:
    """The census of `config` counted by SGLang inside `image` (no network, the probe and the config folder
    mounted read-only); its JSON, with how it was made. A failure raises with the probe's output.
    `draft` ("mtp"): the census of the speculative draft SGLang builds beside the model instead."""
    from bundle.errors import Failed
    from bundle.stack import engine

    out_dir.mkdir(parents=True, exist_ok=True)
    command = ["python3", f"{MOUNT}/census_probe.py", "--config-dir", f"{MOUNT}/model",
               "--out", f"{MOUNT}/out/census.json", *layout_args(layouts), *(["--draft", draft] if draft else [])]
    run = engine.run_audit_container(image, command, volumes=[(PROBE, f"{MOUNT}/census_probe.py", "ro"),
                                                              (config.parent, f"{MOUNT}/model", "ro"),
                                                              (out_dir, f"{MOUNT}/out", "rw")],
                                     env={"PYTHONUNBUFFERED": "1"}, timeout=timeout, user="0")
    produced = out_dir / "census.json"
    if not produced.is_file():
        raise Failed(f"the census probe wrote nothing in {image} (exit {run.returncode}): "
                     + "\n".join(log_lines.lines(run.output)[-20:]))
    census = json.loads(produced.read_text())
    census["made"] = {"image": image, "command": command, "exit": run.returncode, "config": str(config)}
    return census


@dataclass(frozen=True)
class Delta:
    layout: str
    weight_class: str
    census_bytes: float | None  # None: the census has no such class
    model_bytes: float | None  # None: the closed form has no such class

    @property
    def relative(self) -> float | None:
        if not self.census_bytes or self.model_bytes is None:
            return None
        return (self.model_bytes - self.census_bytes) / self.census_bytes

    @property
    def ok(self) -> bool:
        if self.census_bytes is None or self.model_bytes is None:
            return False
        if abs(self.model_bytes - self.census_bytes) <= SMALL_BYTES and self.census_bytes < SMALL_BYTES * 10:
            return True
        return abs(self.relative) <= TOLERANCE

    def line(self) -> str:
        if self.census_bytes is None:
            return f"{self.layout} {self.weight_class}: in the closed form ({self.model_bytes / 1e9:.3f} GB), not in the census"
        if self.model_bytes is None:
            return f"{self.layout} {self.weight_class}: in the census ({self.census_bytes / 1e9:.3f} GB), not in the closed form"
        return (f"{self.layout} {self.weight_class}: census {self.census_bytes / 1e9:.4f} GB, closed form "
                f"{self.model_bytes / 1e9:.4f} GB ({(self.relative or 0) * 100:+.2f}%)")


def layout_of(entry: dict) -> cost_model.Layout:
    return cost_model.Layout(int(entry["tp"]), int(entry["ep"]), bool(entry.get("dp_attention")))


def compare(census: dict, model: cost_model.ModelShape) -> list[Delta]:
    """Every class of every layout the census counted, against the closed form's bytes on that rank."""
    deltas = []
    for entry in census["layouts"]:
        if "error" in entry:
            continue
        layout = layout_of(entry)
        held = model.held(layout)
        counted = {name: c["bytes"] for name, c in entry["classes"].items() if name not in INDEXED_TABLES}
        for name in sorted(set(counted) | set(held)):
            deltas.append(Delta(layout.name(), name, counted.get(name), held.get(name)))
    return deltas


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
