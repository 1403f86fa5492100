"""The worker simulator's HTTP API: the endpoints of SGLang 0.5.23's http_server that the router,
bench_serving and the bundle driver call, with the same paths, status codes and JSON shapes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from bundle.rehearsal.simulator import pd
from bundle.rehearsal.simulator.answers import plan_output
from bundle.rehearsal.simulator.args import LaunchArgs
from bundle.rehearsal.simulator.knobs import LONG_PROMPT_TOKENS, Knobs
from bundle.rehearsal.simulator.resolve import resolve_like_sglang
from bundle.rehearsal.simulator.metrics import Counters, ServingMetrics
from bundle.rehearsal.simulator.model import SimulatedModel

log = logging.getLogger("simulator")



def installed_sglang_version() -> str:
    """The version a real server reports is the SGLang installed beside it (its own __version__),
    never the lock's pin: the simulator reports the SGLang installed in its image, so attestation's
    version check on a rehearsal compares two independent things and fails when the image's SGLang
    is not the lock's (an echo of the lock could not fail)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return "unknown"


SGLANG_VERSION = installed_sglang_version()
# SGLang's /health gives up on a stuck scheduler after this long and answers 503.
HEALTH_CHECK_TIMEOUT = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
MAX_HANG_SECS = 3600.0  # a hung request still ends some day: loops are bounded
KV_SHARE_PER_REQUEST = 0.01  # simulated sglang:token_usage per running request
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's default for /generate


class SimulatedError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "server_error"):
        super().__init__(message)
        self.status, self.message, self.err_type = status, message, err_type


def _error(status: int, message: str, err_type: str = "invalid_request_error") -> JSONResponse:
    # SGLang's ErrorResponse shape (openai_api.protocol.ErrorResponse).
    return JSONResponse({"object": "error", "message": message, "type": err_type, "param": None,
                         "code": status}, status_code=status)


@dataclass
class GenRequest:
    """One generation, whatever API it came through."""

    rid: str
    prompt_text: str
    prompt_ids: list[int]
    max_new_tokens: int | None
    ignore_eos: bool
    temperature: float
    seed: int | None
    stream: bool
    bootstrap_host: str | None
    bootstrap_port: int | None
    bootstrap_room: int | None


@dataclass
class Step:
    """The state after each emitted token: all ids so far, and the finish reason on the last one."""

    ids: list[int]
    text: str
    finish_reason: str | None
    prompt_tokens: int


