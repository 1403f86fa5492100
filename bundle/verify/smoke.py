"""The smoke test: is the running topology right, not just up?

Steps, each recorded with what it saw: the front door's health; the served model listed on
/v1/models; for every configured check (prompt -> text the answer must contain) a greedy chat
completion that contains it, the same request streamed giving the same text, and the greedy
request repeated giving the same text; the first check asked again behind a context of well over
64 tokens (SGLang's sm_120 sparse-MLA takes another path above 64 query tokens, which failed for
DeepSeek-V4's TP4 shape: flashinfer #5135); every answer checked for degenerate output (the same
token at every step, vLLM #52938); in pd, proof that the requests passed through prefill and
decode (the workers' own request counters before and after, else their logs); in dp, proof that
every replica serves (a request straight to each, and the router listing each healthy). `compare_answers`
then holds the greedy answers against the last smoke report of another topology.

Nothing here prints or stores the API key: every text that leaves this module goes through
`FrontDoor.redact`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import requests

from bundle import modes
from bundle import topology as registry
from bundle.stack.frontdoor import FrontDoor
from bundle.stack.workers import Workers, parse_prometheus, sample_total
from bundle.verify import kv_path

# SGLang's tokenizer-manager counters (observability/metrics_collector.py; need --enable-metrics).
# In PD mode the router sends every request to both workers, so both count it.
REQUESTS_METRIC = "sglang:num_requests_total"
GENERATED_METRIC = "sglang:generation_tokens_total"
# The KV transfer in SGLang's own records (read off the real server, SGLang 0.5.23, in the CPU engine
# CPU engine): decode observes the request stage "decode_transferred" once a request's KV cache has
# arrived (observability/req_time_stats.py), one observation per request; prefill, the sender, observes
# each transfer's latency (disaggregation/prefill.py). Warm-up requests count too, so smoke compares
# readings taken before and after its own requests.
KV_RECEIVED_METRIC = "sglang:per_stage_req_latency_seconds_count"
KV_RECEIVED_LABELS = {"stage": "decode_transferred"}
KV_SENT_METRIC = "sglang:kv_transfer_latency_ms_count"
# SGLang's scheduler log lines (scheduler_components/metrics_reporter.py), the fallback proof.
LOG_MARKS = {"prefill": "Prefill batch", "decode": "Decode batch"}
DETAIL_CHARS = 300  # error bodies are cut: enough to see why, not a page of HTML
# The long-prompt check: SGLang's sm_120 decode kernel serves up to 64 query tokens per call
# (SM120_DECODE_MAX_TOKENS, flash_mla_sm120.py); a longer prefill takes another kernel.
LONG_PROMPT_MIN_TOKENS = 64
LONG_CONTEXT = ("Background for the question below. A deployment bundle pins every package of an "
                "inference stack, builds layered container images, renders compose files for each "
                "topology, checks the configuration before anything starts, waits until the servers "
                "truly serve, reads back which kernels they run, and measures their speed against a "
                "baseline. The question that follows has a short answer; the text above is only "
                "there to make the prompt long enough to take the prefill path. ")
LONG_CONTEXT_REPEATS = 3  # about 270 words: far above 64 tokens for any tokenizer
# Degenerate output (the same token every step): an answer fails when one word repeats this many
# times in a row, or when, over at least DEGENERATE_MIN_WORDS words, fewer than this share are distinct.
MAX_REPEAT_RUN = 6
MIN_DISTINCT_SHARE = 0.3
DEGENERATE_MIN_WORDS = 10
MAX_CHAR_RUN = 24  # the same character 24 times in a row ("!!!!...", "......") without spaces
# dp: one /generate sent straight to each replica, inside the network (not through the router, whose
# policy decides where a few prompts go: cache_aware sent all ten of them to one replica on a loaded
# 2-core box), generating exactly this many tokens (ignore_eos), so an answer proves the replica decodes.
REPLICA_PROBE_TOKENS = 4
REPLICA_PROBE = {"text": "The capital of France is",
                 "sampling_params": {"max_new_tokens": REPLICA_PROBE_TOKENS, "ignore_eos": True, "temperature": 0}}
# How long the router may take to list a replica that just served as healthy: a replica restarted a
# moment ago answers before the router's next health check (health_check_interval_secs, 5 s by
# default) takes it back.
ROUTER_VIEW_WAIT_S = 30.0
ROUTER_VIEW_POLL_S = 1.0


@dataclass
class Step:
    name: str
    ok: bool
    detail: str
    seconds: float = 0.0


@dataclass
class SmokeReport:
    topology: str
    front_door: str
    model: str
    started_at: float
    steps: list[Step] = field(default_factory=list)
    answers: list[dict] = field(default_factory=list)  # prompt, expected, what came back

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps)

    @property
    def failures(self) -> list[Step]:
        return [s for s in self.steps if not s.ok]

    def to_dict(self) -> dict:
        return {"kind": "smoke", "ok": self.ok, "topology": self.topology, "front_door": self.front_door,
                "model": self.model, "started_at": self.started_at,
                "seconds": round(sum(s.seconds for s in self.steps), 3),
                "steps": [asdict(s) for s in self.steps], "answers": self.answers}


class _Failed(Exception):
    """A request that got no usable answer; the message says why (already redacted)."""


class SmokeRunner:
    def __init__(self, front: FrontDoor, *, topology: str, checks, max_tokens: int,
                 request_timeout: float, workers: Workers | None = None):
        self.front = front
        self.topology = topology
        self.checks = checks
        self.max_tokens = max_tokens
        self.timeout = request_timeout
        self.workers = workers
        self.entry = registry.get(topology)
        self.session = front.session()
        self.report = SmokeReport(topology=topology, front_door=front.url, model=front.model,
                                  started_at=time.time())

    # ---- recording -----------------------------------------------------------------------------
    def _step(self, name: str, fn) -> object:
        """Run fn() -> (ok, detail[, value]); an exception is a failed step, never a crash."""
        t0 = time.monotonic()
        value = None
        try:
            result = fn()
            ok, detail = result[0], result[1]
            value = result[2] if len(result) > 2 else None
        except _Failed as exc:
            ok, detail = False, str(exc)
        except requests.RequestException as exc:
            ok, detail = False, self.front.redact(f"{type(exc).__name__}: {exc}")
        self.report.steps.append(Step(name, ok, self.front.redact(detail), round(time.monotonic() - t0, 3)))
        return value

    # ---- HTTP ------------------------------------------------------------------------------------
    def _get(self, path: str) -> requests.Response:
        return self.session.get(self.front.url + path, timeout=self.timeout)

    def _chat_body(self, prompt: str, *, stream: bool) -> dict:
        return self.front.chat_body(prompt, max_tokens=self.max_tokens, stream=stream)

    def _error(self, resp: requests.Response) -> _Failed:
        return _Failed(self.front.redact(f"HTTP {resp.status_code}: {resp.text[:DETAIL_CHARS]}"))

    def chat(self, prompt: str) -> str:
        return self.chat_with_usage(prompt)[0]

    def chat_with_usage(self, prompt: str) -> tuple[str, dict]:
        """The answer's text and the usage the server reported (prompt_tokens, completion_tokens)."""
        resp = self.session.post(self.front.chat_url,
                                 json=self._chat_body(prompt, stream=False), timeout=self.timeout)
        if resp.status_code != 200:
            raise self._error(resp)
        try:
            body = resp.json()
            return body["choices"][0]["message"]["content"] or "", body.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Failed(self.front.redact(f"not a chat completion: {resp.text[:DETAIL_CHARS]}")) from None

    def chat_streamed(self, prompt: str) -> str:
        with self.session.post(self.front.chat_url,
                               json=self._chat_body(prompt, stream=True), timeout=self.timeout,
                               stream=True) as resp:
            if resp.status_code != 200:
                raise self._error(resp)
            return self._read_stream(resp)

    def _read_stream(self, resp: requests.Response) -> str:
        text, done = [], False
        for raw in resp.iter_lines(decode_unicode=True):
            if not raw or not raw.startswith("data:"):
                continue
            data = raw[len("data:"):].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise _Failed(self.front.redact(f"unreadable stream chunk: {data[:DETAIL_CHARS]}")) from None
            if "error" in chunk:
                raise _Failed(self.front.redact(f"error in stream: {json.dumps(chunk['error'])[:DETAIL_CHARS]}"))
            for choice in chunk.get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
        if not done:
            raise _Failed("the stream ended without [DONE]")
        return "".join(text)

    # ---- steps -------------------------------------------------------------------------------
    def health(self):
        # The router's /readiness (pd: a prefill and a decode paired), or the lone server's /health,
        # which runs a one-token generation.
        path = self.front.readiness_path
        resp = self._get(path)
        return resp.status_code == 200, f"{path}: HTTP {resp.status_code}"

    def model_listed(self):
        resp = self._get("/v1/models")
        if resp.status_code != 200:
            raise self._error(resp)
        ids = [m.get("id") for m in resp.json().get("data", [])]
        return self.front.model in ids, f"/v1/models lists {ids}; expected {self.front.model!r}"

    def unknown_model_refused(self):
        """A chat naming a model the stack does not serve gets OpenAI's 404 model_not_found, not a 5xx
        that reads as an outage (smg in PD mode without --enable-igw: 503 "No prefill workers")."""
        asked = f"not-{self.front.model}"
        body = self.front.chat_body("ping", max_tokens=1) | {"model": asked}
        resp = self.session.post(self.front.chat_url, json=body, timeout=self.timeout)
        try:
            error = resp.json().get("error") or {}
        except ValueError:
            error = {}
        code = error.get("code") if isinstance(error, dict) else None
        detail = self.front.redact(f"model {asked!r}: HTTP {resp.status_code} {code or ''}: "
                                   f"{(error.get('message') if isinstance(error, dict) else '') or resp.text[:120]}")
        return resp.status_code == 404 and code == "model_not_found", detail + " (expected 404 model_not_found)"

    def run(self) -> SmokeReport:
        self._step("health", self.health)
        self._step("model listed", self.model_listed)
        if self.entry.has_router:  # a lone SGLang server answers any model name (0.5.23 does not check it)
            self._step("unknown model refused", self.unknown_model_refused)
        before = self._counters() if self.workers and self.entry.disaggregated else None
        for i, check in enumerate(self.checks, 1):
            self._one_check(i, check.prompt, check.expect)
        self._step(f"long prompt (> {LONG_PROMPT_MIN_TOKENS} tokens)", self._long_prompt)
        self._step("not degenerate", self._not_degenerate)
        if self.workers and self.entry.disaggregated:
            self._step("through prefill and decode", lambda: self._passed_through(before))
        if self.workers and self.entry.replicated:
            self._step("every replica serves", self._every_replica_serves)
        return self.report

    def _one_check(self, i: int, prompt: str, expect: str) -> None:
        tag = f"[{i}]" if len(self.checks) > 1 else ""
        record = {"prompt": prompt, "expect": expect, "answer": None, "streamed": None, "repeated": None}
        self.report.answers.append(record)

        def answer():
            record["answer"] = self.front.redact(self.chat(prompt))
            return expect in record["answer"], f"expected {expect!r} in {record['answer']!r}"
        self._step(f"answer{tag}", answer)

        def compared_with_answer(key: str, fetch, missing: str, same_text: str, differs: str):
            """Fetch a second answer into record[key] and compare it with the plain one."""
            def step():
                record[key] = self.front.redact(fetch(prompt))
                if record["answer"] is None:
                    return False, missing.format(other=record[key])
                same = record[key] == record["answer"]
                return same, same_text if same else differs.format(other=record[key], answer=record["answer"])
            return step

        streamed = compared_with_answer(
            "streamed", self.chat_streamed, "streamed {other!r}; no plain answer to compare with",
            "streamed text equals the plain answer", "streamed {other!r} != plain {answer!r}")
        self._step(f"streaming{tag}", streamed)

        repeated = compared_with_answer(
            "repeated", self.chat, "second run gave {other!r}; the first gave nothing",
            "temperature 0 twice: identical", "temperature 0 twice: {answer!r} then {other!r}")
        self._step(f"greedy repeatable{tag}", repeated)

    def _long_prompt(self):
        check = self.checks[0]
        prompt = LONG_CONTEXT * LONG_CONTEXT_REPEATS + check.prompt
        record = {"prompt": prompt, "expect": check.expect, "answer": None, "long_prompt": True}
        self.report.answers.append(record)
        text, usage = self.chat_with_usage(prompt)
        record["answer"] = self.front.redact(text)
        tokens = usage.get("prompt_tokens")
        record["prompt_tokens"] = tokens
        if tokens is not None and tokens <= LONG_PROMPT_MIN_TOKENS:
            return False, (f"the prompt was only {tokens} tokens; the check needs more than "
                           f"{LONG_PROMPT_MIN_TOKENS} to reach the prefill path")
        size = f"{tokens} prompt tokens" if tokens is not None else "prompt tokens not reported"
        ok = check.expect in record["answer"]
        return ok, f"{size}: expected {check.expect!r} in {record['answer']!r}"

    def _not_degenerate(self):
        answered = [a for a in self.report.answers if a.get("answer")]
        if not answered:
            return False, "no answer came back to judge"
        problems = [f"{why}: {a['answer'][:80]!r}" for a in answered
                    for why in [degenerate(a["answer"])] if why]
        if problems:
            return False, "; ".join(problems)
        return True, (f"{len(answered)} answers: no word {MAX_REPEAT_RUN}x in a row, at least "
                      f"{MIN_DISTINCT_SHARE:.0%} distinct words")

    # ---- pd: did the requests pass through both workers? --------------------------------------
    def _counters(self) -> dict[str, dict]:
        """Per role: the request/token counters from /metrics, or the log-line count if no metrics."""
        out = {}
        for role in self.workers.roles:
            reply = self.workers.get(role, "/metrics", timeout=min(self.timeout, 30))
            # SGLang serves /metrics only with --enable-metrics (404 otherwise), and a labelled
            # counter appears once something was counted: a server that has served nothing yet has
            # counted 0.
            if reply.status == 200:
                totals = parse_prometheus(reply.text)
                out[role] = {"source": "metrics", "requests": totals.get(REQUESTS_METRIC, 0.0),
                             "generated": totals.get(GENERATED_METRIC, 0.0),
                             "kv_received": sample_total(reply.text, KV_RECEIVED_METRIC, **KV_RECEIVED_LABELS),
                             "kv_sent": totals.get(KV_SENT_METRIC),
                             "kv_failed": {name: totals.get(name, 0.0) for name in kv_path.FAILURE_COUNTERS}}
                continue
            mark = LOG_MARKS.get(role)
            out[role] = {"source": "log", "status": reply.status, "why": f"/metrics: HTTP {reply.status}",
                         "lines": self.workers.log(role).count(mark) if mark else 0}
        return out

    def _every_replica_serves(self) -> tuple[bool, str]:
        """dp: each replica answers a /generate of its own, sent from inside its container (so no
        router policy decides whether it gets one), with exactly REPLICA_PROBE_TOKENS tokens; and the
        router's own /workers lists every replica that answered as healthy. A replica that gives no
        answer at all is down or restarting: named, not counted (the router serving from the others is
        what dp is for; `bundle status` shows it), but at least one replica must serve."""
        parts, serving, ok = [], [], True
        for role in self.workers.roles:
            reply = self.workers.post(role, "/generate", REPLICA_PROBE, timeout=self.timeout)
            if reply.status == 0:
                parts.append(f"{role}: down or restarting ({reply.text}), not counted")
                continue
            tokens = _generated_tokens(reply.text) if reply.status == 200 else None
            if tokens != REPLICA_PROBE_TOKENS:
                ok = False
                got = f"{tokens} tokens" if reply.status == 200 else f"HTTP {reply.status}"
                parts.append(f"{role}: /generate asked for {REPLICA_PROBE_TOKENS} tokens, got {got}: "
                             f"{reply.text[:DETAIL_CHARS]}")
                continue
            serving.append(role)
            parts.append(f"{role} generated {tokens} tokens ({self.workers.describe(role)})")
        if not serving:
            return False, "; ".join(parts + ["no replica served"])
        unlisted = self._router_lists_healthy([self.workers.address(role) for role in serving])
        if unlisted:
            ok = False
            parts.append(f"the router's /workers does not list as healthy {unlisted} "
                         f"(waited {ROUTER_VIEW_WAIT_S:g} s)")
        else:
            parts.append(f"the router's /workers lists those {len(serving)} healthy")
        return ok, "; ".join(parts)

    def _router_lists_healthy(self, addresses: list[str]) -> list[str]:
        """Of `addresses`, those the router's /workers does not list as healthy within
        ROUTER_VIEW_WAIT_S (polled: a replica back from a restart waits for its next health check)."""
        deadline = time.monotonic() + ROUTER_VIEW_WAIT_S
        while True:
            resp = self._get("/workers")
            if resp.status_code != 200:
                raise self._error(resp)
            try:
                healthy = {w["url"].rstrip("/") for w in resp.json()["workers"] if w.get("is_healthy")}
            except (ValueError, KeyError, TypeError, AttributeError):
                raise _Failed(self.front.redact(f"/workers is not smg's worker list: "
                                                f"{resp.text[:DETAIL_CHARS]}")) from None
            unlisted = [a for a in addresses if a.rstrip("/") not in healthy]
            if not unlisted or time.monotonic() >= deadline:
                return unlisted
            time.sleep(ROUTER_VIEW_POLL_S)

    def _passed_through(self, before: dict) -> tuple[bool, str]:
        after = self._counters()
        expected = 3 * len(self.checks) + 1  # plain, streamed, repeated per check; the long prompt
        parts, ok = [], True
        for role in self.workers.roles:
            b, a = before.get(role, {}), after.get(role, {})
            if a.get("source") == "metrics" and b.get("source") == "metrics":
                served = a["requests"] - b["requests"]
                role_ok = served >= expected
                text = f"{role} counted {served:g} requests ({REQUESTS_METRIC})"
                if role == "decode":
                    generated = a["generated"] - b["generated"]
                    role_ok = role_ok and generated > 0
                    text += f", generated {generated:g} tokens"
                    if a.get("kv_received") is not None:
                        # The KV path itself: decode received a KV cache for every request it served.
                        moved = a["kv_received"] - (b.get("kv_received") or 0.0)
                        role_ok = role_ok and moved >= served
                        text += (f", received the KV cache of {moved:g} requests ({KV_RECEIVED_METRIC}"
                                 f"{{stage=\"decode_transferred\"}})")
                    text += _kv_failures(a.get("kv_failed", {}), b.get("kv_failed", {}), role_ok)
                    role_ok = role_ok and not _kv_failed(a.get("kv_failed", {}), b.get("kv_failed", {}))
                elif a.get("kv_sent") is not None:
                    # Reported, not required: SGLang skips a transfer whose time it could not take.
                    text += f", sent {a['kv_sent'] - (b.get('kv_sent') or 0.0):g} KV transfers ({KV_SENT_METRIC})"
            else:
                seen = a.get("lines", 0) - b.get("lines", 0)
                role_ok = seen > 0
                text = (f"{role}: {seen} new {LOG_MARKS.get(role)!r} log lines "
                        f"(no request counters: {a.get('why', '?')}; start workers with --enable-metrics)")
            ok = ok and role_ok
            parts.append(text)
        return ok, f"{'; '.join(parts)}; smoke sent {expected}"


