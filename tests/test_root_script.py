"""The scripts that make the local root images show debootstrap's minutes as condensed progress
(docker/debootstrap-progress.awk), and the driver passes each line on as it comes
(bundle/images/root_script.py)."""

import subprocess
from pathlib import Path

from bundle.images.root_script import run_root_script

REPO = Path(__file__).resolve().parents[1]
AWK = REPO / "docker" / "debootstrap-progress.awk"

# The shape of a real `debootstrap --variant=minbase` log (bookworm), 60 packages.
PACKAGES = [f"pkg{i}" for i in range(60)]
LOG = "\n".join(
    ["I: Retrieving InRelease", "I: Checking Release signature", "I: Retrieving Packages",
     "I: Resolving dependencies of required packages..."]
    + [line for name in PACKAGES for line in (f"I: Retrieving {name} 1.0-1", f"I: Validating {name} 1.0-1")]
    + ["I: Extracting " + name + "..." for name in PACKAGES]
    + ["I: Installing required packages...", "I: Unpacking required packages..."]
    + ["I: Configuring " + name + "..." for name in PACKAGES]
    + ["I: Base system installed successfully.", "W: a warning", ""])


def test_debootstraps_log_is_condensed_to_its_phases_and_every_25th_package():
    # The scripts run the host's `awk` (mawk on Debian): the same one here.
    out = subprocess.run(["awk", "-f", str(AWK)], input=LOG, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "debootstrap: Retrieving InRelease", "debootstrap: Checking Release signature",
        "debootstrap: Retrieving Packages", "debootstrap: Resolving dependencies of required packages...",
        "debootstrap: Retrieving package 1 (pkg0)", "debootstrap: Retrieving package 26 (pkg25)",
        "debootstrap: Retrieving package 51 (pkg50)",
        "debootstrap: Extracting package 1 (pkg0)", "debootstrap: Extracting package 26 (pkg25)",
        "debootstrap: Extracting package 51 (pkg50)",
        "debootstrap: Installing required packages...", "debootstrap: Unpacking required packages...",
        "debootstrap: Configuring package 1 (pkg0)", "debootstrap: Configuring package 26 (pkg25)",
        "debootstrap: Configuring package 51 (pkg50)",
        "debootstrap: Base system installed successfully.", "debootstrap: a warning",
    ]


def test_each_line_is_reported_in_order_and_a_failure_keeps_the_last_three(tmp_path):
    script = tmp_path / "root.sh"
    script.write_text("#!/usr/bin/env bash\nfor i in 1 2 3 4; do echo \"line $i of $1\"; done\n"
                      "echo 'no mirror answered' >&2\nexit 3\n")
    script.chmod(0o755)
    seen: list[str] = []
    returncode, tail = run_root_script(script, "some/tag:x", label="base image", report=seen.append)
    assert returncode == 3
    assert seen[0] == "  base image | line 1 of some/tag:x"
    assert seen[-1] == "  base image | no mirror answered"
    assert tail == ["line 3 of some/tag:x", "line 4 of some/tag:x", "no mirror answered"]
