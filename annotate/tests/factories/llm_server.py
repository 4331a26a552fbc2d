"""A small OpenAI-compatible chat completions server on 127.0.0.1, for tests and the benchmark.

It speaks the real protocol (POST /v1/chat/completions, chat.completion JSON
with `usage`, OpenAI-style error bodies), so the real openai client is exercised.
Each request takes the next mode from `server.script` (then `server.default`):

- "valid": a structured answer (`server.answer`, a callable of the episode text,
  or a default one) whose evidence quotes the episode verbatim;
- "bad_quote": valid codes, but evidence that is not in the episode;
- "invalid_json", "unknown_code", "not_a_failure";
- "429", "500", "401": an error status (429 carries `retry-after: 0`);
- "hang": sleeps `server.hang_s` before answering (for client timeouts);
- "no_schema": 400 on a json_schema response_format, as servers without
  structured output do, and a valid answer in JSON mode.
`server.delay_s` adds latency to every request.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_ANSWER = {
    "not_a_failure": False,
    "candidates": [
        {
            "failure_type": "EXT-01",
            "source": "tool_service",
            "stage": "iterative_execution",
            "capability": "actuation",
            "confidence": 0.8,
            "rationale": "429 responses from the provider; indicators: rate limit errors",
        },
        {
            "failure_type": "TUS-03",
            "source": "llm",
            "stage": "iterative_execution",
            "capability": "actuation",
            "confidence": 0.15,
            "rationale": "second guess",
        },
    ],
}


def fenced(content: str) -> tuple[str, str]:
    """(fence tag, what the fence holds) of a user message (annotate.suggestions.prompts.user_message)."""
    tag = re.search(r"^<<<(EPISODE-[0-9a-f]{16})$", content, re.MULTILINE).group(1)
    return tag, content.split(f"<<<{tag}\n", 1)[1].rsplit(f"\n{tag}>>>", 1)[0]


def episode_from(request: dict) -> str:
    _, inside = fenced(request["messages"][-1]["content"])
    return inside.split("Episode text:\n", 1)[1]


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[str] = []
        self.default = "valid"
        self.answer: dict | Callable[[str], dict] = DEFAULT_ANSWER
        self.hang_s = 3.0
        self.delay_s = 0.0
        self.requests: list[dict] = []
        self.modes: list[str] = []
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.prompt_tokens = 1200
        self.completion_tokens = 150
        # Trace attribution requests (schema "faultline_attribution"): a callable of the request.
        self.attribution: Callable[[dict], dict] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next_mode(self, request: dict) -> str:
        with self.lock:
            self.requests.append(request)
            mode = self.script.pop(0) if self.script else self.default
            self.modes.append(mode)
            return mode

    def start(self) -> FakeLLMServer:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeLLMServer

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer

    def _error(self, status: int, message: str, kind: str, headers: dict | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, headers)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        srv = self.server
        mode = srv.next_mode(request)
        with srv.lock:
            srv.inflight += 1
            srv.max_inflight = max(srv.max_inflight, srv.inflight)
        try:
            self._answer(srv, mode, request)
        finally:
            with srv.lock:
                srv.inflight -= 1

    def _answer(self, srv: FakeLLMServer, mode: str, request: dict) -> None:
        if srv.delay_s:
            time.sleep(srv.delay_s)
        schema = (request.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "faultline_attribution" and srv.attribution is not None:
            self._send(200, _completion(request, json.dumps(srv.attribution(request)), srv))
            return
        text = episode_from(request)
        if mode == "429":
            self._error(429, "Rate limit reached for requests", "rate_limit_error", {"retry-after": "0"})
            return
        if mode == "401":
            self._error(401, "Incorrect API key provided", "invalid_request_error")
            return
        if mode == "500":
            self._error(500, "The server had an error while processing your request.", "server_error")
            return
        if mode == "hang":
            time.sleep(srv.hang_s)
        if mode == "no_schema" and request.get("response_format", {}).get("type") == "json_schema":
            self._error(400, "response_format json_schema is not supported by this server", "invalid_request_error")
            return
        self._send(200, _completion(request, _content(mode, text, srv), srv))


def _content(mode: str, text: str, srv: FakeLLMServer) -> str:
    if mode == "invalid_json":
        return '{"not_a_failure": false, "candidates": [{"failure_type": "EXT-01", '
    answer = srv.answer(text) if callable(srv.answer) else json.loads(json.dumps(srv.answer))
    if mode == "not_a_failure":
        answer = {"not_a_failure": True, "candidates": []}
    for c in answer.get("candidates", []):
        c.setdefault("evidence", text[: min(40, len(text))])
    if mode == "bad_quote" and answer["candidates"]:
        answer["candidates"][0]["evidence"] = "a sentence the episode never contained"
    if mode == "unknown_code" and answer["candidates"]:
        answer["candidates"][0]["failure_type"] = "ZZZ-99"
    return json.dumps(answer)


def _completion(request: dict, content: str, srv: FakeLLMServer) -> dict:
    return {
        "id": f"chatcmpl-fake{len(srv.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": srv.prompt_tokens,
            "completion_tokens": srv.completion_tokens,
            "total_tokens": srv.prompt_tokens + srv.completion_tokens,
        },
        "system_fingerprint": "fp_faultline_fake",
    }


def point_settings_at(settings, server: FakeLLMServer, **extra) -> FakeLLMServer:
    """Point the LLM backend's settings at `server` (a dummy key, its URL, a fixed model, a short timeout), plus
    `extra` settings (FAULTLINE_LLM_MAX_RETRIES=0, prices, ...): the tests' `llm` fixtures share this."""
    settings.OPENAI_API_KEY = "sk-test-dummy"
    settings.OPENAI_BASE_URL = server.base_url
    settings.FAULTLINE_LLM_MODEL = "fake-model-1"
    settings.FAULTLINE_LLM_TIMEOUT = 5.0
    for name, value in extra.items():
        setattr(settings, name, value)
    return server
