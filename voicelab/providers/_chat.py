"""Structured-JSON chat completions: ``response_format: json_object`` when the service accepts
it, parsing the JSON out of plain text when it does not."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from ..errors import ExecutionError
from ._resolve import LLMProvider

logger = logging.getLogger(__name__)

_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class LLMCallError(ExecutionError):
    """The model service failed: HTTP error status, connection failure or client timeout."""


class UnparseableReplyError(LLMCallError):
    """The service answered, but not with a JSON object (``text`` keeps what it said,
    ``usage`` what the service reported it used: the answer was paid for)."""

    def __init__(self, message: str, *, text: str | None = None,
                 usage: dict[str, JsonValue] | None = None):
        self.text = text
        self.usage = usage
        super().__init__(message)


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object in ``text``: the whole text, a fenced block, or the outermost braces."""
    if not text:
        return None
    candidates = [text.strip()]
    fenced = _FENCED.search(text)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


@dataclass
class ChatJSONReply:
    data: dict[str, JsonValue]
    text: str
    request: dict[str, JsonValue]
    model_version: str | None = None
    finish_reason: str | None = None
    usage: dict[str, JsonValue] | None = None
    json_mode: bool = True
    extra: dict[str, JsonValue] = field(default_factory=dict)


class JSONChat:
    """Asks one model for JSON objects. ``client`` is an ``openai`` async client.

    The first time the service rejects ``response_format`` (HTTP 400 naming it, as some
    self-hosted servers do) the session falls back to parsing JSON out of plain text.
    """

    def __init__(self, client: Any, provider: LLMProvider):
        self.client = client
        self.provider = provider
        self.json_mode = True
        self._max_tokens_key = ("max_completion_tokens" if provider.kind == "azure_openai"
                                else "max_tokens")

    def request(self, messages: Sequence[Mapping[str, JsonValue]], *,
                temperature: float | None = None, seed: int | None = None,
                max_tokens: int | None = None) -> dict[str, JsonValue]:
        params: dict[str, JsonValue] = {"model": self.provider.model,
                                  "messages": [dict(m) for m in messages]}
        if temperature is not None:
            params["temperature"] = temperature
        if seed is not None:
            params["seed"] = seed
        if max_tokens is not None:
            params[self._max_tokens_key] = max_tokens
        if self.json_mode:
            params["response_format"] = {"type": "json_object"}
        return params

    async def complete(self, messages: Sequence[Mapping[str, JsonValue]], *,
                       temperature: float | None = None, seed: int | None = None,
                       max_tokens: int | None = None) -> ChatJSONReply:
        """One completion parsed as a JSON object; raises :class:`UnparseableReplyError` or
        :class:`LLMCallError`."""
        import openai

        params = self.request(messages, temperature=temperature, seed=seed, max_tokens=max_tokens)
        try:
            response = await self.client.chat.completions.create(**params)
        except openai.BadRequestError as error:
            if self.json_mode and "response_format" in str(error):
                logger.info("%s rejected response_format; parsing JSON from text instead",
                            self.provider.kind)
                self.json_mode = False
                return await self.complete(messages, temperature=temperature, seed=seed,
                                           max_tokens=max_tokens)
            raise LLMCallError(f"{self.provider.kind} rejected the request: {error}") from None
        except (openai.APIResponseValidationError, ValueError) as error:
            raise UnparseableReplyError(f"{self.provider.kind} sent a malformed response body: "
                                        f"{type(error).__name__}: {error}") from None
        except openai.APIError as error:
            raise LLMCallError(f"{self.provider.kind} request failed: "
                               f"{type(error).__name__}: {error}") from None
        # the SDK builds its models without validation: a field the service left out is None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = response.usage.model_dump() if response.usage is not None else None
        data = parse_json_object(text)
        if data is None:
            raise UnparseableReplyError(f"{self.provider.kind} replied without a JSON object: "
                                        f"{text[:200]!r}", text=text, usage=usage)
        return ChatJSONReply(data=data, text=text, request=params,
                             model_version=response.model,
                             finish_reason=choice.finish_reason if choice is not None else None,
                             usage=usage,
                             json_mode=self.json_mode)
