"""Run inside the image (tests/test_bench_launcher.py): SGLang's own bench_serving request function,
with bench_serving's own parsed defaults, wrapped by the bench launcher (mounted at /launcher), sent to
a loopback server that streams what SGLang's /generate streams. Prints one JSON line per case: the
output's success and the launcher's progress line. Standard library and SGLang only."""

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, "/launcher")
import bench_launcher  # noqa: E402
from sglang.benchmark import serving  # noqa: E402


def chunk(text, tokens, finish=None):
    body = {"text": text, "meta_info": {"completion_tokens": tokens, "prompt_tokens": 4, "finish_reason": finish}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


ABORT = {"type": "abort", "message": "KV transfer failed for request rank=0 (injected)", "status_code": 500}
STREAMS = {
    "healthy": [chunk("Paris", 1), chunk("Paris is", 2, {"type": "length", "length": 2})],
    # A tiny model's tokens that detokenize to nothing: the stream ends normally, without a text.
    "empty": [chunk("", 2, {"type": "length", "length": 2})],
    # What a decode whose KV transfer failed streams (SGLang's prepare_abort, HTTP 200).
    "aborted": [chunk("", 0, ABORT)],
    "error": [b'data: {"error": {"message": "decode server returned 500", "code": 500}}\n\n'],
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for part in STREAMS[self.path.strip("/").split("/")[0]]:
            self.wfile.write(part)
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


def main():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    parsed = []
    serving.run_benchmark = parsed.append  # cli_main parses bench_serving's own defaults, then stops
    sys.argv = ["bench_serving", "--backend", "sglang", "--disable-tqdm"]
    serving.cli_main()
    serving.set_global_args(parsed[0])
    progress = "/tmp/progress.jsonl"
    bench_launcher.install(serving, progress)
    send = serving.ASYNC_REQUEST_FUNCS["sglang"]

    def request(route):
        return serving.RequestFuncInput(prompt="The capital of France is", api_url=f"{base}/{route}/generate",
                                        prompt_len=5, output_len=2, model="m", lora_name=None, image_data=None,
                                        extra_request_body={})

    async def run(routes):
        return await asyncio.gather(*(asyncio.create_task(send(request(r))) for r in routes))

    for route in STREAMS:
        output = asyncio.run(run([route]))[0]
        with open(progress) as fh:
            line = json.loads(fh.read().splitlines()[-1])
        print(json.dumps({"case": route, "success": output.success, "line": line}), flush=True)
    # Requests side by side: one request's abort never marks another.
    mixed = ["aborted", "healthy", "aborted", "healthy", "empty"]
    outputs = asyncio.run(run(mixed))
    print(json.dumps({"case": "mixed", "success": [o.success for o in outputs]}), flush=True)


main()
