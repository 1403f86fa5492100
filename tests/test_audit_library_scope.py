"""The audit probe's library scan: the whole of site-packages when the sm120 check runs, else only
the libraries a choice can need and the kernels layer's modules (in-process, a fake site folder and a
cuobjdump that answers for any file; the real image is scanned by tests/test_audit.py's audits)."""

from __future__ import annotations

import json

import pytest

from bundle.images.audit import probe
from bundle.images.audit.kernels import COMMON_OPS, choice_libraries


def _site(tmp_path, monkeypatch):
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    for rel in (COMMON_OPS, "sgl_kernel/flash_ops.abi3.so", "vllm/_C.abi3.so", "flashinfer/data/aot/norm/norm.so",
                "triton/backends/nvidia/lib/cupti/libcupti.so.12"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(b"\x7fELF")
    manifest = tmp_path / "kernels.json"
    manifest.write_text(json.dumps({"modules": {"norm": {"path": str(site / "flashinfer/data/aot/norm/norm.so")}}}))
    cuobjdump = tmp_path / "cuobjdump"  # lists one sm_120a cubin for whatever it is given
    cuobjdump.write_text('#!/bin/sh\n[ "$1" = --list-elf ] && echo "ELF file    1: x.1.sm_120a.cubin"\nexit 0\n')
    cuobjdump.chmod(0o755)
    monkeypatch.setattr(probe, "_site_paths", lambda: [str(site)])
    return site, {"cuobjdump": str(cuobjdump), "kernels_manifest": str(manifest)}


def test_without_the_sm120_check_only_the_choices_libraries_and_the_built_modules_are_scanned(tmp_path, monkeypatch):
    site, inp = _site(tmp_path, monkeypatch)
    facts = probe.section_libraries({**inp, "library_subset": list(choice_libraries())})
    scanned = sorted(lib["path"].removeprefix(f"{site}/") for lib in facts["libraries"])
    assert scanned == ["flashinfer/data/aot/norm/norm.so", "sgl_kernel/flash_ops.abi3.so", COMMON_OPS]
    assert facts["scanned"] == 3 and facts["subset"] is True


def test_the_whole_scan_reads_every_library(tmp_path, monkeypatch):
    _, inp = _site(tmp_path, monkeypatch)
    facts = probe.section_libraries(inp)
    assert facts["scanned"] == 5 and facts["subset"] is False


@pytest.mark.parametrize(("only", "subset"), [(["levers", "kernels"], True), (["sm120", "levers"], False), (None, False)])
def test_the_audit_asks_for_the_whole_scan_only_when_the_sm120_check_runs(tmp_path, monkeypatch, only, subset):
    from bundle.config.loader import load_config
    from bundle.images import audit as audit_module
    from bundle.images.audit import tools
    from bundle.lock import load_lock
    from bundle.stack import engine

    sent = {}

    def probe_container(image, command, *, volumes, env, timeout, user=None):
        out = next(host for host, inside, _ in volumes if inside == audit_module.OUT_DIR)
        sent.update(json.loads((out / "input.json").read_text()))
        (out / "facts.json").write_text("{}")  # the checks then fail on missing facts: not what is asked here
        return engine.AuditRun(0, "")

    monkeypatch.setattr(engine, "run_audit_container", probe_container)
    monkeypatch.setattr(engine, "image_facts", lambda image: None)
    monkeypatch.setattr(tools, "ensure", lambda report=None: tmp_path)
    audit_module.audit("some/image:tag", load_config(None), load_lock(), config_name="bundle.yaml", only=only)
    assert "libraries" in sent["sections"]
    assert ("library_subset" in sent) is subset
    if subset:
        assert COMMON_OPS in sent["library_subset"]