def _kv_failed(after: dict, before: dict) -> bool:
    return any(after.get(n, 0.0) > before.get(n, 0.0) for n in (kv_path.TRANSFER_FAILED, kv_path.BOOTSTRAP_FAILED))


def _kv_failures(after: dict, before: dict, passed: bool) -> str:
    """Decode's failed transfers, in launch's words (bundle/verify/kv_path.py): those counted during
    the smoke test; or, when nothing got through (smg stops sending to a worker that keeps failing),
    those counted since decode started."""
    if _kv_failed(after, before):
        counts = {n: after.get(n, 0.0) - before.get(n, 0.0) for n in kv_path.FAILURE_COUNTERS}
        when = "during the smoke test"
    elif not passed and any(after.get(n, 0.0) for n in (kv_path.TRANSFER_FAILED, kv_path.BOOTSTRAP_FAILED)):
        counts, when = {n: after.get(n, 0.0) for n in kv_path.FAILURE_COUNTERS}, "since decode started"
    else:
        return ""
    return ("; the KV transfer between prefill and decode fails: "
            + ", ".join(f"{v:g} {k}" for k, v in counts.items()) + f" {when} (fix: {kv_path.HINT})")


def _generated_tokens(text: str) -> int | None:
    """completion_tokens of a native /generate answer (SGLang's meta_info), or None."""
    try:
        return int(json.loads(text)["meta_info"]["completion_tokens"])
    except (ValueError, KeyError, TypeError):
        return None