class Simulator:
    def __init__(self, launch: LaunchArgs, knobs: Knobs):
        self.launch = launch
        self.knobs = knobs
        self.model = SimulatedModel(launch.model_path, launch.get("tokenizer_path"))
        self.role = launch.disaggregation_mode  # "null", "prefill" or "decode"
        self.started_wall = time.time()
        self._started = time.monotonic()
        self.counters = Counters(launch.served_model_name, self.role)
        self.serving = ServingMetrics(launch.served_model_name, self.role,
                                      cuda_graph=not launch.get("disable_cuda_graph", False))
        self.board = pd.RoomBoard()
        self.generations = 0
        self.rng = random.Random(knobs.seed)
        self.shutting_down = False
        self.running = 0

    # ---- state -----------------------------------------------------------------------------
    def loaded(self) -> bool:
        return time.monotonic() - self._started >= self.knobs.load_seconds

    async def announce_loading(self) -> None:
        """SGLang's log milestones, so the driver's progress follows a rehearsal like a real start."""
        tp = self.launch.get("tp_size", 1)
        log.info("Load weight begin. (worker simulator: %.1f s simulated load, tp_size=%s)",
                 self.knobs.load_seconds, tp)
        await self._loading_bar()
        await asyncio.sleep(max(0.0, self.knobs.load_seconds - (time.monotonic() - self._started)))
        log.info("Load weight end. type=SimulatedModel, dtype=bfloat16 (worker simulator)")
        if not self.launch.get("disable_cuda_graph", False):
            log.info("Capture cuda graph begin. (simulated)")
            log.info("Capture cuda graph end. (simulated)")
        log.info("The server is fired up and ready to roll!")

    async def _loading_bar(self) -> None:
        """SGLang's weight-loading bar (tqdm, on stderr), spread over the simulated load."""
        updates = self.knobs.load_bar_updates
        if updates <= 0:
            return
        from tqdm import tqdm  # SGLang's own dependency; only a start with a bar needs it

        pause = max(0.0, self.knobs.load_seconds * 0.8) / updates
        with tqdm(total=updates, desc="Multi-thread loading shards", mininterval=0, ncols=100,
                  file=sys.stderr) as bar:
            for _ in range(updates):
                bar.update(1)
                await asyncio.sleep(pause)

    # ---- generation core ---------------------------------------------------------------------
    async def _hang_while_told(self) -> None:
        deadline = time.monotonic() + MAX_HANG_SECS
        while self.knobs.hang and time.monotonic() < deadline:
            await asyncio.sleep(0.2)

    async def _admit(self) -> None:
        """Faults and load state that apply to every generation, before any token."""
        if not self.loaded():
            raise SimulatedError(503, "The server is still starting (worker simulator loading)")
        self.generations += 1
        n = self.knobs.crash_after_requests
        if n and self.generations >= n:
            log.error("worker simulator: crashing on generation %d (SIM_CRASH_AFTER_REQUESTS=%d)",
                      self.generations, n)
            logging.shutdown()
            os._exit(1)
        await self._hang_while_told()
        if self.knobs.failure_rate and self.rng.random() < self.knobs.failure_rate:
            raise SimulatedError(500, "simulated failure (SIM_FAILURE_RATE)")

    async def generate(self, req: GenRequest, *, health: bool = False) -> AsyncIterator[Step]:
        """Yield a Step per output token, paced by the role's timing; raise SimulatedError."""
        if not health:
            await self._admit()
        plan = plan_output(
            prompt_text=req.prompt_text, prompt_ids=req.prompt_ids,
            max_new_tokens=req.max_new_tokens, ignore_eos=req.ignore_eos,
            temperature=req.temperature, seed=req.seed, wrong=self.knobs.wrong_answers,
            knob_seed=self.knobs.seed, encode=self.model.encode, filler_ids=self.model.filler_ids,
            repeat_token=self.knobs.repeat_token, word_ids=self.model.word_ids)
        if (not health and self.knobs.long_prompt_fail and self.role in ("null", "prefill")
                and len(req.prompt_ids) > LONG_PROMPT_TOKENS):
            log.error("worker simulator: %d-token prompt fails on the long-prompt path (SIM_LONG_PROMPT_FAIL)",
                      len(req.prompt_ids))
            raise SimulatedError(500, f"simulated failure of the prefill path for prompts over "
                                      f"{LONG_PROMPT_TOKENS} tokens (SIM_LONG_PROMPT_FAIL)")
        ids = plan.ids
        fake = req.bootstrap_host == pd.FAKE_BOOTSTRAP_HOST
        if self.role in ("prefill", "decode") and not health and req.bootstrap_room is None:
            raise SimulatedError(400, f"a {self.role} worker needs bootstrap_host/bootstrap_port/"
                                      "bootstrap_room (send requests through the router)",
                                 "invalid_request_error")
        self.running += 1
        began, first_token_at = time.monotonic(), None
        try:
            if self.role == "prefill":
                await self._prefill_hand_over(req, fake)
                ids = ids[:1]
                first_delay = 0.0
            elif self.role == "decode":
                if not fake:
                    await self._decode_fetch_kv(req)
                first_delay = 0.0  # the first token came with the KV cache
            else:
                first_delay = self.knobs.ttft_ms / 1000.0
            start = time.monotonic() + first_delay
            text = ""
            for k, token_id in enumerate(ids):
                # Absolute deadlines: scheduling overhead does not add up over many tokens.
                delay = start + k * self.knobs.tpot_ms / 1000.0 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._hang_while_told()
                if first_token_at is None:
                    first_token_at = time.monotonic()
                if self.role != "prefill":
                    self.serving.decode_step()
                piece = self.model.tokenizer.id_to_token(token_id) or ""
                text = piece if k == 0 else f"{text} {piece}"
                last = k == len(ids) - 1
                finish = (plan.finish_reason if self.role != "prefill" else "length") if last else None
                yield Step(ids[:k + 1], text, finish, len(req.prompt_ids))
            if not ids:
                yield Step([], "", plan.finish_reason, len(req.prompt_ids))
            if not health:
                self.counters.request_done(streaming=req.stream, prompt_tokens=len(req.prompt_ids),
                                           completion_tokens=len(ids))
                self.serving.request_done(
                    ttft_s=None if first_token_at is None else first_token_at - began,
                    e2e_s=time.monotonic() - began, output_tokens=len(ids))
                if self.role == "decode" and not fake:
                    log.info("Decode batch. #running-req: %d, #token: %d, bootstrap_room: %s",
                             self.running, len(req.prompt_ids) + len(ids), req.bootstrap_room)
        finally:
            self.running -= 1

    async def _prefill_hand_over(self, req: GenRequest, fake: bool) -> None:
        """Prefill computes the prompt's KV (and the first token), hands it over, and is done."""
        if not fake:
            self.board.seen(req.bootstrap_room)
            self.counters.add("sglang_simulator:bootstrap_rooms_total", role="prefill")
        await asyncio.sleep(self.knobs.ttft_ms / 1000.0)
        if not fake:
            self.board.ready(req.bootstrap_room)
            log.info("Prefill batch. #new-seq: 1, #new-token: %d, bootstrap_room: %s",
                     len(req.prompt_ids), req.bootstrap_room)

    async def _decode_fetch_kv(self, req: GenRequest) -> None:
        """Decode waits for prefill's KV through the bootstrap room; a failed transfer (or one the
        injected failure probability fails) is counted and raised as SGLang's decode does."""
        try:
            fetch_began = time.monotonic()
            await pd.fetch_kv(req.bootstrap_host, int(req.bootstrap_port or 0),
                              req.bootstrap_room, self.knobs.kv_wait_secs)
            self.serving.kv_received(seconds=time.monotonic() - fetch_began)
        except pd.KVTransferError as exc:
            self.counters.add("sglang:num_transfer_failed_reqs_total")
            self.counters.add("sglang:num_aborted_requests_total")
            log.error("%s", exc)
            raise SimulatedError(500, str(exc)) from None
        prob = self.knobs.disagg_failure_prob
        if prob and self.rng.random() < prob:
            # As SGLang's injection does: the poll says Failed after prefill sent the KV.
            self.counters.add("sglang:num_transfer_failed_reqs_total")
            self.counters.add("sglang:num_aborted_requests_total")
            message = (f"Decode transfer failed for request rank=0 bootstrap_room={req.bootstrap_room} "
                       "(SGLANG_TEST_DISAGG_FAILURE_PROB)")
            log.error("%s", message)
            raise SimulatedError(500, message)
        self.counters.add("sglang_simulator:bootstrap_rooms_total", role="decode")

    # ---- request parsing ---------------------------------------------------------------------
    def _bootstrap(self, body: dict) -> dict:
        port = body.get("bootstrap_port")
        return {"bootstrap_host": body.get("bootstrap_host"),
                "bootstrap_port": int(port) if port is not None else None,
                "bootstrap_room": body.get("bootstrap_room")}

    def request_from_generate(self, body: dict) -> GenRequest:
        sp = body.get("sampling_params") or {}
        if body.get("input_ids") is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):
                raise SimulatedError(400, "batched input_ids are not simulated", "invalid_request_error")
            text = self.model.decode(ids)
        else:
            text = body.get("text")
            if not isinstance(text, str):
                raise SimulatedError(400, "the worker simulator takes one prompt (a string) per "
                                          "request", "invalid_request_error")
            ids = self.model.encode(text)
        max_new = sp.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        return GenRequest(rid=body.get("rid") or uuid.uuid4().hex, prompt_text=text, prompt_ids=ids,
                          max_new_tokens=max_new, ignore_eos=bool(sp.get("ignore_eos", False)),
                          temperature=float(sp.get("temperature", 1.0)), seed=sp.get("sampling_seed"),
                          stream=bool(body.get("stream", False)), **self._bootstrap(body))

    def request_from_openai(self, body: dict, *, chat: bool) -> GenRequest:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise SimulatedError(400, "messages must be a non-empty list", "invalid_request_error")
            text = self.model.render_chat(messages)
            # Known questions are looked up in the last user message, as a model would answer it.
            user = [m for m in messages if m.get("role") == "user"]
            question = str(user[-1].get("content", "")) if user else text
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
                prompt = self.model.decode(prompt)
            if not isinstance(prompt, str):
                raise SimulatedError(400, "the worker simulator takes one prompt per request",
                                     "invalid_request_error")
            text = question = prompt
        max_new = body.get("max_completion_tokens") or body.get("max_tokens")
        if max_new is None and not chat:
            max_new = 16  # OpenAI's completions default
        temperature = body.get("temperature")
        req = GenRequest(rid=uuid.uuid4().hex, prompt_text=question, prompt_ids=self.model.encode(text),
                         max_new_tokens=max_new, ignore_eos=bool(body.get("ignore_eos", False)),
                         temperature=1.0 if temperature is None else float(temperature),
                         seed=body.get("seed"), stream=bool(body.get("stream", False)),
                         **self._bootstrap(body))
        return req

    # ---- info --------------------------------------------------------------------------------
    def server_info(self) -> dict:
        # SGLang answers with its resolved arguments (ServerArgs.resolved_dict): what `auto` became.
        info, resolved = resolve_like_sglang(dict(self.launch.fields), self.model.config)
        info.update({
            "launch_command": self.launch.launch_command,
            "max_total_num_tokens": 1_000_000,
            "max_req_input_len": self.model.context_len - 1,
            "startup_time": self.started_wall,
            "internal_states": [{"avg_spec_accept_length": None, "last_gen_throughput": 0.0}],
            "version": SGLANG_VERSION,
            "frontend": "python",
            # Only in the simulator: how it was told to behave, so a report can say "simulated".
            "worker_simulator": {"knobs": self.knobs.as_dict(), "arg_parser": self.launch.parser,
                                 "ignored_args": self.launch.ignored, "resolved": resolved},
        })
        overrides = os.environ.get("SIM_SERVER_INFO_OVERRIDES", "").strip()
        if overrides:  # e.g. '{"disable_cuda_graph": true}' to rehearse an attestation warning
            info.update(json.loads(overrides))
        return info

    def loads(self) -> dict:
        """SGLang 0.5.23's GET /v1/loads (entrypoints/v1_loads.py): one DP rank's load snapshot. smg
        polls it for its load-aware policies and worker overload protection. Nothing queues here:
        every admitted request runs at once."""
        total = self.server_info()["max_total_num_tokens"]
        load = {"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": self.running,
                "num_waiting_reqs": 0, "num_waiting_uncached_tokens": 0, "num_used_tokens": 0,
                "num_total_tokens": total, "max_total_num_tokens": total, "max_running_requests": 1024,
                "token_usage": 0.0, "gen_throughput": 0.0, "cache_hit_rate": 0.0, "utilization": 0.0}
        return {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                "version": SGLANG_VERSION, "accelerator": None,
                "num_accelerators": self.launch.get("tp_size", 1), "loads": [load]}

    def model_info(self) -> dict:
        return {"model_path": self.launch.model_path, "served_model_name": self.launch.served_model_name,
                "tokenizer_path": self.launch.tokenizer_path, "is_generation": True,
                "preferred_sampling_params": None, "weight_version": "default",
                "load_format": self.launch.get("load_format", "auto"), "reasoning_parser": None,
                "tool_call_parser": None, "disaggregation_mode": self.role,
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": self.model.config.get("model_type"),
                "architectures": self.model.config.get("architectures")}


