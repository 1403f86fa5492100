"""`bundle audit`: the judging rules on their own (no engine), then the real stand-in image built and
audited inside a container of it, and images with planted faults that the audit must fail, naming
each fault: a second copy of a package, a distribution that differs from the lock, a package the
lock does not know, a library with no sm_120 code on a path a lever selects."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from bundle.findings import Level
from bundle.images.audit import checks_packages, sm120
from bundle.images.audit.context import AuditContext, LockedPackage, locked_packages
from bundle.lock import load_lock

REPO = Path(__file__).resolve().parents[1]
SITE = "/opt/venv/lib/python3.12/site-packages"


# ---- the rules, no engine ----

@pytest.mark.parametrize("cubins,ptx,runs", [
    (["sm_80", "sm_86", "sm_90a"], [], False),            # sglang-kernel's flash_ops
    (["sm_90a", "sm_100", "sm_103a"], [], False),          # flashmla_ops: sm_100 is another major
    (["sm_80", "sm_90", "sm_120a"], [], True),             # common_ops: the exact arch
    (["sm_121"], [], False),                               # a newer minor does not run on 12.0
    (["sm_120"], [], True),
    (["sm_100f"], [], False),                              # a family cubin stays in its family
    ([], ["sm_90"], True),                                 # plain PTX is compiled forward
    ([], ["sm_90a"], False),                               # arch-specific PTX is not
    ([], ["sm_121"], False),
    (["sm_75"], ["sm_86"], True),
])
def test_sm120_coverage_follows_cudas_compatibility_rules(cubins, ptx, runs):
    assert sm120.coverage(cubins, ptx)["runs_on_sm120"] is runs


def _elf(path: Path, sections: list[bytes], machine: int = 62) -> Path:
    """A little-endian ELF64 with these section names (and the null and name-table sections)."""
    names = b"\0" + b"".join(n + b"\0" for n in sections) + b".shstrtab\0"
    count = len(sections) + 2
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    header[0x12:0x14] = machine.to_bytes(2, "little")
    header[0x28:0x30] = (64 + len(names)).to_bytes(8, "little")  # the section headers after the names
    header[0x3A:0x3C], header[0x3C:0x3E] = (64).to_bytes(2, "little"), count.to_bytes(2, "little")
    header[0x3E:0x40] = (count - 1).to_bytes(2, "little")
    table = bytearray(64 * count)
    last = table[64 * (count - 1):]
    last[0x18:0x20], last[0x20:0x28] = (64).to_bytes(8, "little"), len(names).to_bytes(8, "little")
    table[64 * (count - 1):] = last
    path.write_bytes(bytes(header) + names + bytes(table))
    return path


def test_only_a_library_without_a_fatbin_section_is_kept_from_cuobjdump(tmp_path):
    from bundle.images.audit.probe import _may_hold_device_code

    assert not _may_hold_device_code(str(_elf(tmp_path / "libplain.so", [b".text", b".rodata", b".nv.info"])))
    for name in (b".nv_fatbin", b"__nv_relfatbin", b".nvFatBinSegment"):
        assert _may_hold_device_code(str(_elf(tmp_path / "libdevice.so", [b".text", name])))
    assert _may_hold_device_code(str(_elf(tmp_path / "k.cubin", [b".text"], machine=190)))  # a CUDA ELF itself
    (tmp_path / "k.fatbin").write_bytes(b"\x50\xed\x55\xba" + bytes(60))  # no ELF: cuobjdump decides
    assert _may_hold_device_code(str(tmp_path / "k.fatbin"))
    (tmp_path / "cut.so").write_bytes(_elf(tmp_path / "whole.so", [b".text"]).read_bytes()[:80])
    assert _may_hold_device_code(str(tmp_path / "cut.so"))  # a table past the end: not read, scanned


def test_the_locks_packages_are_read_with_their_layer_and_hashes():
    packages = locked_packages(load_lock())
    assert packages["torch"].version == "2.14.1" and packages["torch"].layer == "framework"
    assert packages["uv"].layer == "base" and packages["setuptools"].layer == "base"
    assert packages["nixl-cu13"].layer == "pd"
    assert all(len(h) == 64 for h in packages["torch"].hashes) and len(packages["torch"].hashes) > 1


def _dist(name, version, site=SITE, **record):
    return {"name": name, "version": version, "path": f"{site}/{name}-{version}.dist-info", "site": site,
            "installer": "uv", "direct_url": None, "top_level": [name], "pth_owned": [],
            "record": {"present": True, "files": 3, "missing": [], "n_missing": 0, "changed": [], "n_changed": 0,
                       **record}}


def _ctx(dists, shadowed=None):
    packages = {"six": LockedPackage("six", "1.17.0", "framework", frozenset()),
                "idna": LockedPackage("idna", "3.20", "framework", frozenset())}
    facts = {"packages": {"distributions": dists, "shadowed": shadowed or {}, "pth_files": [], "egg_links": [],
                          "pythonpath": "", "deep": False}}
    return AuditContext(image="x", lock=None, packages=packages, overlay=None, commands=[], config_name="bundle.yaml",
                        model_source="", facts=facts)


def _levels(findings):
    return [(f.level, f.what) for f in findings]


def test_a_missing_a_changed_and_an_unknown_distribution_are_each_a_named_failure():
    _, findings = checks_packages.installed_equals_lock(_ctx([_dist("idna", "3.10"), _dist("tomli-w", "1.2.0")]))
    fails = [w for lv, w in _levels(findings) if lv == Level.FAIL]
    assert any(w.startswith("six==1.17.0") and "not installed" in w for w in fails)
    assert any(w.startswith("idna 3.10 is installed, the lock pins 3.20") for w in fails)
    assert any(w.startswith("tomli-w 1.2.0 is installed but unknown to the lock") for w in fails)


def test_a_clash_between_two_distributions_is_told_apart_from_a_file_changed_after_install():
    clash = _dist("torch-c-dlpack-ext", "0.1.5", changed=["build_backend.py"],
                  clash={"build_backend.py": "flashinfer-python"})
    edited = _dist("six", "1.17.0", changed=["six.py"])
    _, findings = checks_packages.files_as_installed(_ctx([clash, edited, _dist("idna", "3.20")]))
    assert (Level.WARN, "build_backend.py is installed by both torch-c-dlpack-ext and flashinfer-python; "
                        "the copy on disk is flashinfer-python's (an upstream packaging clash)") in _levels(findings)
    assert (Level.FAIL, "six: six.py differs from its RECORD (changed after install)") in _levels(findings)


def test_a_distribution_twice_on_sys_path_and_a_shadowed_module_fail():
    ctx = _ctx([_dist("six", "1.17.0"), _dist("six", "1.17.0", site="/opt/stale")],
               shadowed={"six": ["/opt/stale", SITE]})
    _, findings = checks_packages.installed_once(ctx)
    whats = [w for lv, w in _levels(findings) if lv == Level.FAIL]
    assert any(w.startswith("six is installed 2 times") for w in whats)
    assert any(w.startswith("module 'six' is in 2 folders on sys.path; /opt/stale shadows") for w in whats)


# ---- the real stand-in image, audited inside a container of it ----

def _write_config(tmp: Path, levers: dict) -> Path:
    path = tmp / "bundle.yaml"
    path.write_text("levers:\n" + "".join(f"  {k}: {v}\n" for k, v in levers.items()))
    return path


def _audit(capsys, image: str, config: Path, *only: str) -> tuple[int, dict]:
    from bundle.cli import main

    capsys.readouterr()
    args = ["audit", "--image", image, "-c", str(config), "--json"]
    for name in only:
        args += ["--only", name]
    code = main(args)
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def standin_image(standin_chain) -> str:
    """The stand-in runtime image of this lock (tests/conftest.py's session build)."""
    return standin_chain["image"]


@pytest.fixture(scope="module")
def clean_audit(standin_image, tmp_path_factory):
    """The whole audit of the stand-in image with `levers.moe_runner: auto` (about 6 minutes here)."""
    config = _write_config(tmp_path_factory.mktemp("audit"), {"moe_runner": "auto"})
    out = tmp_path_factory.mktemp("audit-out") / "audit.json"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "bundle"), "audit", "--image", standin_image, "-c",
                           str(config), "--json"], cwd=REPO, capture_output=True, text=True, timeout=1800,
                          check=False)
    out.write_text(proc.stdout)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the whole audit (clean_audit) runs in whichever of its tests comes first
