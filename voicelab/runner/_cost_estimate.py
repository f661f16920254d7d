"""What a run or a cell will cost before it runs: from its configuration (the matrix, the
providers, a few stated assumptions), or better from a previous run's measured usage.

Both price a trial's usage under the current table, so an estimate and a bill use the same
arithmetic. The configuration estimate follows docs/cost.md, "Estimates before spending":
a trial has a *shape* (user turns, responses, their lengths), three of them bound it (low,
expected, high), and each component's usage is a function of the shape. A previous run's
trials give the bounds directly: their lowest, mean and highest usage priced again (that
estimate, and a matrix plan's cells estimated either way, are :mod:`._measured_costs`'s).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..artifacts import TrialCost, UnpricedItem, Usage
from ..config import LoadedRun, PricingConfig
from ..cost import (
    ASSISTANT_AUDIO_TOKENS_PER_SECOND,
    BYTES_PER_GIGABYTE,
    CHARS_PER_TOKEN,
    USER_AUDIO_TOKENS_PER_SECOND,
    price_usage,
)
from ..endpoints import EndpointSettings
from ..providers import resolve_llm_provider
from ..speech import ASR_ENGINE, cacheable, realtime_target, seed_dependent

#: Speaking rate: 150 words a minute, about six characters a word with its space.
SECONDS_PER_WORD = 0.4
CHARS_PER_SECOND = 15.0
#: A synthesizer persona's fixed instructions, and what it adds to each reply (its JSON:
#: ``end_conversation`` and a ``reason``), in characters.
PERSONA_PROMPT_CHARS = 1_600
PERSONA_REPLY_OVERHEAD_CHARS = 80
#: A custom judge's fixed instructions and its answer (label and rationale), in characters.
JUDGE_PROMPT_CHARS = 1_200
JUDGE_ANSWER_CHARS = 240
#: A realtime persona's instructions beyond the persona, scenario and data it states.
REALTIME_INSTRUCTION_CHARS = 600
#: A trial's documents besides its audio (events, metrics, transcripts, configs), in bytes.
DOCUMENT_BYTES = 200_000
#: Bytes a second of canonical audio takes in a WAV file; a trial keeps each direction's stream
#: and three channels placed on the listener's timeline (user, product, mixed).
WAV_BYTES_PER_SECOND = 48_000
#: How far the low and high shapes stretch the assumed lengths.
SHORT, LONG = 0.5, 2.0

Bound = Literal["low", "expected", "high"]
BOUNDS: tuple[Bound, ...] = ("low", "expected", "high")


@dataclass(frozen=True)
class TrialShape:
    """How much talking one trial does (for the configuration estimate)."""

    user_turns: int
    responses: int
    user_turn_seconds: float
    response_seconds: float
    user_turn_chars: float

    @property
    def call_seconds(self) -> float:
        return self.user_turns * self.user_turn_seconds + self.responses * self.response_seconds


@dataclass(frozen=True)
class CostEstimate:
    """Low, expected and high cost of some trials (None: nothing of it has a known price);
    ``per_trial``: the expected cost of one more trial (what a budget holds for it)."""

    currency: str | None
    low: float | None
    expected: float | None
    high: float | None
    per_trial: float | None
    trials: int
    #: ``config`` (assumptions) or ``measured`` (a previous run's trials)
    source: str = "config"
    unpriced: list[UnpricedItem] = field(default_factory=list)

    def text(self) -> str:
        """``~0.42 USD (0.10-1.30)``, or what is missing."""
        if self.expected is None:
            return "unknown (nothing of it is priced)"
        unit = f" {self.currency}" if self.currency else ""
        line = f"~{_money(self.expected)}{unit} ({_money(self.low)}-{_money(self.high)})"
        if self.unpriced:
            line += f"; unpriced: {unpriced_text(self.unpriced)}"
        return line


def _money(amount: float | None) -> str:
    if amount is None:
        return "?"
    return f"{amount:.2f}" if amount >= 1 else f"{amount:.4g}"


def unpriced_text(items: Iterable[UnpricedItem], *, limit: int = 4) -> str:
    """``speech azure_speech per character, judge (unknown quantity)...`` for a line."""
    names = []
    for item in items:
        narrowed = "/".join(p for p in (item.provider, item.model) if p)
        reason = "" if item.reason == "no_price" else " (quantity unknown)"
        names.append(f"{item.component}{' ' + narrowed if narrowed else ''} per "
                     f"{item.unit}{reason}")
    shown = sorted(set(names))
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def combined(estimates: Sequence[CostEstimate]) -> CostEstimate:
    """Several estimates (a stage's cells, a suite's stages) as one."""
    def total(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return math.fsum(known) if known else None

    seen: dict[tuple[object, ...], UnpricedItem] = {}
    for estimate in estimates:
        for item in estimate.unpriced:
            seen.setdefault((item.component, item.provider, item.model, item.unit, item.reason),
                            item)
    return CostEstimate(
        currency=next((e.currency for e in estimates if e.currency), None),
        low=total(e.low for e in estimates), expected=total(e.expected for e in estimates),
        high=total(e.high for e in estimates), per_trial=None,
        trials=sum(e.trials for e in estimates),
        source="measured" if estimates and all(e.source == "measured" for e in estimates)
        else "config", unpriced=list(seen.values()))


# --- from the configuration -------------------------------------------------------------------

def trial_shapes(loaded: LoadedRun, *, user_turn_seconds: float,
                 response_seconds: float) -> dict[Bound, TrialShape]:
    """The low, expected and high shape of one of ``loaded``'s trials: a scripted persona says
    its script's lines (or stops after the first), another persona says up to ``max_turns``
    turns of ``user_turn_seconds``; each response takes ``response_seconds``; the low and high
    shapes take half and twice those lengths."""
    limits = loaded.scenario.eval_spec.limits.max_turns
    max_turns = loaded.scenario.conversation.max_turns
    max_turns = min(max_turns, limits) if limits is not None else max_turns
    opening = 1 if loaded.scenario.conversation.first_speaker == "product" else 0
    script = loaded.script
    if loaded.run.persona_mode == "scripted" and script is not None and script.turns:
        lines = [turn.response for turn in script.turns][:max_turns]
        seconds = sum(len(text.split()) for text in lines) * SECONDS_PER_WORD / len(lines)
        chars = sum(len(text) for text in lines) / len(lines)
        turns = {"low": 1, "expected": len(lines), "high": len(lines)}
        lengths = {bound: seconds for bound in BOUNDS}
        texts = {bound: chars for bound in BOUNDS}
    else:
        turns = {"low": 1, "expected": max_turns, "high": max_turns}
        lengths = {"low": user_turn_seconds * SHORT, "expected": user_turn_seconds,
                   "high": user_turn_seconds * LONG}
        texts = {bound: lengths[bound] * CHARS_PER_SECOND for bound in BOUNDS}
    stretch = {"low": SHORT, "expected": 1.0, "high": LONG}
    return {bound: TrialShape(user_turns=turns[bound], responses=turns[bound] + opening,
                              user_turn_seconds=lengths[bound],
                              response_seconds=response_seconds * stretch[bound],
                              user_turn_chars=texts[bound])
            for bound in BOUNDS}


def _tokens(chars: float) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _persona_usage(loaded: LoadedRun, shape: TrialShape) -> list[Usage]:
    mode = loaded.run.persona_mode
    settings = loaded.run.persona_settings
    response_chars = shape.response_seconds * CHARS_PER_SECOND
    stated = len(json.dumps(loaded.persona.model_dump(mode="json"), default=str)) \
        + len(loaded.scenario.description or "") + len(json.dumps(dict(loaded.data),
                                                                  default=str))
    if mode == "synthesizer":
        provider = resolve_llm_provider(loaded.run.providers, preferred=settings.get("provider"),
                                        environ=os.environ, key="persona_settings.provider")
        exchange = shape.user_turn_chars + response_chars
        sent = sum(PERSONA_PROMPT_CHARS + stated + k * exchange
                   for k in range(shape.user_turns))
        return [Usage(component="persona", provider=provider.kind, model=provider.model,
                      quantities={"input_token": _tokens(sent), "output_token": _tokens(
                          shape.user_turns * (shape.user_turn_chars
                                              + PERSONA_REPLY_OVERHEAD_CHARS)),
                                  "request": shape.user_turns})]
    if mode == "realtime":
        target = realtime_target(loaded.run.providers, provider=settings.get("provider"),
                                 model=settings.get("model"), uri=settings.get("uri"),
                                 api_version=settings.get("api_version"))
        turns = shape.user_turns
        heard = shape.response_seconds * USER_AUDIO_TOKENS_PER_SECOND
        said = shape.user_turn_seconds * USER_AUDIO_TOKENS_PER_SECOND
        instructions = _tokens(REALTIME_INSTRUCTION_CHARS + stated)
        return [Usage(component="persona", provider=target.dialect, model=target.model,
                      quantities={
                          "input_token": instructions,
                          "cached_input_token": instructions * max(0, turns - 1),
                          "audio_input_token": math.ceil(turns * heard),
                          # each response re-reads the conversation so far (from the cache)
                          "cached_audio_input_token": math.ceil(
                              sum(k * (heard + said) for k in range(turns))),
                          "output_token": _tokens(turns * shape.user_turn_chars),
                          "audio_output_token": math.ceil(
                              turns * shape.user_turn_seconds
                              * ASSISTANT_AUDIO_TOKENS_PER_SECOND)})]
    return []


def _speech_usage(loaded: LoadedRun, shape: TrialShape) -> list[Usage]:
    if loaded.run.persona_mode in ("realtime", "replay"):
        return []  # the persona's own audio: nothing is synthesized
    voice = loaded.script.persona_voice if loaded.script is not None else None
    return [Usage(component="speech", provider=loaded.run.speech_provider, model=voice,
                  quantities={"character": math.ceil(shape.user_turns * shape.user_turn_chars),
                              "second": round(shape.user_turns * shape.user_turn_seconds, 3)})]


@runtime_checkable
class RealtimeModelSettings(Protocol):
    """Parsed settings that name a Realtime service and its model (``adapter: realtime``)."""

    dialect: str
    model: str | None
    deployment: str | None


def _realtime_model(settings: EndpointSettings) -> tuple[str, str | None]:
    """The Realtime service and model the product's settings name."""
    if isinstance(settings, RealtimeModelSettings):
        return settings.dialect, settings.deployment or settings.model
    if isinstance(settings, Mapping):  # not validated: an estimate from the loaded config
        model = settings.get("deployment") or settings.get("model")
        return str(settings.get("dialect") or "openai"), str(model) if model else None
    return "openai", None


