"""The suite's own rule: under CI nothing skips for want of something (tests/conftest.py). A missing
module or tool fails naming it; outside CI it skips with the same words. The index probe counts any
HTTP answer (a 405 to HEAD included) as reached: only no answer at all is offline."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.conftest import _index_answers, in_ci, require_module, require_tool
from tests.sim_process import free_port


@pytest.mark.parametrize("env, ci", [({"CI": "true"}, True), ({"CI": "1"}, True), ({"BUNDLE_REQUIRE_DOCKER": "1"}, True),
                                     ({"CI": "false"}, False), ({}, False)])
def test_ci_is_one_switch(monkeypatch, env, ci):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUNDLE_REQUIRE_DOCKER", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert in_ci() is ci


def test_a_missing_module_or_tool_fails_under_ci_naming_it_and_skips_outside(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="missing under CI: the module no_such_module_here"):
        require_module("no_such_module_here")
    with pytest.raises(pytest.fail.Exception, match="the tool no-such-tool-here is not on PATH; apt-get it"):
        require_tool("no-such-tool-here", "apt-get it")
    monkeypatch.setenv("CI", "false")
    monkeypatch.delenv("BUNDLE_REQUIRE_DOCKER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_here cannot be imported"):
        require_module("no_such_module_here")
    assert require_module("json").dumps([]) == "[]"


class _Refuses(BaseHTTPRequestHandler):
    def do_HEAD(self):  # noqa: N802 (http.server's name)
        self.send_response(405)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_index_probe_counts_any_http_answer_and_only_silence_as_offline():
    server = HTTPServer(("127.0.0.1", 0), _Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert _index_answers(f"http://127.0.0.1:{server.server_port}/simple/")  # 405: reached
    finally:
        server.shutdown()
        server.server_close()
    assert not _index_answers(f"http://127.0.0.1:{free_port()}/simple/")  # nothing listens