def test_the_standin_image_passes_the_audit_with_the_default_levers(clean_audit):
    code, report, stderr = clean_audit
    fails = [f for f in report["findings"] if f["level"] == "FAIL"]
    assert code == 0 and report["status"] == "OK", (fails, stderr[-2000:])
    assert report["lock_hash"] == report["image_lock_hash"]
    installed, locked = report["packages"]["installed"], report["packages"]["locked"]
    assert installed["torch"] == locked["torch"] == "2.14.1" and installed["sglang"] == "0.5.23"
    assert report["packages"]["python"].startswith("3.12.")
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["help"]["level"] == "OK" and checks["pip-check"]["level"] == "OK"
    assert report["sbom"]["components"] >= len(locked) and report["sbom"]["spec_version"] == "1.6"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_audit_reports_sglang_kernels_fa3_and_flashmla_unable_to_run_on_sm120(clean_audit):
    _, report, _ = clean_audit
    libs = {lib["path"].removeprefix(SITE + "/"): lib for lib in report["libraries"]}
    assert libs["sgl_kernel/flash_ops.abi3.so"]["runs_on_sm120"] is False
    assert libs["sgl_kernel/flash_ops.abi3.so"]["cubins"] == ["sm_80", "sm_86", "sm_90a"]
    assert libs["sgl_kernel/flashmla_ops.abi3.so"]["runs_on_sm120"] is False
    assert "sm_120a" in libs["sgl_kernel/sm100/common_ops.abi3.so"]["cubins"]
    assert libs["sgl_kernel/sm100/common_ops.abi3.so"]["runs_on_sm120"] is True
    assert libs["torch/lib/libtorch_cuda.so"]["runs_on_sm120"] is True


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_moe_runner_auto_is_predicted_as_flashinfer_mxfp4_with_the_dsv4_attention_backend(clean_audit):
    _, report, _ = clean_audit
    predicted = report["predicted"]
    assert {"tp4/server", "pd/prefill", "pd/decode"} <= set(predicted)
    for server, p in predicted.items():
        assert p["moe_runner_backend"] == "flashinfer_mxfp4", server
        assert p["attention_backend"] == "dsv4" and p["page_size"] == 256, server
        assert p["sm120_sparse_mla_backend"] == "flashinfer", server
    assert predicted["pd/prefill"]["disaggregation_mode"] == "prefill"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_standin_holds_the_gpu_images_real_kernels_layer_and_its_fused_moe_loads_with_rtld_now(
        clean_audit, standin_image):
    """CI builds the kernels layer `make image` builds (not one stand-in module): every module the
    predicted choices may load, the fused MoE cut to MXFP8 x MXFP4, and the audit's kernels check (each
    library's sm_120a SASS, the cut loaded with RTLD_NOW against SGLang's calls) passes on it."""
    from bundle.images import kernels_jit

    _, report, _ = clean_audit
    check = next(c for c in report["checks"] if c["name"] == "kernels")
    assert check["level"] == "OK", check
    manifest = json.loads(subprocess.run(["docker", "run", "--rm", "--entrypoint", "cat", standin_image,
                                          "/opt/bundle/kernels.json"], capture_output=True, text=True,
                                         check=True).stdout)
    assert set(manifest["modules"]) == set(kernels_jit.default_modules())
    assert f"{len(manifest['modules'])} module(s) prebuilt for 12.0a" in check["summary"], check["summary"]
    moe = manifest["modules"]["fused_moe_120"]
    assert moe["generator"] == "kernels_narrow:gen_fused_moe_120_module" and moe["pairs_kept"] == ["fp8_fp4"]
    assert "bf16_fp4" in moe["pairs_left_out"] and moe["left_out_symbols"] > 0


