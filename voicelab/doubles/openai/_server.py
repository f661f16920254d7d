"""A local OpenAI-compatible server on 127.0.0.1 whose "model" is a deterministic rule engine.

It speaks real HTTP so the production ``openai`` and ``azure-ai-evaluation`` clients run end to
end against it. Routes (each also under ``/v1``, ``/openai``, ``/openai/v1`` and the Azure
deployment prefix ``/openai/deployments/{deployment}``; ``api-version`` is accepted and ignored):

* ``POST /chat/completions``
* ``POST /evals``, ``GET /evals/{id}`` (OpenAI Evals API, used by ``AzureOpenAILabelGrader``)
* ``POST /evals/{id}/runs``, ``GET /evals/{id}/runs/{run}``,
  ``GET /evals/{id}/runs/{run}/output_items``

Every answer reports its ``usage`` (tokens counted as words; a system message seen before
counts as cached) unless ``report_usage=False``, and :attr:`OpenAIServer.usage` keeps the
server's own count. A *policy* (any ``Callable[[ModelCall], str | Mapping]``) decides every model answer; faults
(HTTP 500, malformed JSON body, slow response, a garbled model reply) are injected per test, and
every request is recorded so tests can assert on exactly what was sent. Usable as a context
manager from sync code, async code (``async with``) and notebooks: it runs in its own threads.

The engine (the answers, the Evals runs, the billing) is here; reading, recording and faulting
HTTP requests is :mod:`._http`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import ThreadingHTTPServer

from pydantic import JsonValue

from ._http import Fault, RecordedRequest, _Answer, _error, _Handler
from ._policies import (
    ChatMessage,
    JudgePolicy,
    ModelCall,
    Policy,
    ScriptedPolicy,
    unsupported_claim_rule,
)
from ._shapes import (
    ChatRequest,
    Criterion,
    EvalRecord,
    EvalRequest,
    GraderResult,
    RunRecord,
    RunRequest,
    RunState,
    TokenUsage,
)

__all__ = ["JudgePolicy", "ModelCall", "OpenAIServer", "ScriptedPolicy", "UsageCounts",
           "unsupported_claim_rule"]


@dataclass
class UsageCounts:
    """The server's own count of what it billed (tokens are words here)."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    def add(self, prompt: int, cached: int, completion: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.completion_tokens += completion


