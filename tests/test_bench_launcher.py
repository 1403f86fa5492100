"""The bench launcher (bundle/verify/bench_launcher.py) in the image it runs in, around SGLang's own
request function (sglang.benchmark.serving.async_request_sglang_generate, with bench_serving's own
parsed defaults), against a loopback server streaming what SGLang's /generate streams
(tests/bench_launcher_probe.py). A request the server aborted (decode's failed KV transfer: HTTP 200,
an empty text, finish_reason abort) or answered with an error object fails with the server's message;
a stream that ends normally stays a success, even with an empty text (a tiny model's special tokens:
the rule that judged by the empty text failed healthy engine requests)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cases(standin_chain) -> dict[str, dict]:
    root = REPO
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3",
         "-v", f"{root / 'bundle' / 'verify' / 'bench_launcher.py'}:/launcher/bench_launcher.py:ro",
         "-v", f"{root / 'tests' / 'bench_launcher_probe.py'}:/probe.py:ro",
         standin_chain["image"], "/probe.py"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {c["case"]: c for c in map(json.loads, (line for line in proc.stdout.splitlines() if line.startswith("{")))}


def test_a_stream_the_server_aborted_is_a_failure_with_the_servers_message(cases):
    case = cases["aborted"]
    assert case["success"] is False and case["line"]["ok"] is False
    assert case["line"]["error"] == "aborted by the server: KV transfer failed for request rank=0 (injected)"


def test_an_error_object_in_the_stream_is_a_failure(cases):
    case = cases["error"]
    assert case["success"] is False and case["line"]["error"] == "decode server returned 500"


@pytest.mark.parametrize("route", ["healthy", "empty"])
def test_a_stream_that_ends_normally_stays_a_success_even_with_an_empty_text(cases, route):
    case = cases[route]
    assert case["success"] is True and case["line"]["ok"] is True and case["line"]["error"] == ""


def test_one_requests_abort_never_marks_another_running_beside_it(cases):
    assert cases["mixed"]["success"] == [False, True, False, True, True]
