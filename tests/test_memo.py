"""Remembered parses (bundle/memo.py): a quick command reads the defaults, the compose files and the lock
without importing PyYAML or tomllib, and gets exactly what a parse gives."""

from __future__ import annotations

import datetime

import pytest

from bundle import memo
from bundle.config import source
from bundle.errors import ConfigError
from bundle.render import compose_files


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_a_yaml_source_read_back_from_the_cache_equals_a_fresh_parse_and_does_not_parse_again(monkeypatch):
    text = "project: demo\nmodel:\n  path: /m\n  list: [a, 1, true, 2.5]\n"
    first = source.parse_yaml(text, "a.yaml")
    assert len(list(memo.parsed_dir().glob("*.json"))) == 1

    def no_parse(*_args):
        raise AssertionError("parsed again")

    monkeypatch.setattr(source, "_parse_yaml", no_parse)
    second = source.parse_yaml(text, "b.yaml")
    assert second.data == first.data == {"project": "demo", "model": {"path": "/m", "list": ["a", 1, True, 2.5]}}
    assert second.lines == first.lines and second.lines[("model", "list", 3)] == 4
    assert second.name == "b.yaml"


def test_a_bad_text_is_never_remembered_and_reports_its_line_each_time():
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"bad.yaml:2:\d+: YAML syntax error"):
            source.parse_yaml("a: 1\n b: [\n", "bad.yaml")
    assert not memo.parsed_dir().exists() or not list(memo.parsed_dir().glob("*.json"))


def test_what_json_would_change_is_parsed_every_time():
    """A date or a non-string key would come back from JSON as something else: not kept."""
    parsed = source.parse_yaml("when: 2026-12-06\n1: one\n", "dates.yaml")
    assert parsed.data == {"when": datetime.date(2026, 12, 6), 1: "one"}
    assert not list(memo.parsed_dir().glob("*.json"))


def test_a_compose_file_with_compose_tags_reads_the_same_from_the_cache(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("x: &base {a: 1}\nservices:\n  s:\n    <<: *base\n    ports: !reset []\n")
    first = compose_files.read(path)
    assert first == compose_files.read(path) == {"x": {"a": 1}, "services": {"s": {"a": 1, "ports": []}}}


def test_a_toml_source_read_back_from_the_cache_keeps_its_lines():
    text = '[image]\nref = "x"\n[[pins]]\nname = "a"\n'
    first = source.parse_toml(text, "lock.toml")
    second = source.parse_toml(text, "lock.toml")
    assert second.data == first.data == {"image": {"ref": "x"}, "pins": [{"name": "a"}]}
    assert second.lines == first.lines and second.lines[("image", "ref")] == 2
