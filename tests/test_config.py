"""bundle.yaml: schema, defaults, and one clear message per bad input, all collected in one pass."""

from __future__ import annotations

import json

import pytest
import yaml


from bundle.cli import main
from bundle.config import assembly, loader
from bundle.config.loader import SCHEMA_PATH, _defaults_source, load_config, schema_problems
from bundle.config.source import Source
from bundle.targets.sections import SECTIONS
from bundle.errors import EXIT_CONFIG, ConfigError
from tests.conftest import checked, write_config


def test_embedded_defaults_serve_both_topologies_without_errors():
    dep = load_config(None)
    assert dep.served_name == "deepseek-v4-flash"
    for topology in ("tp4", "pd", "dp"):
        assert checked(dep, topology).errors == []
    prefill, decode = dep.roles("pd")
    assert set(prefill.gpus).isdisjoint(decode.gpus)


def test_embedded_defaults_satisfy_the_schema():
    # load_config(None) skips the schema for speed: this is what keeps that safe.
    source = _defaults_source()
    assert schema_problems(source.data, source) == []


def test_every_schema_property_has_a_description_and_forbids_unknown_keys():
    schema = loader.schema()  # the core's and every wing's section
    assert schema["$schema"].endswith("2020-12/schema")

    def walk(node, path):
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, path
            for name, child in node["properties"].items():
                assert child.get("description"), f"{path}.{name} has no description"
                walk(child, f"{path}.{name}")
        if "items" in node and isinstance(node["items"], dict):
            walk(node["items"], f"{path}[]")

    walk(schema, "$")


def test_user_values_merge_over_defaults_and_lists_replace(tmp_path):
    path = write_config(tmp_path, "levers:\n  speculative: mtp\ntp4:\n  gpus: [4, 5, 6, 7]\n")
    dep = load_config(path)
    assert dep.levers.speculative == "mtp"
    assert dep.levers.moe_runner == "auto"  # untouched default survives the merge
    assert dep.roles("tp4")[0].gpus == (4, 5, 6, 7)


def _problems(tmp_path, text):
    with pytest.raises(ConfigError) as info:
        dep = load_config(write_config(tmp_path, text))
        checked(dep, "pd").raise_if_errors(dep.source.name)
    return info.value


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    err = _problems(tmp_path, "model:\n  path: /m\n  served_name: [unclosed\n")
    (problem,) = err.problems
    assert "bundle.yaml:4:" in problem or "bundle.yaml:3:" in problem
    assert "YAML syntax error" in problem


def test_unknown_key_gets_did_you_mean_with_its_line(tmp_path):
    err = _problems(tmp_path, "levers:\n  kv_cache_dtype: auto\n  speculativ: mtp\n")
    (problem,) = err.problems
    assert problem.startswith(f"{tmp_path}/bundle.yaml:3: levers.speculativ: unknown key")
    assert "did you mean 'speculative'?" in problem


def test_wrong_type_names_the_key_path_and_what_was_given(tmp_path):
    err = _problems(tmp_path, "network:\n  front_port: '8080'\n")
    (problem,) = err.problems
    assert "bundle.yaml:2: network.front_port: expected integer, got string" in problem


def test_all_schema_problems_are_reported_together(tmp_path):
    err = _problems(tmp_path, "levers:\n  moe_runner: fast\n  speculative: yes\nhealth:\n  start_period: soon\n")
    assert len(err.problems) == 3
    assert [p.split(": ")[1] for p in err.problems] == ["levers.moe_runner", "levers.speculative",
                                                        "health.start_period"]


def test_zero_router_retries_is_refused_before_the_router_refuses_to_start(tmp_path):
    err = _problems(tmp_path, "pd:\n  router:\n    retry_max_retries: 0\n")
    assert "pd.router.retry_max_retries" in err.problems[0]


def test_overlapping_gpus_are_refused(tmp_path):
    err = _problems(tmp_path, "pd:\n  decode:\n    gpus: [3, 4, 5, 6]\n")
    assert any("pd.decode.gpus: GPUs [3] are given to both prefill" in p for p in err.problems)


def test_tp_size_must_match_the_gpu_list(tmp_path):
    err = _problems(tmp_path, "pd:\n  prefill:\n    gpus: [0, 1]\n    tp_size: 4\n")
    assert any(":3: pd.prefill.gpus: 2 GPUs [0, 1] but tp_size is 4" in p for p in err.problems)


