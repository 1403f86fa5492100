"""The one endpoint clients use (the router in pd, the server in tp4), and how to authenticate.

The API key is read from the configured file when a request needs it and only ever travels in an
Authorization header; `redact` removes it from anything the driver prints or saves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import requests

from bundle.config.model import Deployment
from bundle.topology import Topology

CHAT_PATH = "/v1/chat/completions"  # OpenAI's chat completions, which SGLang and the router serve


@dataclass(frozen=True)
class FrontDoor:
    url: str  # http://HOST:PORT, as a client on this host reaches it
    model: str  # the served model name
    api_key: str | None = field(default=None, repr=False)
    readiness_path: str = "/health"  # the router's /readiness, or the lone server's /health

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def session(self) -> requests.Session:
        session = requests.Session()
        session.headers.update(self.headers)
        return session

    @property
    def chat_url(self) -> str:
        return self.url + CHAT_PATH

    def chat_body(self, prompt: str, *, max_tokens: int, stream: bool | None = None) -> dict:
        """The one chat-completion request every check sends: the served model, one user message,
        temperature 0 (greedy: the same prompt must give the same tokens every time)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": 0}
        if stream is not None:
            body["stream"] = stream
        return body

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text

    def example_request(self) -> str:
        """A copy-paste curl command (the key comes from its file, never spelled out)."""
        auth = ' -H "Authorization: Bearer $(cat $API_KEY_FILE)"' if self.api_key else ""
        body = json.dumps(self.chat_body("What is the capital of France?", max_tokens=32))
        return f"curl -s {self.chat_url} -H 'Content-Type: application/json'{auth} -d '{body}'"


def front_door(dep: Deployment, topology: Topology) -> FrontDoor:
    host = dep.network.host_address
    # A server bound to every interface is reached from this host on loopback.
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    key = None
    if dep.api_key_file:
        key = Path(dep.api_key_file).read_text().strip() or None
    return FrontDoor(url=f"http://{host}:{dep.network.front_port}", model=dep.served_name, api_key=key,
                     readiness_path=topology.readiness_path)
