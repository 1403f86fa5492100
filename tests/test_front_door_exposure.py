"""The front door opened beyond this host without a key is said, by validate, by render for Kubernetes
and by launch (the same rules), naming the key to set and what is exposed; a key, or the stated choice
(network.expose_without_key: true), keeps it quiet. It never stops anything."""

from __future__ import annotations

import pytest

from bundle.cli import main
from bundle.rules.exposure import is_loopback
from tests.conftest import write_config

WARNING = "front door"


def _validate(tmp_path, capsys, text: str, topology: str = "pd") -> tuple[int, str]:
    code = main(["validate", topology, "-c", str(write_config(tmp_path, text))])
    return code, capsys.readouterr().err


def test_pd_on_every_interface_without_a_key_warns_naming_the_key_and_the_control_plane(tmp_path, capsys):
    code, err = _validate(tmp_path, capsys, "network:\n  host_address: 0.0.0.0\n")
    assert code == 0  # a warning, not a refusal
    line = next(ln for ln in err.splitlines() if WARNING in ln)
    assert "bundle.yaml:2: network.host_address:" in line and "0.0.0.0:30000" in line
    assert "api_key_file" in line and "network.expose_without_key: true" in line
    assert "POST /workers" in line  # pd's front door is the router: its control plane is open too


def test_tp4_names_only_the_model_it_has_no_router(tmp_path, capsys):
    _, err = _validate(tmp_path, capsys, "network:\n  host_address: 192.0.2.10\n", topology="tp4")
    line = next(ln for ln in err.splitlines() if WARNING in ln)
    assert "without api_key_file: the model is open to anyone" in line
    assert "POST /workers" not in line


@pytest.mark.parametrize("extra", [
    "api_key_file: {key}\n",  # a key
    "network:\n  host_address: 0.0.0.0\n  expose_without_key: true\n",  # the stated choice
])
def test_a_key_or_the_stated_choice_keeps_it_quiet(tmp_path, capsys, extra):
    key = tmp_path / "key"
    key.write_text("secret-key-value\n")
    text = "network:\n  host_address: 0.0.0.0\n" + extra.format(key=key) if "api_key_file" in extra else extra
    code, err = _validate(tmp_path, capsys, text)
    assert code == 0 and WARNING not in err
    assert "secret-key-value" not in err


def test_loopback_keeps_it_quiet(tmp_path, capsys):
    for address in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        _, err = _validate(tmp_path, capsys, f"network:\n  host_address: '{address}'\n")
        assert WARNING not in err, address


def test_loopback_is_read_as_an_address_not_a_prefix():
    assert is_loopback("127.8.9.10") and is_loopback("[::1]") and is_loopback("LOCALHOST")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("127.example.com")
    assert not is_loopback("10.0.0.5")