def test_bootstrap_port_may_not_reuse_the_worker_port(tmp_path):
    err = _problems(tmp_path, "network:\n  worker_port: 8998\n")
    assert any("pd.bootstrap_port: 8998 is also network.worker_port" in p for p in err.problems)


def test_extra_args_may_not_override_a_flag_the_bundle_sets(tmp_path):
    err = _problems(tmp_path, "pd:\n  decode:\n    extra_args: ['--tensor-parallel-size', '2']\n")
    assert any("pd.decode.extra_args[0]: --tensor-parallel-size is set by the bundle" in p for p in err.problems)


def test_misspelled_server_flag_is_rejected_by_the_parser_snapshot(tmp_path):
    err = _problems(tmp_path, "pd:\n  prefill:\n    extra_args: ['--mem-fraction-statc', '0.8']\n")
    (problem,) = err.problems
    assert "pd.prefill.extra_args: the prefill command line is rejected by SGLang's parser" in problem
    assert "--mem-fraction-statc" in problem


def test_bad_router_choice_is_rejected(tmp_path):
    err = _problems(tmp_path, "pd:\n  router:\n    extra_args: ['--cache-index', 'fastest']\n")
    assert "invalid choice: 'fastest'" in err.problems[0]


def test_a_router_policy_flag_in_extra_args_is_refused_as_managed(tmp_path):
    # pd's line sets --prefill-policy and --decode-policy explicitly (from pd.router.policy).
    err = _problems(tmp_path, "pd:\n  router:\n    extra_args: ['--decode-policy', 'cache_aware']\n")
    assert "--decode-policy is set by the bundle itself" in err.problems[0]


def test_missing_model_is_a_warning_for_validate_and_an_error_for_launch(tmp_path):
    dep = load_config(write_config(tmp_path, f"model:\n  path: {tmp_path}/nowhere\n"))
    assert checked(dep, "tp4").errors == []
    assert "does not exist on this host" in checked(dep, "tp4").warnings[0]
    assert "does not exist" in checked(dep, "tp4", require_model=True).errors[0]
    (tmp_path / "model").mkdir()
    dep = load_config(write_config(tmp_path, f"model:\n  path: {tmp_path}/model\n"))
    assert "has no config.json" in checked(dep, "tp4", require_model=True).errors[0]
    (tmp_path / "model" / "config.json").write_text("{}")
    assert checked(dep, "tp4", require_model=True).errors == []


def test_empty_api_key_file_is_refused(tmp_path):
    (tmp_path / "key").write_text("\n")
    err = _problems(tmp_path, "api_key_file: key\n")
    assert "api_key_file:" in err.problems[0] and "is empty" in err.problems[0]


