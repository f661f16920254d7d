"""Usage as providers report it, turned into :class:`~voicelab.artifacts.Usage`; what a provider
does not report is estimated by a documented rule (docs/cost.md, "Estimates") and marked so.

The rules are deliberately simple and stated once here:

* text tokens: one per :data:`CHARS_PER_TOKEN` characters (rounded up), the usual rule of thumb
  for English with OpenAI's tokenizers;
* a realtime model's audio: :data:`USER_AUDIO_TOKENS_PER_SECOND` tokens per second of audio in
  and :data:`ASSISTANT_AUDIO_TOKENS_PER_SECOND` per second out (OpenAI's Realtime pricing
  notes: 1 token per 100 ms of user audio, 1 per 50 ms of assistant audio).

What no rule can tell is ``None``: a realtime service that did not report its usage re-read the
whole conversation and its instructions for each response, and how much of that came from its
cache, so its input tokens are not known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..artifacts import Usage
from ..config import Component

#: Characters per text token when a provider reports no token counts.
CHARS_PER_TOKEN = 4
#: Audio tokens per second of a realtime model's input (user) and output (assistant) audio.
USER_AUDIO_TOKENS_PER_SECOND = 10
ASSISTANT_AUDIO_TOKENS_PER_SECOND = 20


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text`` (:data:`CHARS_PER_TOKEN`)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def chat_usage(reported: Mapping[str, object] | None, *, component: Component, provider: str | None,
               model: str | None, sent_text: str, reply_text: str,
               purpose: str | None = None) -> Usage:
    """One chat completion's usage: the service's ``usage`` (prompt tokens, of them the cached
    ones, completion tokens), else estimated from the characters sent and received."""
    usage = _mapping(reported)
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is not None and completion is not None:
        cached = _count(_mapping(usage.get("prompt_tokens_details")).get("cached_tokens")) or 0
        cached = min(cached, prompt)
        return Usage(component=component, provider=provider, model=model, purpose=purpose,
                     quantities={"input_token": prompt - cached, "cached_input_token": cached,
                                 "output_token": completion, "request": 1})
    # not reported: every input token is counted at the uncached rate (an upper bound)
    return Usage(component=component, provider=provider, model=model, purpose=purpose,
                 quantities={"input_token": text_tokens(sent_text),
                             "output_token": text_tokens(reply_text), "request": 1},
                 estimated=["input_token", "output_token"])


def realtime_usage(reported: Mapping[str, object] | None, *, component: Component,
                   provider: str | None, model: str | None, output_audio_seconds: float,
                   output_text: str, purpose: str | None = None) -> Usage:
    """One realtime response's usage (``response.done`` ``usage``: text and audio tokens in and
    out, the cached ones among the input). Without it (or without its per-modality details)
    the output is estimated from the response's audio and transcript and the input is not
    known."""
    usage = _mapping(reported)
    inputs, outputs = _mapping(usage.get("input_token_details")), \
        _mapping(usage.get("output_token_details"))
    text_in, audio_in = _count(inputs.get("text_tokens")), _count(inputs.get("audio_tokens"))
    text_out, audio_out = _count(outputs.get("text_tokens")), _count(outputs.get("audio_tokens"))
    if None not in (text_in, audio_in, text_out, audio_out):
        assert text_in is not None and audio_in is not None
        cached = _mapping(inputs.get("cached_tokens_details"))
        cached_text = min(_count(cached.get("text_tokens")) or 0, text_in)
        cached_audio = min(_count(cached.get("audio_tokens")) or 0, audio_in)
        return Usage(component=component, provider=provider, model=model, purpose=purpose,
                     quantities={"input_token": text_in - cached_text,
                                 "cached_input_token": cached_text,
                                 "audio_input_token": audio_in - cached_audio,
                                 "cached_audio_input_token": cached_audio,
                                 "output_token": text_out, "audio_output_token": audio_out})
    return Usage(component=component, provider=provider, model=model, purpose=purpose,
                 quantities={"input_token": None, "audio_input_token": None,
                             "output_token": text_tokens(output_text),
                             "audio_output_token": math.ceil(
                                 output_audio_seconds * ASSISTANT_AUDIO_TOKENS_PER_SECOND)},
                 estimated=["output_token", "audio_output_token"])


def speech_usage(*, provider: str, voice: str | None, text: str, audio_seconds: float,
                 purpose: str | None = None) -> Usage:
    """One synthesis by a speech provider: the characters sent and the seconds of audio made
    (both counted by voicelab; a provider bills by one of them)."""
    return Usage(component="speech", provider=provider, model=voice, purpose=purpose,
                 quantities={"character": len(text), "second": round(audio_seconds, 3)})