def _sse(obj) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _auth_decider():
    """SGLang's own auth rule when it imports (it is torch-free), else the same rule restated."""
    try:
        from sglang.srt.utils.auth import AuthLevel, decide_request_auth

        def decide(method, path, header, api_key, admin_api_key):
            d = decide_request_auth(method=method, path=path, authorization_header=header,
                                    api_key=api_key, admin_api_key=admin_api_key,
                                    auth_level=AuthLevel.NORMAL)
            return d.allowed, d.error_status_code
        return decide
    except ImportError:
        import secrets

        def decide(method, path, header, api_key, admin_api_key):
            if method == "OPTIONS" or path.startswith(("/health", "/ready", "/metrics")) or not api_key:
                return True, 401
            parts = (header or "").split(" ", 1)
            ok = len(parts) == 2 and parts[0].lower() == "bearer" and secrets.compare_digest(parts[1], api_key)
            return ok, 401
        return decide


def create_app(sim: Simulator) -> FastAPI:
    """The app: the API key rule first (a middleware sees every route), then SGLang's routes in the
    order its http_server declares them, then the simulator's own admin surface."""
    app = FastAPI(title="SGLang worker simulator", docs_url=None, redoc_url=None, openapi_url=None)
    _add_auth(app, sim)
    _add_health_and_info(app, sim)
    _add_generation(app, sim)
    _add_admin(app, sim)
    return app


