"""The JSON the local OpenAI-compatible server reads and answers, as typed dictionaries.

What it reads are the OpenAI shapes its clients (the ``openai`` and ``azure-ai-evaluation``
packages) send: a body is checked to be a JSON object, then trusted, as the real service would.
"""

from __future__ import annotations

from typing import TypedDict

from pydantic import JsonValue

from .._json import JsonObject
from ._policies import ChatMessage


# What the double reads of a request.
class ChatRequest(TypedDict, total=False):
    messages: list[ChatMessage]
    model: str
    response_format: JsonValue


class Criterion(TypedDict, total=False):
    id: str
    name: str
    model: str
    input: list[ChatMessage]
    labels: list[str]
    passing_labels: list[str]


class EvalRequest(TypedDict, total=False):
    name: str
    metadata: JsonObject
    data_source_config: JsonObject
    testing_criteria: list[Criterion]


class DataSource(TypedDict, total=False):
    source: JsonObject  # ``content``: the rows to grade, each ``{"item": {...}}`` or the item


class RunRequest(TypedDict, total=False):
    name: str
    metadata: JsonObject
    data_source: DataSource


# What the double answers.
class Error(TypedDict):
    message: str
    type: str
    param: str | None
    code: None


class ErrorBody(TypedDict):
    error: Error


class TokenDetails(TypedDict):
    cached_tokens: int
    audio_tokens: int


class TokenUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: TokenDetails


class EvalRecord(TypedDict):
    id: str
    object: str
    created_at: int
    name: str
    metadata: JsonObject
    data_source_config: JsonObject
    testing_criteria: list[Criterion]
    share_with_openai: bool


class RunRecord(TypedDict):
    id: str
    object: str
    eval_id: str
    created_at: int
    name: str
    data_source: DataSource
    metadata: JsonObject
    model: str | None
    status: str
    error: Error | dict[str, str] | None
    per_model_usage: list[JsonObject]
    per_testing_criteria_results: list[dict[str, str | int]] | None
    result_counts: dict[str, int]
    report_url: str


class GraderResult(TypedDict):
    name: str
    type: str
    passed: bool
    score: float
    sample: dict[str, object]


class OutputItem(TypedDict):
    id: str
    object: str
    created_at: int
    eval_id: str
    run_id: str
    datasource_item_id: int
    datasource_item: JsonValue
    status: str
    results: list[GraderResult]
    sample: dict[str, object]


class RunState(TypedDict):
    run: RunRecord
    items: list[OutputItem]
