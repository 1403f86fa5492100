"""A real browser for the documentation tests: Debian's headless Chromium driven over the DevTools
protocol (websocket-client), and the built site served on loopback under a base path, the way a
project site is served. Every request a page makes is recorded: the tests fail on one that leaves the
site, fails, or answers an error. Chromium itself resolves no host but 127.0.0.1
(--host-resolver-rules), so nothing leaves this machine even when a page asks it to."""

from __future__ import annotations

import functools
import http.server
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import websocket

# Chromium's own background traffic (updates, safe browsing, metrics...) switched off: only the pages'.
_QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
          "--disable-client-side-phishing-detection", "--no-pings", "--metrics-recording-only",
          "--no-first-run", "--no-default-browser-check", "--disable-features=Translate,OptimizationHints,"
          "MediaRouter,DialMediaRouteProvider,AutofillServerCommunication",
          "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


@dataclass
class PageLoad:
    """What one page load did: every request, and what went wrong."""
    url: str
    seconds: float
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed requests

    def foreign(self, origin: str) -> list[str]:
        """Requests to anything but the site (data: and blob: URLs are the page's own)."""
        return [u for u in self.requests if not u.startswith((origin, "data:", "blob:", "about:"))]


class Chromium:
    """One headless Chromium with one tab, driven over the DevTools protocol."""

    def __init__(self, binary: str, timeout_s: float = 30):
        self._profile = Path(tempfile.mkdtemp(prefix="docs-browser-"))
        self._log = open(self._profile / "chromium.log", "wb")
        self._proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile}", *_QUIET, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self._log)
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not (port_file.exists() and len(port_file.read_text().split()) == 2):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not open its DevTools port: "
                                   f"{(self._profile / 'chromium.log').read_bytes()[-2000:]!r}")
            time.sleep(0.05)
        port, path = port_file.read_text().split()
        self._ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=timeout_s,
                                               suppress_origin=True)
        self._ids = itertools.count(1)
        self._events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Network.setCacheDisabled", {"cacheDisabled": True}, session=True)
        # Workers (the search) are watched too: their requests and errors count like the page's.
        self.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                  session=True)
        self._attached: set[str] = set()

    def send(self, method: str, params: dict | None = None, *, session: bool | str = False) -> dict:
        message = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session if session is True else session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv())
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _pump(self, seconds: float) -> None:
        """Read the events that arrive within `seconds`."""
        self._ws.settimeout(seconds)
        try:
            while True:
                self._events.append(json.loads(self._ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self._ws.settimeout(30)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, url: str, width: int, height: int = 900, *, settle_s: float = 0.25,
             timeout_s: float = 20) -> PageLoad:
        """Open `url` in a window `width` px wide; return once it has loaded and its network has been
        quiet for `settle_s` (the search index loads after the load event)."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": width < 600}, session=True)
        self._events.clear()
        started = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=True)
        deadline = started + timeout_s
        loaded = False
        while time.monotonic() < deadline:
            before = len(self._events)
            self._pump(settle_s)
            self._watch_workers()
            loaded = loaded or any(e.get("method") == "Page.loadEventFired" for e in self._events)
            pending = self._pending()
            if loaded and not pending and len(self._events) == before:
                break
        else:
            raise TimeoutError(f"{url} did not finish loading in {timeout_s}s")
        return self._report(url, time.monotonic() - started)

    def _watch_workers(self) -> None:
        """A worker started by the page waits until its network and console are watched."""
        for event in list(self._events):
            if event.get("method") != "Target.attachedToTarget":
                continue
            child = event["params"]["sessionId"]
            if child in self._attached:
                continue
            self._attached.add(child)
            for domain in ("Runtime", "Network"):
                self.send(f"{domain}.enable", session=child)
            self.send("Runtime.runIfWaitingForDebugger", session=child)

    def _pending(self) -> set[str]:
        started = {e["params"]["requestId"] for e in self._events if e.get("method") == "Network.requestWillBeSent"}
        done = {e["params"]["requestId"] for e in self._events
                if e.get("method") in ("Network.loadingFinished", "Network.loadingFailed")}
        return started - done

    def _report(self, url: str, seconds: float) -> PageLoad:
        load = PageLoad(url, seconds)
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                load.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                load.errors.append(f"request failed ({params.get('errorText')}): {self._url_of(params['requestId'])}")
            elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
                load.errors.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                load.errors.append(f"exception: {details.get('exception', {}).get('description') or details['text']}")
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                load.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                          for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                load.errors.append(f"console ({params['entry']['source']}): {params['entry']['text']}")
        return load

    def _url_of(self, request_id: str) -> str:
        return next((e["params"]["request"]["url"] for e in self._events
                     if e.get("method") == "Network.requestWillBeSent" and e["params"]["requestId"] == request_id), "?")

    def screenshot(self, path: Path) -> None:
        import base64

        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        try:
            if getattr(self, "_ws", None):
                self._ws.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._log.close()
            shutil.rmtree(self._profile, ignore_errors=True)


class _SiteHandler(http.server.SimpleHTTPRequestHandler):
    """The built site under a base path; a missing page answers 404 with the site's 404.html, as a
    project site's host does (GitHub Pages, nginx's error_page)."""
    base = "/"

    def translate_path(self, path):
        path = path.split("?", 1)[0].split("#", 1)[0]
        if not path.startswith(self.base):
            return str(Path(self.directory) / "no such file")
        return super().translate_path("/" + path[len(self.base):])

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.exists():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serve(site: Path, base: str = "/"):
    """The site on 127.0.0.1 (a free port) under `base`; yields the site's root URL."""
    handler = functools.partial(type("Handler", (_SiteHandler,), {"base": base}), directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{base}"
    finally:
        server.shutdown()
        server.server_close()