def _add_auth(app: FastAPI, sim: Simulator) -> None:
    """--api-key / --admin-api-key as SGLang applies them, with every call logged at debug."""
    decide = _auth_decider()
    api_key = sim.launch.get("api_key")
    admin_key = sim.launch.get("admin_api_key")

    @app.middleware("http")
    async def api_key_auth(request: Request, call_next):
        path = request.url.path
        # The bootstrap route is the prefill<->decode channel (SGLang's bootstrap server has no key).
        if (api_key or admin_key) and not path.startswith("/sim/kv/"):
            allowed, status = decide(request.method, path, request.headers.get("Authorization"),
                                     api_key, admin_key)
            if not allowed:
                log.debug("%s %s -> %d (api key)", request.method, path, status)
                return JSONResponse({"error": "Unauthorized" if status == 401 else "Forbidden"},
                                    status_code=status)
        response = await call_next(request)
        # `--log-level debug` lists every call: how we learnt what the router (smg) asks a worker.
        log.debug("%s %s -> %d", request.method, path, response.status_code)
        return response


def _add_health_and_info(app: FastAPI, sim: Simulator) -> None:
    """Health, readiness, the info routes, the model list, flush_cache and /metrics."""

    @app.get("/health")
    @app.get("/health_generate")
    async def health():
        if sim.shutting_down or not sim.loaded():
            return Response(status_code=503)
        if sim.knobs.hang:
            # A stuck scheduler: SGLang waits HEALTH_CHECK_TIMEOUT for a token, then says 503.
            deadline = time.monotonic() + HEALTH_CHECK_TIMEOUT
            while sim.knobs.hang and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            if sim.knobs.hang:
                return Response(status_code=503)
        req = GenRequest(rid="HEALTH_CHECK", prompt_text="", prompt_ids=[0], max_new_tokens=1,
                         ignore_eos=False, temperature=0.0, seed=None, stream=False,
                         bootstrap_host=pd.FAKE_BOOTSTRAP_HOST if sim.role != "null" else None,
                         bootstrap_port=None, bootstrap_room=0 if sim.role != "null" else None)
        async for _ in sim.generate(req, health=True):
            break
        return Response(status_code=200)

    @app.get("/ready")
    async def ready():
        return Response(status_code=200 if sim.loaded() and not sim.shutting_down else 503)

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info():
        return JSONResponse(sim.model_info())

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info():
        return JSONResponse(sim.server_info())

    @app.get("/v1/loads")
    async def loads():
        return JSONResponse(sim.loads())

    _add_models(app, sim)

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. "
                                 "(When there are running or waiting requests, the operation will not be performed.)\n")

    @app.get("/metrics")
    async def metrics():
        # SGLang serves /metrics only with --enable-metrics; so does the simulator.
        if not sim.launch.get("enable_metrics", False):
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        # Simulated KV use: each running request holds a share of the pool.
        sim.serving.set_load(running=sim.running, queued=0, token_usage=min(1.0, sim.running * KV_SHARE_PER_REQUEST))
        return PlainTextResponse(sim.counters.render() + sim.serving.render(), media_type="text/plain; version=0.0.4")