# ---- planted faults: each one fails the audit and is named ----

# Enter a planted module in the kernels layer's manifest, as the layer would have.
_MANIFEST = ("python -c \"import json; p = '/opt/bundle/kernels.json'; m = json.load(open(p)); "
             "m['modules']['{name}'] = dict(path='{{site}}/flashinfer/data/aot/{name}/{name}.so', size=0, "
             "generator='flashinfer.jit.{name}:gen_{name}_module'); json.dump(m, open(p, 'w'))\"")

FAULTS = {
    # A stale copy of a package on sys.path ahead of the venv (the original deployment's shadowing).
    "second-copy": ("RUN mkdir /opt/stale && cp -a {site}/six.py {site}/six-1.17.0.dist-info /opt/stale/\n"
                    "ENV PYTHONPATH=/opt/stale\n", "once", "six is installed 2 times"),
    # Someone pip-installed another version over the lock's.
    "differs": ("RUN uv pip install --no-deps idna==3.10\n", "lock",
                "idna 3.10 is installed, the lock pins 3.20"),
    # A package nobody pinned.
    "unknown": ("RUN uv pip install --no-deps tomli-w==1.2.0\n", "lock",
                "tomli_w 1.2.0 is installed but unknown to the lock"),
    # sglang-kernel's common_ops (which the marlin MoE runner needs) replaced by a build with no
    # sm_120 code.
    "no-sm120": ("RUN cp {site}/sgl_kernel/flashmla_ops.abi3.so {site}/sgl_kernel/sm100/common_ops.abi3.so\n",
                 "levers", "moe_runner_backend=marlin needs sgl_kernel/sm100/common_ops.abi3.so, which has "
                           "no code for sm_120"),
    # A module of the kernels layer (DeepSeek-V4's sparse MLA) gone from where FlashInfer's loader looks first.
    "missing-module": ("RUN rm {site}/flashinfer/data/aot/sparse_mla_sm120/sparse_mla_sm120.so\n", "kernels",
                       "sparse_mla_sm120: the kernels layer built it but its library is missing"),
    # SGLang's flashinfer_mxfp4 runner calling the fused MoE without MXFP8 activation scaling: FlashInfer's
    # binding then runs its bf16 x fp4 runner, a pair the layer's cut left out (docker/kernels_narrow.py).
    "moe-pair": ("RUN sed -i '/^ *use_mxfp8_act_scaling=use_mxfp8_act_scaling,$/d' "
                 "{site}/sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py\n", "kernels",
                 "asks for bf16 x fp4 (moe_gemm_kernels_bf16_fp4.cu), left out of this image's fused MoE"),
    # A module built for another arch: mhc's library replaced by one holding sm_80/86/90a cubins only
    # (sglang-kernel's FlashAttention 3) and entered in the kernels layer's manifest.
    "wrong-arch": ("RUN mkdir -p {site}/flashinfer/data/aot/mhc && cp {site}/sgl_kernel/flash_ops.abi3.so "
                   "{site}/flashinfer/data/aot/mhc/mhc.so && " + _MANIFEST.format(name="mhc") + "\n",
                   "kernels", "mhc: no sm_120a SASS (cubins sm_80, sm_86, sm_90a): built for another arch"),
    # A module calling the driver API linked without libcuda (an empty link stub under --as-needed).
    "no-libcuda": ("RUN mkdir -p {site}/flashinfer/data/aot/sampling && printf 'int cuInit(unsigned);\\n"
                   "int f(void) {{ return cuInit(0); }}\\n' > /tmp/d.c && cc -shared -fPIC -o "
                   "{site}/flashinfer/data/aot/sampling/sampling.so /tmp/d.c && "
                   + _MANIFEST.format(name="sampling") + "\n",
                   "kernels", "sampling: calls the driver API (cuInit, ...) without libcuda.so.1 in NEEDED"),
    # One of the TileLang indexer kernels the layer compiled gone from its cache entry.
    "missing-tilelang": ("RUN python -c \"import json, os; m = json.load(open('/opt/bundle/kernels.json')); "
                         "os.remove(m['tilelang']['kernels']['fp8_paged_mqa_logits/split_kv=8']['library'])\"\n",
                         "kernels", "tilelang fp8_paged_mqa_logits/split_kv=8: the kernels layer built it but its "
                                    "library is missing"),
    # A second CUDA compiler beside the lock's.
    "second-nvcc": ("RUN cp /usr/local/cuda/bin/nvcc /usr/local/bin/nvcc\n", "toolchain", "2 CUDA compilers"),
}


