"""Captures what `docker logs --timestamps` gives for a server that prints like SGLang starting on a
GPU host: tqdm bars rewritten with "\\r" (one of them longer than Docker's 16 KB log buffer before its
newline), ANSI colours, a form feed, and a last line without its newline.

The bytes come from the real tqdm (run here, on the host), and a container prints them (`cat`), so the
log lines, their timestamps and the buffer's flushes are Docker's own. Run it again to refresh the data:

    .venv/bin/python tests/data/logs/capture_progress_log.py IMAGE-WITH-CAT

Writes progress-bar.stdout (what the container printed) and progress-bar.timestamps.log (what
`docker logs --timestamps` returned) beside itself.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from tqdm import tqdm

HERE = Path(__file__).resolve().parent


def server_output() -> bytes:
    out = io.StringIO()
    out.write("[2026-12-05 10:11:12] Load weight begin. avail mem=94.12 GB\n")
    # SGLang's loader bar, one update per shard (DeepSeek-V4-Flash has dozens of shards).
    for _ in tqdm(range(46), desc="Multi-thread loading shards", file=out, mininterval=0, ncols=100):
        pass
    out.write("\x1b[32m[2026-12-05 10:11:40]\x1b[0m Load weight end. type=DeepseekV4ForCausalLM\n")
    out.write("[2026-12-05 10:11:41] a line with a form feed\x0cin the middle\n")
    # CUDA-graph capture as a bar that writes ~70 KB before its newline: Docker's log copier flushes it
    # in pieces of 16 KB, each a log entry with a timestamp of its own and no newline.
    out.write("[2026-12-05 10:11:42] Capture cuda graph begin.\n")
    for _ in tqdm(range(700), desc="Capturing batches (bs=512 avail_mem=3.2 GB)", file=out,
                  mininterval=0, ncols=100):
        pass
    out.write("[2026-12-05 10:12:30] Capture cuda graph end.\n")
    out.write("[2026-12-05 10:12:31] The server is fired up and ready to roll!\n")
    out.write("[2026-12-05 10:12:31] a last line without its newline")
    return out.getvalue().encode()


def main(image: str) -> int:
    data = server_output()
    (HERE / "progress-bar.stdout").write_bytes(data)
    name = "bundle-capture-progress-log"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    subprocess.run(["docker", "run", "--name", name, "-v", f"{HERE}:/data:ro", image,
                    "cat", "/data/progress-bar.stdout"], check=True, capture_output=True)
    logs = subprocess.run(["docker", "logs", "--timestamps", name], check=True, capture_output=True).stdout
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    (HERE / "progress-bar.timestamps.log").write_bytes(logs)
    print(f"{len(data)} bytes printed, {len(logs)} bytes of docker logs --timestamps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