def degenerate(text: str) -> str | None:
    """Why `text` looks like a model stuck on one token (vLLM #52938), or None. Words are what a
    client can count without the tokenizer; a run of one character catches scripts without spaces."""
    words = text.split()
    run = best = 0
    for i, word in enumerate(words):
        run = run + 1 if i and word == words[i - 1] else 1
        best = max(best, run)
    if best >= MAX_REPEAT_RUN:
        return f"one word {best} times in a row"
    if len(words) >= DEGENERATE_MIN_WORDS and len(set(words)) / len(words) < MIN_DISTINCT_SHARE:
        return f"only {len(set(words))} distinct of {len(words)} words"
    chars = run = 0
    for i, ch in enumerate(text):
        run = run + 1 if i and ch == text[i - 1] and not ch.isspace() else 1
        chars = max(chars, run)
    if chars >= MAX_CHAR_RUN:
        return f"one character {chars} times in a row"
    return None


def compare_answers(report: SmokeReport, earlier: dict | None, *, where: str = "") -> None:
    """Greedy answers must not depend on the topology: the same prompt, greedy, the same image,
    gives the same text in tp4, pd and dp. Adds a step when `earlier` (another topology's smoke
    report, as stored) shares prompts with this one; nothing to compare adds nothing."""
    if not earlier:
        return
    theirs = {a.get("prompt"): a.get("answer") for a in earlier.get("answers", []) if a.get("answer") is not None}
    pairs = [(a["prompt"], a["answer"], theirs[a["prompt"]]) for a in report.answers
             if a.get("answer") is not None and a.get("prompt") in theirs]
    if not pairs:
        return
    other = f"{earlier.get('topology')}{f' ({where})' if where else ''}"
    differ = [f"{p[:40]!r}: {mine!r} here, {them!r} in {earlier.get('topology')}" for p, mine, them in pairs
              if mine != them]
    detail = "; ".join(differ) if differ else f"{len(pairs)} greedy answers identical to {other}"
    report.steps.append(Step(f"same answers as {earlier.get('topology')}", not differ, detail))