def _product_usage(loaded: LoadedRun, shape: TrialShape,
                   endpoint_settings: EndpointSettings | None = None) -> list[Usage]:
    endpoint = loaded.run.endpoint
    usage = [Usage(component="product", provider=endpoint.adapter,
                   quantities={"minute": round(shape.call_seconds / 60.0, 6)})]
    if endpoint.adapter == "realtime":
        provider, model = _realtime_model(
            endpoint.settings if endpoint_settings is None else endpoint_settings)
        responses = shape.responses
        heard = shape.user_turn_seconds * USER_AUDIO_TOKENS_PER_SECOND
        said = shape.response_seconds * USER_AUDIO_TOKENS_PER_SECOND
        usage.append(Usage(
            component="product", provider=provider, model=model,
            quantities={"input_token": None, "audio_input_token": math.ceil(
                            shape.user_turns * heard),
                        "cached_audio_input_token": math.ceil(
                            sum(k * (heard + said) for k in range(responses))),
                        "output_token": _tokens(responses * shape.response_seconds
                                                * CHARS_PER_SECOND),
                        "audio_output_token": math.ceil(
                            responses * shape.response_seconds
                            * ASSISTANT_AUDIO_TOKENS_PER_SECOND)}))
    return usage


def _judge_usage(loaded: LoadedRun, shape: TrialShape) -> list[Usage]:
    quality = loaded.run.quality_evaluation
    if quality is None or not (quality.custom_judges or quality.azure_evaluators):
        return []
    provider = resolve_llm_provider(loaded.run.providers, preferred=quality.provider,
                                    environ=os.environ, key="quality_evaluation.provider")
    conversation = shape.user_turns * shape.user_turn_chars \
        + shape.responses * shape.response_seconds * CHARS_PER_SECOND
    usage = [Usage(component="judge", provider=provider.kind, model=provider.model,
                   quantities={"input_token": _tokens(JUDGE_PROMPT_CHARS + conversation),
                               "output_token": _tokens(JUDGE_ANSWER_CHARS), "request": 1})
             for _ in quality.custom_judges]
    # an Azure evaluator reports no usage: its requests only
    usage += [Usage(component="judge", provider=provider.kind, model=provider.model,
                    quantities={"input_token": None, "output_token": None, "request": 1})
              for _ in quality.azure_evaluators]
    return usage