class OpenAIServer:
    """``with OpenAIServer(policy=JudgePolicy()) as server: ... server.base_url ...``"""

    def __init__(self, policy: Policy | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, bearer_token: str | None = None,
                 accept_response_format: bool = True, model_version: str = "local-rule-engine-1",
                 retry_after_ms: int = 10, report_usage: bool = True):
        self.policy: Policy = policy or JudgePolicy()
        self.host, self._port = host, port
        self.api_key, self.bearer_token = api_key, bearer_token
        self.accept_response_format = accept_response_format
        self.model_version = model_version
        self.retry_after_ms = retry_after_ms
        self.requests: list[RecordedRequest] = []
        self.calls: list[ModelCall] = []
        #: ``usage`` in each answer (False: omitted, as some compatible servers do)
        self.report_usage = report_usage
        #: what the server billed: every successful chat completion's and graded item's
        #: tokens, as its answers reported them (or would have, when ``report_usage`` is off)
        self.usage = UsageCounts()
        self._system_prompts_seen: set[str] = set()
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._evals: dict[str, EvalRecord] = {}
        self._runs: dict[str, RunState] = {}
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer((self.host, self._port), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="voicelab-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> OpenAIServer:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not running"
        return self._httpd.server_address[1]

    @property
    def azure_endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.azure_endpoint}/v1"

    # --- test helpers ---------------------------------------------------------------------

    def add_fault(self, kind: str, *, times: int = 1, route: str | None = None,
                  delay_seconds: float = 5.0) -> None:
        with self._lock:
            self._faults.append(Fault(kind, times=times, route=route, delay_seconds=delay_seconds))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def received_text(self) -> str:
        """Every recorded request body as text (to assert a value never reached the server)."""
        return "\n".join(r.body if isinstance(r.body, str) else json.dumps(r.body)
                         for r in self.requests)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.route == route]

    # --- engine ---------------------------------------------------------------------------

    def _take_fault(self, route: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.route in (None, route):
                    fault.times -= 1
                    return fault
        return None

    def _ask(self, call: ModelCall) -> str:
        with self._lock:
            self.calls.append(call)
        answer = self.policy(call)
        return answer if isinstance(answer, str) else json.dumps(answer)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def chat_completion(self, body: ChatRequest, deployment: str | None,
                        fault: Fault | None) -> _Answer:
        if not isinstance(body.get("messages"), list):
            return 400, _error("'messages' is required", "invalid_request_error")
        if body.get("response_format") is not None and not self.accept_response_format:
            return 400, _error("response_format is not supported by this model",
                               "invalid_request_error", param="response_format")
        model = str(body.get("model") or deployment or "")
        call = ModelCall("chat", model, body["messages"], body)
        content = "this is not the JSON you asked for" if (
            fault and fault.kind == "garbled_reply") else self._ask(call)
        usage = self._bill(body["messages"], content)
        answer: dict[str, object] = {
            "id": self._next_id("chatcmpl"), "object": "chat.completion",
            "created": int(time.time()), "model": self.model_version,
            "system_fingerprint": "fp_voicelab_local",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content}}],
        }
        if self.report_usage:
            answer["usage"] = usage
        return 200, answer

    def _bill(self, messages: list[ChatMessage], content: str) -> TokenUsage:
        """A completion's usage, counted in words (the double's "tokens"): the prompt's, of
        them a system message seen before (a prompt cache's hit), and the answer's."""
        prompt_tokens = sum(len(ModelCall._content_text(m.get("content")).split())
                            for m in messages if isinstance(m, Mapping))
        cached = 0
        with self._lock:
            for message in messages:
                if isinstance(message, Mapping) and message.get("role") == "system":
                    text = ModelCall._content_text(message.get("content"))
                    if text in self._system_prompts_seen:
                        cached += len(text.split())
                    self._system_prompts_seen.add(text)
            completion_tokens = len(content.split())
            self.usage.add(prompt_tokens, cached, completion_tokens)
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0}}

    def create_eval(self, body: EvalRequest) -> _Answer:
        eval_id = self._next_id("eval")
        criteria: list[Criterion] = []
        for criterion in body.get("testing_criteria") or []:
            criteria.append({**criterion, "id": f"{criterion.get('name', 'grader')}-{eval_id}"})
        record: EvalRecord = {"id": eval_id, "object": "eval", "created_at": int(time.time()),
                  "name": body.get("name") or eval_id, "metadata": body.get("metadata") or {},
                  "data_source_config": {**(body.get("data_source_config") or {}),
                                         "schema": (body.get("data_source_config") or {})
                                         .get("item_schema", {})},
                  "testing_criteria": criteria, "share_with_openai": False}
        self._evals[eval_id] = record
        return 200, record

    def create_run(self, eval_id: str, body: RunRequest) -> _Answer:
        group = self._evals.get(eval_id)
        if group is None:
            return 404, _error(f"eval {eval_id} not found", "not_found_error")
        run_id = self._next_id("evalrun")
        criteria = group["testing_criteria"]
        run: RunRecord = {"id": run_id, "object": "eval.run", "eval_id": eval_id,
               "created_at": int(time.time()), "name": body.get("name") or run_id,
               "data_source": body.get("data_source") or {}, "metadata": body.get("metadata") or {},
               "model": criteria[0].get("model") if criteria else None, "status": "queued",
               "error": None, "per_model_usage": [], "per_testing_criteria_results": None,
               "result_counts": {"total": 0, "errored": 0, "failed": 0, "passed": 0},
               "report_url": f"{self.base_url}/evals/{eval_id}/runs/{run_id}"}
        self._runs[run_id] = {"run": run, "items": []}
        threading.Thread(target=self._grade_run, args=(run_id, criteria), daemon=True,
                         name=f"voicelab-openai-server-{run_id}").start()
        return 200, run

    def _grade_run(self, run_id: str, criteria: list[Criterion]) -> None:
        state = self._runs[run_id]
        run = state["run"]
        run["status"] = "in_progress"
        source = (run["data_source"].get("source") or {})
        content = source.get("content") or []
        rows = content if isinstance(content, list) else []
        counts: dict[str, dict[str, str | int]] = {
            c["id"]: {"testing_criteria": c["id"], "passed": 0, "failed": 0} for c in criteria}
        totals = {"total": 0, "errored": 0, "failed": 0, "passed": 0}
        try:
            for index, row in enumerate(rows):
                item = _row_item(row)
                results = [self._grade_item(c, item, counts) for c in criteria]
                passed_all = all(r["passed"] for r in results)
                totals["total"] += 1
                totals["passed" if passed_all else "failed"] += 1
                state["items"].append({
                    "id": self._next_id("outputitem"), "object": "eval.run.output_item",
                    "created_at": int(time.time()), "eval_id": run["eval_id"], "run_id": run_id,
                    "datasource_item_id": index, "datasource_item": item,
                    "status": "pass" if passed_all else "fail", "results": results,
                    "sample": results[0]["sample"] if results else {}})
        except Exception as error:  # noqa: BLE001 - a policy failure fails the run, like a model
            run["status"] = "failed"
            run["error"] = {"code": "server_error", "message": str(error)}
            return
        run["status"] = "completed"
        run["result_counts"] = totals
        run["per_testing_criteria_results"] = list(counts.values())

    def _grade_item(self, criterion: Criterion, item: JsonValue,
                    counts: dict[str, dict[str, str | int]]) -> GraderResult:
        messages: list[ChatMessage] = [{"role": m.get("role", "user"),
                     "content": _render(ModelCall._content_text(m.get("content")), item)}
                    for m in criterion.get("input") or []]
        labels = list(criterion.get("labels") or [])
        passing = list(criterion.get("passing_labels") or [])
        call = ModelCall("label_grader", str(criterion.get("model", "")), messages,
                         {"criterion": criterion}, labels, passing)
        answer = self._ask(call)
        try:
            parsed = json.loads(answer)
            label = str(parsed.get("label", parsed.get("result")))
            rationale = str(parsed.get("rationale", ""))
        except (ValueError, AttributeError):
            label, rationale = answer.strip(), ""
        passed = label in passing
        tally = counts[criterion["id"]]
        outcome = "passed" if passed else "failed"
        tally[outcome] = int(tally[outcome]) + 1
        output = json.dumps({"steps": [{"description": rationale, "conclusion": label}],
                             "result": label})
        usage = self._bill(messages, output)
        return {"name": criterion["id"], "type": "label_model", "passed": passed,
                "score": 1.0 if passed else 0.0,
                "sample": {"input": messages, "output": [{"role": "assistant", "content": output}],
                           "model": self.model_version, "finish_reason": "stop", "seed": 0,
                           "temperature": 0.0, "top_p": 1.0, "max_completion_tokens": 0,
                           "usage": usage if self.report_usage else None, "error": None}}

    def get_eval(self, eval_id: str) -> _Answer:
        record = self._evals.get(eval_id)
        return (200, record) if record else (404, _error("eval not found", "not_found_error"))

    def get_run(self, eval_id: str, run_id: str) -> _Answer:
        state = self._runs.get(run_id)
        if state is None or state["run"]["eval_id"] != eval_id:
            return 404, _error("run not found", "not_found_error")
        return 200, state["run"]

    def list_output_items(self, eval_id: str, run_id: str, query: dict[str, str]) -> _Answer:
        state = self._runs.get(run_id)
        if state is None:
            return 404, _error("run not found", "not_found_error")
        items = list(state["items"])
        if "after" in query:
            ids = [i["id"] for i in items]
            items = items[ids.index(query["after"]) + 1:] if query["after"] in ids else []
        limit = int(query.get("limit", 20))
        page = items[:limit]
        return 200, {"object": "list", "data": page, "has_more": len(items) > limit,
                     "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None}

    def authorized(self, headers: Mapping[str, str]) -> bool:
        if self.api_key is None and self.bearer_token is None:
            return True
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        accepted = {v for v in (self.api_key, self.bearer_token) if v}
        return bearer in accepted or headers.get("api-key", "") in accepted


def _row_item(row: JsonValue) -> JsonValue:
    """The item a data-source row holds: its ``item`` when it has one, else the row itself."""
    return row.get("item", row) if isinstance(row, dict) else {}


def _render(template: str, item: JsonValue) -> str:
    def value(match: re.Match[str]) -> str:
        found = item
        for part in match.group(1).split(".")[1:]:
            found = found.get(part, "") if isinstance(found, Mapping) else ""
        return found if isinstance(found, str) else json.dumps(found)

    return re.sub(r"\{\{\s*(item(?:\.[A-Za-z0-9_]+)+)\s*\}\}", value, template)