def _add_models(app: FastAPI, sim: Simulator) -> None:
    """OpenAI's model list and model card: the served model name only."""

    @app.get("/v1/models")
    async def models():
        name = sim.launch.served_model_name
        return JSONResponse({"object": "list", "data": [{
            "id": name, "object": "model", "created": int(sim.started_wall), "owned_by": "sglang",
            "root": name, "parent": None, "max_model_len": sim.model.context_len}]})

    @app.get("/v1/models/{model:path}")
    async def model_card(model: str):
        if model != sim.launch.served_model_name:
            return JSONResponse({"error": {"message": f"The model '{model}' does not exist",
                                           "type": "invalid_request_error", "param": "model",
                                           "code": "model_not_found"}}, status_code=404)
        return JSONResponse({"id": model, "object": "model", "created": int(sim.started_wall),
                             "owned_by": "sglang", "root": model, "max_model_len": sim.model.context_len})


async def _body_of(request: Request) -> dict:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise SimulatedError(400, "the request body is not JSON", "invalid_request_error") from None
    if not isinstance(body, dict):
        raise SimulatedError(400, "the request body must be a JSON object", "invalid_request_error")
    return body


async def _first_step(gen: AsyncIterator[Step]) -> Step | None:
    """Run up to the first token, so errors before it become a proper HTTP status."""
    try:
        return await gen.__anext__()
    except StopAsyncIteration:
        return None