@pytest.fixture(scope="module")
def planted_audit(standin_image, tmp_path_factory):
    """One image with every planted fault, audited once by the checks that must catch them (with
    `levers.moe_runner: marlin`, the lever the sm_120 fault is planted under): each fault is its own
    finding, so one build and one audit stand for four (about 4 minutes saved on CI's 2 cores)."""
    from bundle.stack import engine

    tmp = tmp_path_factory.mktemp("planted")
    # Every RUN in one step, so one layer: each layer's export walks the image's whole tree on
    # fuse-overlayfs (about 8.5 s a layer, docs/images.md). The ENV lines stay instructions.
    lines = [line for step, _, _ in FAULTS.values() for line in step.format(site=SITE).splitlines()]
    runs = [line.removeprefix("RUN ") for line in lines if line.startswith("RUN ")]
    others = [line for line in lines if not line.startswith("RUN ")]
    steps = "".join(f"{line}\n" for line in others) + "RUN " + " \\\n && ".join(runs) + "\n"
    (tmp / "Dockerfile").write_text(f"FROM {standin_image}\nUSER 0\n{steps}USER 10001:10001\n")
    tag = f"bundle-test/audit-faults:{uuid.uuid4().hex[:8]}"
    engine.build_image(context=tmp, dockerfile=tmp / "Dockerfile", tags=[tag], build_args={},
                       labels={}, use_buildx=engine.buildx_available())
    from bundle.cli import main

    args = ["audit", "--image", tag, "-c", str(_write_config(tmp, {"moe_runner": "marlin"})), "--json"]
    for check in sorted({check for _, check, _ in FAULTS.values()}):
        args += ["--only", check]
    out = io.StringIO()
    try:  # in-process, as `bundle audit` (its coverage counts): the JSON report is all of stdout
        with contextlib.redirect_stdout(out):
            code = main(args)
    finally:
        subprocess.run(["docker", "image", "rm", tag], capture_output=True, check=False)
    return code, json.loads(out.getvalue())


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_planted_fault_fails_the_audit_and_is_named(fault, planted_audit):
    _, check, expected = FAULTS[fault]
    code, report = planted_audit
    assert code == 1 and report["status"] == "FAIL"
    fails = [f for f in report["findings"] if f["level"] == "FAIL"]
    # Named, with a fix, by the check that owns it.
    named = [f for f in fails if expected in f["what"] and f["check"] == check]
    assert named, [(f["check"], f["what"]) for f in fails]
    assert all(f["fix"] for f in named)


