"""`bundle doctor`'s service (bundle/service/doctor.py) called directly, with a recording reporter: the
request's overrides reach the checks' host context, each check's outcome reaches the status line as it
comes, and a missing model folder is a FAIL in the report (its exit code), not an exception."""

from __future__ import annotations

from bundle.config.loader import load_config
from bundle.errors import EXIT_FAILED
from bundle import topology as registry
from bundle.service import doctor as service
from tests.recording import RecordingReporter


def test_the_requests_ports_model_and_image_override_the_config_in_the_checks_context(tmp_path):
    dep = load_config(None)
    ctx = service.host_context(service.DoctorRequest(topology="pd", model_path=str(tmp_path), ports=(9001,),
                                                     image="img:mine", host_nixl=False))
    assert ctx.model_path == str(tmp_path) and ctx.image == "img:mine" and ctx.expected_lock_hash is None
    assert ctx.ports[-1] == (dep.network.host_address, 9001, "--port") and ctx.ports[0][1] == dep.network.front_port
    prefill, decode = dep.roles(registry.get("pd"))[:2]
    assert ctx.nixl_gpus == (prefill.gpus[0], decode.gpus[0]) and ctx.host_python_nixl is False


def test_a_missing_model_folder_fails_the_report_and_each_outcome_reaches_the_status_line(tmp_path):
    reporter = RecordingReporter()
    report = service.check_host(service.DoctorRequest(model_path=str(tmp_path / "missing"),
                                                      only=("model", "memlock")), reporter)
    assert report.exit_code == EXIT_FAILED
    assert {r.name: r.status.value for r in report.results}["model"] == "FAIL"
    assert reporter.statuses[0] == "checking ..." and len(reporter.statuses) == 3
    assert any(s.endswith(": FAIL") for s in reporter.statuses[1:])
    quiet = service.check_host(service.DoctorRequest(model_path=str(tmp_path / "missing"), only=("model",)), None)
    assert quiet.exit_code == EXIT_FAILED
