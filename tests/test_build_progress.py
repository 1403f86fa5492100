"""An image build's log condensed to `[step n/m] ... elapsed` lines: what every `bundle build`, the
rehearsal image inside `bundle launch --rehearsal` and any other build through bundle.stack.docker show."""

from __future__ import annotations

from pathlib import Path

from bundle.stack.build_progress import BuildProgress

DATA = Path(__file__).parent / "data" / "build_logs"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def meter(clock, heartbeat_s=30.0):
    out: list[str] = []
    return BuildProgress(out.append, name="build img:1", clock=clock, heartbeat_s=heartbeat_s), out


def test_a_real_buildkit_log_becomes_one_line_per_step_with_its_outcome():
    clock = Clock()
    progress, out = meter(clock)
    for line in (DATA / "buildkit-plain.txt").read_text().splitlines()[1:]:  # line 1: where it came from
        clock.now += 0.5
        progress.feed(line)
    progress.finish()
    text = "\n".join(out)
    assert "build context sent: 35B" in text and "sent: 2B" not in text  # the context, not .dockerignore
    assert "[step 1/4] cached  FROM docker.io/sglang-bundle/standin-base:bookworm-py3.12" in text
    assert "[step 2/4] COPY a.txt /a.txt" in text
    assert "[step 3/4] done in 6s" in text
    assert "[export] done in 32s" in text
    assert out[-1].startswith("build img:1: built: 3 steps run, 1 cached (")
    assert all(line.endswith(" elapsed)") for line in out)
    assert not any("working 2" in line for line in out)  # a step's output is not repeated line by line


def test_a_quiet_long_step_says_it_is_still_running_with_its_last_output():
    clock = Clock()
    progress, out = meter(clock, heartbeat_s=30)
    progress.feed("#7 [3/9] RUN pip install -r requirements.txt")
    progress.feed("#7 12.3 Downloading torch-2.14.1-cp312-manylinux_2_28_x86_64.whl (900.1 MB)")
    clock.now = 20
    progress.heartbeat()
    assert len(out) == 1  # said within the last 30 s: nothing more
    clock.now = 95
    progress.heartbeat()
    assert out[-1] == ("build img:1: [step 3/9] still running, 1m35s in this step: "
                       "Downloading torch-2.14.1-cp312-manylinux_2_28_x86_64.whl (900.1 MB) (1m35s elapsed)")


def test_a_failed_step_is_named_with_its_error():
    progress, out = meter(Clock())
    progress.feed("#8 [builder 4/6] RUN make")
    progress.feed("#8 1.1 make: *** No rule to make target")
    progress.feed('#8 ERROR: process "/bin/sh -c make" did not complete successfully: exit code: 2')
    progress.finish(ok=False)
    assert out[0].startswith("build img:1: [step builder 4/6] RUN make")
    assert "[step builder 4/6] FAILED RUN make: process \"/bin/sh -c make\" did not complete" in out[1]
    assert len(out) == 2


def test_the_legacy_builder_steps_are_followed_too():
    progress, out = meter(Clock())
    for line in ["Step 1/3 : FROM debian", " ---> 1234", "Step 2/3 : RUN apt-get update", " ---> Using cache",
                 "Step 3/3 : RUN echo hi", " ---> Running in abc", "hi", "Successfully built 99"]:
        progress.feed(line)
    progress.finish()
    assert [line.split(" (")[0] for line in out] == [
        "build img:1: [step 1/3] FROM debian", "build img:1: [step 2/3] RUN apt-get update",
        "build img:1: [step 3/3] RUN echo hi", "build img:1: built: 2 steps run, 1 cached"]


def test_padded_step_numbers_of_a_long_dockerfile_are_steps_too():
    progress, out = meter(Clock())
    progress.feed("#4 [ 1/10] FROM docker.io/sglang-bundle/debian-root:bookworm")
    progress.feed("#9 [stage-1  3/10] RUN make")
    progress.finish()
    assert [line.split(" (")[0] for line in out][:2] == [
        "build img:1: [step 1/10] FROM docker.io/sglang-bundle/debian-root:bookworm",
        "build img:1: [step stage-1 3/10] RUN make"]