# ---- bundle verify: a live container against the lock ----

@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_verify_finds_a_package_installed_into_a_running_container(standin_image):
    from bundle import paths
    from bundle.images.verify import verify_container

    name = f"bundle-test-verify-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "run", "-d", "--name", name, "--user", "0", "--entrypoint", "sleep", standin_image,
                    "600"], check=True, capture_output=True)
    try:
        clean = verify_container(name, load_lock(), paths.project_root())
        assert clean.level != Level.FAIL, clean.as_dict()
        subprocess.run(["docker", "exec", name, "uv", "pip", "install", "-q", "--no-deps", "idna==3.10"],
                       check=True, capture_output=True)
        changed = verify_container(name, load_lock(), paths.project_root())
    finally:
        # -v: the image declares VOLUME /var/cache/sglang, so the container has an anonymous volume
        # that `rm -f` alone would leave behind.
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
    assert changed.level == Level.FAIL
    assert any(f.what == f"{name}: idna 3.10 is installed, the lock pins 3.20 "
                         f"({SITE}/idna-3.10.dist-info)" for f in changed.findings), changed.as_dict()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_images_one_nvcc_compiles_an_sm120a_kernel_without_a_gpu(standin_image):
    """Why no devel base is needed for the JIT compilers (docs/images.md): /usr/local/cuda, made of the
    lock's [cuda] wheels, and the image's gcc build an sm_120a cubin with no GPU and no network."""
    from bundle.images.audit import tools

    script = ("test \"$(readlink -f /usr/local/cuda/bin/nvcc)\" = "
              f"{SITE}/nvidia/cu13/bin/nvcc && cd /tmp && printf '__global__ void k(float*x){{x[threadIdx.x]*=2.f;}}\\n' > k.cu "
              "&& nvcc -arch=sm_120a -cubin -o k.cubin k.cu && /opt/tools/cuobjdump --list-elf k.cubin")
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v",
                           f"{tools.ensure() / 'py/nvidia/cu13/bin'}:/opt/tools:ro", "--entrypoint", "bash",
                           standin_image, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sm_120a" in proc.stdout


def test_validate_shows_the_choices_the_last_audit_of_this_lock_predicted(tmp_path, monkeypatch, capsys):
    from bundle.cli import main
    from bundle.images import audit_record

    monkeypatch.setenv("BUNDLE_RUNS_DIR", str(tmp_path))
    assert main(["validate", "tp4"]) == 0
    assert "predicted: no `bundle audit` of this lock's image" in capsys.readouterr().out
    choice = {"attention_backend": "dsv4", "page_size": 256, "moe_runner_backend": "flashinfer_mxfp4",
              "sm120_sparse_mla_backend": "flashinfer", "kv_cache_dtype": "fp8_e4m3", "speculative_algorithm": None}
    report = {"config": "<embedded defaults>", "predicted": {"tp4/server": choice, "pd/prefill": choice}}
    audit_record.save(load_lock().hash, json.dumps(report))
    assert main(["validate", "tp4"]) == 0
    out = capsys.readouterr().out
    assert "predicted tp4/server: attention dsv4, page 256, MoE flashinfer_mxfp4, sparse-MLA flashinfer" in out
    assert "pd/prefill" not in out  # only the topology asked for
