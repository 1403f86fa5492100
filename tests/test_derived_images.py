"""The locally derived images (rehearsal, Slurm node, Prometheus) share one tag rule and one "build
unless present": a changed input or parent gives a new tag; a present tag builds nothing; the build
goes through buildx where installed and the engine's BuildKit otherwise; the `image | tag` command
line prints only the tag on stdout."""

from __future__ import annotations

import pytest

from bundle.errors import InputError
from bundle import image_tags
from bundle.images import derived
from bundle.rehearsal.shared import image as rehearsal
from bundle.stack import engine


def test_the_tag_follows_every_input_and_the_parent(tmp_path, monkeypatch):
    monkeypatch.setattr(image_tags, "project_root", lambda: tmp_path)
    a, b = tmp_path / "A.Dockerfile", tmp_path / "entry.sh"
    a.write_text("FROM x\n")
    b.write_text("#!/bin/sh\n")
    first = image_tags.inputs_tag("repo/x", [a, b], "parent:1")
    assert first.startswith("repo/x:") and len(first.split(":")[1]) == 12
    assert image_tags.inputs_tag("repo/x", [a, b], "parent:1") == first
    assert image_tags.inputs_tag("repo/x", [a, b], "parent:2") != first
    b.write_text("#!/bin/sh\nexit 1\n")
    assert image_tags.inputs_tag("repo/x", [a, b], "parent:1") != first


def test_the_images_name_their_own_repository():
    # (The Slurm node image's: tests/test_slurm_cluster.py.)
    assert rehearsal.image_tag("p:1").startswith("sglang-bundle/rehearsal:")
    assert image_tags.prometheus_tag().startswith("sglang-bundle/prometheus:")


@pytest.mark.parametrize("buildx", [True, False])
def test_build_unless_present(tmp_path, monkeypatch, buildx):
    present: set[str] = set()
    built: list[dict] = []
    monkeypatch.setattr(engine, "image_exists", lambda tag: tag in present)
    monkeypatch.setattr(engine, "buildx_available", lambda: buildx)

    def fake_build(via):
        def build(**kw):
            built.append({"via": via, **kw})
            kw["progress"]("build repo/x:abc: [step 1/2] RUN pip install (3s elapsed)")
        return build

    monkeypatch.setattr(engine, "build_image", fake_build("buildx"))
    monkeypatch.setattr(engine, "build_image_engine_buildkit", fake_build("engine"))
    lines: list[str] = []
    b = derived.Build(tag="repo/x:abc", what="thing", dockerfile=tmp_path / "D", context=tmp_path,
                      build_args={"A": "1"}, label="thing", also_tag=("repo/x:latest",))
    assert derived.build_unless_present(b, report=lines.append) is True
    (call,) = built
    assert call["via"] == ("buildx" if buildx else "engine")
    assert call["tags"] == ["repo/x:abc", "repo/x:latest"] and call["build_args"] == {"A": "1"}
    assert call["labels"] == {"io.sglang-bundle.thing-inputs": "abc"}
    # The build's own progress reaches `report` (stderr under `python -m ... image`), between the two lines.
    assert lines[0] == "thing: building repo/x:abc ..." and "[step 1/2]" in lines[1]
    assert lines[2].startswith("thing: built repo/x:abc in ")
    present.add("repo/x:abc")
    assert derived.build_unless_present(b, report=lines.append) is False and len(built) == 1
    assert derived.build_unless_present(b, rebuild=True, report=lines.append) is True and len(built) == 2


def test_the_command_line_prints_the_tag_alone_and_names_errors(capsys):
    def ensure(*, report, rebuild=False):
        report("building ...")
        return f"repo/x:{'new' if rebuild else 'abc'}"

    assert derived.command_line("m", ["image", "--rebuild"], ensure=ensure, tag=lambda: "t", can_rebuild=True) == 0
    out, err = capsys.readouterr()
    assert out == "repo/x:new\n" and err == "building ...\n"
    assert derived.command_line("m", ["tag"], ensure=ensure, tag=lambda: "repo/x:abc") == 0
    assert capsys.readouterr().out == "repo/x:abc\n"
    assert derived.command_line("m", [], ensure=ensure, tag=lambda: "t") == 2
    assert "usage: python -m m image | tag" in capsys.readouterr().err

    def broken(*, report):
        raise InputError("no Docker engine answers")  # any kind: its exit code comes back

    assert derived.command_line("m", ["image"], ensure=broken, tag=lambda: "t") == 3
    assert capsys.readouterr().err == "error: no Docker engine answers\n"