def _recognition_usage(loaded: LoadedRun, shape: TrialShape, *, output_transcripts: bool
                       ) -> list[Usage]:
    mode = loaded.run.transcription.product
    if mode == "wire" or (mode == "auto" and output_transcripts):
        return []
    return [Usage(component="recognition", provider=ASR_ENGINE, quantities={
        "second": round(shape.responses * shape.response_seconds, 3)})]


def _storage_usage(shape: TrialShape) -> Usage:
    spoken = shape.user_turns * shape.user_turn_seconds + shape.responses * shape.response_seconds
    byte_count = (2 * spoken + 3 * shape.call_seconds) * WAV_BYTES_PER_SECOND + DOCUMENT_BYTES
    return Usage(component="storage",
                 quantities={"gigabyte": round(byte_count / BYTES_PER_GIGABYTE, 9)})


def _cached_once(loaded: LoadedRun, speech_cls: type | None) -> bool:
    """A script's lines spoken by a cacheable voice that does not vary with the seed are
    synthesized once per run (the speech cache), not once per trial."""
    return (loaded.run.persona_mode == "scripted" and speech_cls is not None
            and cacheable(speech_cls) and not seed_dependent(speech_cls))


def estimate_from_config(loaded: LoadedRun, *, trials: int, pricing: PricingConfig | None,
                         user_turn_seconds: float = 3.0, response_seconds: float = 5.0,
                         speech_cls: type | None = None, output_transcripts: bool = True,
                         endpoint_settings: EndpointSettings | None = None) -> CostEstimate:
    """``trials`` of ``loaded`` priced from its configuration (see the module docstring);
    ``endpoint_settings`` are the ones validation parsed (``RunPlan.endpoint_settings``),
    else the loaded mapping is read as it is."""
    shapes = trial_shapes(loaded, user_turn_seconds=user_turn_seconds,
                          response_seconds=response_seconds)
    once = _cached_once(loaded, speech_cls)
    amounts: dict[Bound, float | None] = {}
    unpriced: list[UnpricedItem] = []
    per_trial: float | None = None
    for bound, shape in shapes.items():
        each = [*_persona_usage(loaded, shape),
                *_product_usage(loaded, shape, endpoint_settings),
                *_judge_usage(loaded, shape),
                *_recognition_usage(loaded, shape, output_transcripts=output_transcripts),
                _storage_usage(shape)]
        speech = _speech_usage(loaded, shape)
        trial = price_usage([*each, *([] if once else speech)], pricing)
        first = price_usage(speech, pricing) if once else TrialCost(total=0.0)
        if bound == "low" and once:
            first = TrialCost(total=0.0)  # every line may already be in the speech cache
        amounts[bound] = _times(trial.total, trials, plus=first.total)
        if bound == "expected":
            per_trial = trial.total
            unpriced = [*trial.unpriced, *first.unpriced]
    return CostEstimate(currency=pricing.currency if pricing else None, low=amounts["low"],
                        expected=amounts["expected"], high=amounts["high"], per_trial=per_trial,
                        trials=trials, source="config", unpriced=unpriced)


def _times(each: float | None, trials: int, *, plus: float | None) -> float | None:
    if each is None and plus is None:
        return None
    return (each or 0.0) * trials + (plus or 0.0)