def _error_event(exc: SimulatedError) -> bytes:
    """An error in the middle of a stream: SGLang sends it as one more event."""
    return _sse({"error": {"message": exc.message, "type": exc.err_type, "code": exc.status}})


def _add_generation(app: FastAPI, sim: Simulator) -> None:
    """SGLang's native /generate and the OpenAI-compatible chat and text completions."""

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request):
        t0 = time.monotonic()
        try:
            req = sim.request_from_generate(await _body_of(request))
            gen = sim.generate(req)
            first = await _first_step(gen)
        except SimulatedError as exc:
            return _error(exc.status, exc.message, exc.err_type)
        out = _NativeOutput(sim, req, t0)
        if not req.stream:
            last = first
            async for step in gen:
                last = step
            return JSONResponse(out.of(last))
        return StreamingResponse(out.stream(first, gen), media_type="text/event-stream")

    async def openai(request: Request, chat: bool):
        try:
            body = await _body_of(request)
            req = sim.request_from_openai(body, chat=chat)
            gen = sim.generate(req)
            first = await _first_step(gen)
        except SimulatedError as exc:
            return _error(exc.status, exc.message, exc.err_type)
        out = _OpenAIOutput(sim, req, body, chat=chat)
        if not req.stream:
            last = first
            async for step in gen:
                last = step
            return JSONResponse(out.whole(last))
        return StreamingResponse(out.stream(first, gen), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await openai(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await openai(request, chat=False)


class _NativeOutput:
    """/generate's answer shapes: one JSON object, or one event per step."""

    def __init__(self, sim: Simulator, req: GenRequest, t0: float) -> None:
        self.sim, self.req, self.t0 = sim, req, t0

    def of(self, step: Step) -> dict:
        finish = None
        if step.finish_reason == "length":
            finish = {"type": "length", "length": len(step.ids)}
        elif step.finish_reason == "stop":
            finish = {"type": "stop", "matched": self.sim.model.eos_id}
        return {"text": step.text, "output_ids": step.ids, "meta_info": {
            "id": self.req.rid, "finish_reason": finish, "prompt_tokens": step.prompt_tokens,
            "completion_tokens": len(step.ids), "cached_tokens": 0,
            "e2e_latency": time.monotonic() - self.t0}}

    async def stream(self, first: Step, gen: AsyncIterator[Step]) -> AsyncIterator[bytes]:
        yield _sse(self.of(first))
        try:
            async for step in gen:
                yield _sse(self.of(step))
        except SimulatedError as exc:
            yield _error_event(exc)
        yield b"data: [DONE]\n\n"


class _OpenAIOutput:
    """A chat or text completion's answer shapes, as SGLang's OpenAI server writes them: the whole
    answer, or a stream of chunks (a role chunk first for chat; usage last when asked)."""

    def __init__(self, sim: Simulator, req: GenRequest, body: dict, *, chat: bool) -> None:
        self.sim, self.chat = sim, chat
        self.created = int(time.time())
        self.rid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        self.obj = "chat.completion" if chat else "text_completion"
        self.model = body.get("model") or sim.launch.served_model_name
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.chunk_obj = "chat.completion.chunk" if chat else "text_completion"

    @staticmethod
    def usage(step: Step) -> dict:
        return {"prompt_tokens": step.prompt_tokens, "completion_tokens": len(step.ids),
                "total_tokens": step.prompt_tokens + len(step.ids), "prompt_tokens_details": None}

    def whole(self, last: Step) -> dict:
        choice = {"index": 0, "logprobs": None, "finish_reason": last.finish_reason,
                  "matched_stop": self.sim.model.eos_id if last.finish_reason == "stop" else None}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": last.text,
                                 "reasoning_content": None, "tool_calls": None}
        else:
            choice["text"] = last.text
        return {"id": self.rid, "object": self.obj, "created": self.created, "model": self.model,
                "choices": [choice], "usage": self.usage(last)}

    def chunk(self, delta_text: str | None, finish, role: bool = False) -> dict:
        if self.chat:
            delta = {"role": "assistant", "content": ""} if role else {"content": delta_text}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": delta_text or "", "logprobs": None, "finish_reason": finish}
        return {"id": self.rid, "object": self.chunk_obj, "created": self.created, "model": self.model,
                "choices": [choice], "usage": None}

    async def stream(self, first: Step | None, gen: AsyncIterator[Step]) -> AsyncIterator[bytes]:
        if self.chat:
            yield _sse(self.chunk(None, None, role=True))
        sent, last = "", first
        try:
            step = first
            while step is not None:
                last = step
                yield _sse(self.chunk(step.text[len(sent):], step.finish_reason))
                sent = step.text
                step = await _first_step(gen)
        except SimulatedError as exc:
            yield _error_event(exc)
            yield b"data: [DONE]\n\n"
            return
        if self.include_usage and last is not None:
            final = {"id": self.rid, "object": self.chunk_obj, "created": self.created, "model": self.model,
                     "choices": [], "usage": self.usage(last)}
            yield _sse(final)
        yield b"data: [DONE]\n\n"


def _add_admin(app: FastAPI, sim: Simulator) -> None:
    """The simulator's own routes: its fault knobs, its counters, and prefill's KV rooms."""

    @app.get("/sim/faults")
    async def get_faults():
        return JSONResponse(sim.knobs.as_dict())

    @app.post("/sim/faults")
    async def set_faults(request: Request):
        try:
            sim.knobs.update(await _body_of(request))
        except (ValueError, SimulatedError) as exc:
            return _error(400, str(exc))
        log.warning("worker simulator: knobs changed at run time: %s", sim.knobs.as_dict())
        return JSONResponse(sim.knobs.as_dict())

    @app.get("/sim/stats")
    async def stats():
        return JSONResponse({"role": sim.role, "generations": sim.generations, "running": sim.running,
                             "requests_done": sim.counters.get("sglang:num_requests_total"),
                             "bootstrap_rooms": sim.counters.get("sglang_simulator:bootstrap_rooms_total")})

    @app.get("/sim/kv/{room}")
    async def kv(room: int, timeout: float = 30.0):
        if sim.role != "prefill":
            return _error(404, "only a prefill worker serves KV rooms")
        asked = time.monotonic()
        if await sim.board.wait(room, min(timeout, MAX_HANG_SECS)):
            # Handed over: the sender records the transfer, as SGLang's prefill does.
            sim.serving.kv_sent(gb_s=sim.knobs.kv_gb_s, latency_ms=(time.monotonic() - asked) * 1000)
            return JSONResponse({"room": room, "status": "ready"})
        return JSONResponse({"room": room, "status": "timeout"}, status_code=408)