@pytest.mark.parametrize("text, needle", [
    ("model: [\n", "YAML syntax error"),
    ("levers:\n  sparse_mla: fastest\n", "levers.sparse_mla"),
    ("tp4:\n  gpus: [0, 1]\n", "tp4.gpus: 2 GPUs"),
    ("pd:\n  decode:\n    gpus: [0, 1, 2, 3]\n", "given to both prefill"),
])
def test_cli_exits_with_the_config_code_and_one_message(tmp_path, capsys, text, needle):
    path = write_config(tmp_path, text)
    assert main(["validate", "-c", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert needle in err and str(path) in err and "nothing was started" in err
    assert "Traceback" not in err


def test_cli_missing_file(tmp_path, capsys):
    assert main(["validate", "tp4", "-c", str(tmp_path / "absent.yaml")]) == EXIT_CONFIG
    assert "absent.yaml: file not found" in capsys.readouterr().err


def test_cli_validates_the_defaults(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no ./bundle.yaml here
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert "ok tp4" in out and "ok pd" in out


def test_dp_gpus_must_fill_every_replica_with_a_consecutive_group(tmp_path):
    dep = load_config(write_config(tmp_path, "dp:\n  replicas: 2\n  tp_size: 4\n  gpus: [0, 1, 2, 3, 4, 5]\n"))
    errors = checked(dep, "dp").errors
    assert any("dp.gpus: 6 GPUs [0, 1, 2, 3, 4, 5] for 2 replicas of tp_size 4" in p for p in errors), errors
    dep = load_config(write_config(tmp_path, "dp:\n  replicas: 2\n  tp_size: 2\n  gpus: [0, 2, 1, 3]\n"))
    errors = checked(dep, "dp").errors
    assert any("replica-0 gets GPUs [0, 2], which are not consecutive" in p for p in errors), errors
    assert checked(dep, "pd").errors == []  # dp's section is dp's alone


def test_a_binary_or_empty_config_file_is_a_clear_exit_3(tmp_path, capsys):
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(bytes(range(256)) * 4)
    assert main(["validate", "tp4", "-c", str(garbage)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "not a YAML text file" in err and "Traceback" not in err
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    assert main(["validate", "tp4", "-c", str(empty)]) == EXIT_CONFIG
    assert "the file is empty" in capsys.readouterr().err
    assert main(["validate", "tp4", "-c", ""]) == 2
    assert "-c was given an empty file name" in capsys.readouterr().err


def test_each_wing_brings_its_section_and_the_core_files_name_none():
    """The core's schema and defaults hold no wing's section; the loader adds each listed wing's own, whole,
    under its key, and a user's file sets it like any core key."""
    core_schema = json.loads(SCHEMA_PATH.read_text())
    core_defaults = yaml.safe_load(loader.DEFAULTS_PATH.read_text())
    assert SECTIONS, "no wing declares a section: this test would hold nothing"
    for wing in SECTIONS:
        assert wing.SECTION not in core_schema["properties"] and wing.SECTION not in core_defaults
        own = json.loads(wing.SCHEMA.read_text())
        assert loader.schema()["properties"][wing.SECTION]["properties"] == own["properties"]
        assert loader.defaults_data()[wing.SECTION] == yaml.safe_load(wing.DEFAULTS.read_text())[wing.SECTION]
        assert load_config(None).wing_section(wing.SECTION) == loader.defaults_data()[wing.SECTION]


def test_a_removed_wings_section_is_refused_naming_file_line_key_and_fix(tmp_path):
    """What a user's file meets once a wing is deleted: its section is an unknown key of the core schema
    (the deletion itself is tests/test_wings.py's, in a copy of the tree)."""
    config = write_config(tmp_path, "project: mine\nkubernetes:\n  namespace: prod\n")
    core_only = json.loads(SCHEMA_PATH.read_text())
    problems = schema_problems_against(core_only, config)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{config}:2: kubernetes: not a section of bundle.yaml")
    assert "delete it or fix its name" in problems[0] and "allowed here: api_key_file" in problems[0]


def schema_problems_against(schema: dict, path) -> list[str]:
    from bundle.config import schema_check
    from bundle.config.source import read_yaml

    source = read_yaml(path)
    return schema_check.problems(source.data, schema, source)


class _Wing:
    READ_BY = "a planted wing"

    def __init__(self, tmp_path, section: str, defaults: str, defs: dict | None = None):
        self.SECTION = section
        self.SCHEMA = tmp_path / f"{section}.schema.json"
        self.SCHEMA.write_text(json.dumps({"type": "object", "additionalProperties": False, "description": "x",
                                           "properties": {"size": {"type": "integer", "description": "y"}},
                                           **({"$defs": defs} if defs else {})}))
        self.DEFAULTS = tmp_path / f"{section}.defaults.yaml"
        self.DEFAULTS.write_text(defaults)


def test_a_planted_wing_is_assembled_and_a_clashing_one_refused(tmp_path):
    core = json.loads(SCHEMA_PATH.read_text())
    planted = _Wing(tmp_path, "skypilot", "skypilot:\n  size: 3\n")
    schema = assembly.schema(core, [planted])
    assert schema["properties"]["skypilot"]["x-wing"] == "a planted wing"
    defaults = assembly.defaults(Source("<d>", {"project": "p"}), [planted])
    assert defaults.data == {"project": "p", "skypilot": {"size": 3}}
    with pytest.raises(ValueError, match="'levers' clashes"):
        assembly.schema(core, [_Wing(tmp_path, "levers", "levers: {}\n")])
    with pytest.raises(ValueError, match="'server' clashes"):
        assembly.schema(core, [_Wing(tmp_path, "other", "other: {}\n", defs={"server": {}})])
    with pytest.raises(ValueError, match="its own section"):
        assembly.defaults(Source("<d>", {}), [_Wing(tmp_path, "third", "third: {}\nproject: x\n")])
