"""The HTTP face of the local OpenAI-compatible server: the request handler that reads and records
each request (:class:`RecordedRequest`), checks its key, injects the test's faults
(:class:`Fault`: a slow answer, HTTP 500, a malformed body) and routes the rest to the server's
answers, then writes them as JSON. Its own module because the server's engine (:mod:`._server`)
answers in status and JSON and never reads HTTP; the handler reaches it only through
:class:`HandlerServer`, what the handler uses of it."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Protocol, cast
from urllib.parse import parse_qs, urlsplit

from pydantic import JsonValue

from ._shapes import ChatRequest, ErrorBody, EvalRequest, RunRequest

__all__ = ["Fault", "RecordedRequest"]

_PREFIX = re.compile(r"^(?:/openai)?(?:/v1)?(?:/deployments/(?P<deployment>[^/]+))?(?P<rest>/.*)$")

#: an answer: its HTTP status and JSON payload
_Answer = tuple[int, Mapping[str, object]]


@dataclass
class Fault:
    """``kind``: ``http_500`` | ``malformed_json`` | ``slow`` | ``garbled_reply``; applies to the
    next ``times`` requests whose route (``chat`` | ``evals``) matches ``route`` (None: any)."""

    kind: str
    times: int = 1
    route: str | None = None
    delay_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.kind not in ("http_500", "malformed_json", "slow", "garbled_reply"):
            raise ValueError(f"unknown fault kind {self.kind!r}")


@dataclass
class RecordedRequest:
    method: str
    path: str
    route: str
    query: dict[str, str]
    headers: dict[str, str]
    body: JsonValue  # the parsed JSON, or the text when it was not JSON
    deployment: str | None = None


class HandlerServer(Protocol):
    """What the handler uses of the server it serves (:class:`._server.OpenAIServer`)."""

    requests: list[RecordedRequest]
    retry_after_ms: int
    _lock: threading.Lock
    _stopping: threading.Event

    def authorized(self, headers: Mapping[str, str]) -> bool: ...

    def _take_fault(self, route: str) -> Fault | None: ...

    def chat_completion(self, body: ChatRequest, deployment: str | None,
                        fault: Fault | None) -> _Answer: ...

    def create_eval(self, body: EvalRequest) -> _Answer: ...

    def get_eval(self, eval_id: str) -> _Answer: ...

    def create_run(self, eval_id: str, body: RunRequest) -> _Answer: ...

    def get_run(self, eval_id: str, run_id: str) -> _Answer: ...

    def list_output_items(self, eval_id: str, run_id: str, query: dict[str, str]) -> _Answer: ...


def _error(message: str, kind: str, *, param: str | None = None) -> ErrorBody:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_state: HandlerServer
    timeout = 30

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return None

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self._handle("POST")

    def _handle(self, method: str) -> None:
        state = self.server_state
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        match = _PREFIX.match(parts.path)
        rest = match.group("rest") if match else parts.path
        deployment = match.group("deployment") if match else None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body: JsonValue = json.loads(raw) if raw else {}
        except ValueError:
            body = raw
        route = "chat" if rest.rstrip("/").endswith("/chat/completions") else (
            "evals" if rest.startswith("/evals") else "other")
        headers = {k.lower(): v for k, v in self.headers.items()}
        with state._lock:
            state.requests.append(RecordedRequest(method, parts.path, route, query, headers, body,
                                                  deployment))
        if not state.authorized(headers):
            self._send(401, _error("invalid api key or token", "invalid_request_error"))
            return
        fault = state._take_fault(route)
        if fault is not None and fault.kind == "slow":
            if state._stopping.wait(fault.delay_seconds):
                return
            fault = None
        if fault is not None and fault.kind == "http_500":
            self._send(500, _error("injected server error", "server_error"),
                       headers={"retry-after-ms": str(state.retry_after_ms)})
            return
        if fault is not None and fault.kind == "malformed_json":
            self._send_raw(200, b'{"id": "chatcmpl-broken", "choices": [{"message": ')
            return
        status, payload = self._dispatch(method, rest, body, query, deployment, fault)
        self._send(status, payload)

    def _dispatch(self, method: str, rest: str, body: JsonValue, query: dict[str, str],
                  deployment: str | None, fault: Fault | None) -> _Answer:
        state = self.server_state
        segments = [s for s in rest.split("/") if s]
        if not isinstance(body, dict):
            return 400, _error("the request body is not a JSON object", "invalid_request_error")
        if method == "POST" and segments[-2:] == ["chat", "completions"]:
            return state.chat_completion(cast(ChatRequest, body), deployment, fault)
        if segments[:1] == ["evals"]:
            if method == "POST" and len(segments) == 1:
                return state.create_eval(cast(EvalRequest, body))
            if method == "GET" and len(segments) == 2:
                return state.get_eval(segments[1])
            if method == "POST" and len(segments) == 3 and segments[2] == "runs":
                return state.create_run(segments[1], cast(RunRequest, body))
            if method == "GET" and len(segments) == 4 and segments[2] == "runs":
                return state.get_run(segments[1], segments[3])
            if method == "GET" and len(segments) == 5 and segments[4] == "output_items":
                return state.list_output_items(segments[1], segments[3], query)
        return 404, _error(f"no route for {method} {rest}", "not_found_error")

    def _send(self, status: int, payload: Mapping[str, object], *, headers: Mapping[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers=headers)

    def _send_raw(self, status: int, data: bytes, *,
                  headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req-{time.monotonic_ns()}")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