# What makes two smoke reports comparable: the same image (lock), model, length and no-GPU mode or none
# (its key: modes.record_key()).
COMPARABLE_KEYS = ("lock_hash", "image", "model", "max_tokens")


def last_comparable_report(project_dirs, like: dict) -> tuple[dict, str] | tuple[None, None]:
    """The newest smoke report under `project_dirs` (other topologies' runs/<project>/ folders)
    that agrees with `like` on COMPARABLE_KEYS, and its path."""
    import glob
    from pathlib import Path

    found = []
    for folder in project_dirs:
        found += glob.glob(str(Path(folder) / "*-smoke" / "smoke.json"))
    for path in sorted(found, key=lambda p: Path(p).parent.name, reverse=True):
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            continue
        if all(k in data and data[k] == like.get(k) for k in (*COMPARABLE_KEYS, modes.record_key())):
            return data, path
    return None, None


def smoke(front: FrontDoor, *, topology: str, checks, max_tokens: int,
          request_timeout: float, workers: Workers | None = None) -> SmokeReport:
    """Run every smoke step against the front door (and, in pd and dp, the workers behind it);
    `checks` are SmokeCheck(prompt, expect)."""
    return SmokeRunner(front, topology=topology, checks=checks, max_tokens=max_tokens,
                       request_timeout=request_timeout, workers=workers).run()
