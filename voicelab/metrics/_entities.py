"""What the product heard of the scenario's key entities, and whether its audio says what its
text says (voice-metrics.json ``entities``; docs/artifacts.md).

* **Input** (``entities_heard``): for each entity the user said (its turn's text has it), the
  product's words for that turn: its input transcript when its wire sent one, else the user's
  audio *as sent to the product* recognized locally (``transcription.product_input``).
* **Output** (``entities_spoken``): for each response whose wire transcript says an entity (a
  scenario entity, or a short value with a digit from the response's tool calls or results),
  the response's received audio recognized locally: a product whose text says 4471 while its
  voice says 4417 fails.

Pure functions of the recording (and the transcript and tool calls built from it); the
recognition is the runs' one recognizer (:mod:`voicelab.speech` pocketsphinx), so ``rescore``
reproduces the figures from the bundle alone. Blocking CPU work: called in the scoring's
worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..artifacts import EntityCheck, EntityMetrics, ToolCalls, Transcript
from ..audio import PcmAudio
from ..config import EntitySpec, ScenarioConfig, TranscriptionConfig
from ..errors import ConfigError
from ..recording import EventType, ProductTurns, Recording
from ._entity_text import entity_value, numbers_in, occurs

logger = logging.getLogger(__name__)

WIRE = "wire"
#: a tool value the product's text says is checked in its audio when it is this short and has
#: a digit (a confirmation code, a time, an amount: what a voice garbles)
MAX_TOOL_VALUE_CHARS = 24
MAX_TOOL_NODES = 10_000

Recognize = Callable[[PcmAudio], str]


def _asr() -> tuple[str, Recognize] | None:
    """The local recognizer's source name and function (None: not installed)."""
    from ..speech import ASR_ENGINE, recognize, recognizer_installed

    if not recognizer_installed():
        return None
    return f"asr:{ASR_ENGINE}", recognize


@dataclass(frozen=True)
class EntityPlan:
    """The scenario's entities, the directions checked (those whose verdict the scenario
    configures: recognition costs seconds of CPU a response) and where the product's heard
    words come from."""

    entities: tuple[EntitySpec, ...]
    #: ``auto``, ``wire`` or ``asr`` (the run's ``transcription.product_input``)
    input_mode: str = "auto"
    heard: bool = False
    spoken: bool = False

    @classmethod
    def of(cls, scenario: ScenarioConfig, transcription: TranscriptionConfig) -> EntityPlan:
        spec = scenario.eval_spec
        return cls(tuple(scenario.entities), transcription.product_input,
                   heard=spec.entities_heard, spoken=spec.entities_spoken)

    @property
    def checks(self) -> bool:
        return bool(self.entities) and (self.heard or self.spoken)


#: No entities: nothing checked, nothing recognized.
NO_ENTITIES = EntityPlan(())


def check_entities(scenario: ScenarioConfig, *, source: str) -> None:
    """Every entity of ``scenario`` says something of its kind (a ``number`` has digits or
    number words, a ``time`` is one clock time); else a ConfigError naming the entity.
    ``entities_spoken`` recognizes the product's audio: without the recognizer, the error
    whose message is the install line."""
    for index, entity in enumerate(scenario.entities):
        if entity_value(entity.value, entity.kind) is None:
            raise ConfigError(f"{entity.value!r} is not a {entity.kind} (entity "
                              f"{entity.name!r})", source=source,
                              key=f"entities[{index}].value")
    if scenario.eval_spec.entities_spoken and _asr() is None:
        from ..speech import recognizer_missing

        raise recognizer_missing("eval_spec.entities_spoken (recognizing the product's audio)",
                                 source=source, key="eval_spec.entities_spoken")


def entity_warnings(scenario: ScenarioConfig, transcription: TranscriptionConfig, *,
                    adapter: str, input_transcripts: bool) -> list[str]:
    """One line when ``entities_heard`` cannot be judged as configured: the adapter sends no
    input transcript and nothing will recognize the delivered audio."""
    if not scenario.eval_spec.entities_heard or input_transcripts:
        return []
    mode = transcription.product_input
    if mode == "wire":
        return [f"entities_heard cannot be judged: adapter {adapter!r} sends no input "
                f"transcript and transcription.product_input is wire; to recognize the "
                f"delivered audio: set transcription.product_input: auto"]
    if _asr() is None:
        return [f"entities_heard cannot be judged: adapter {adapter!r} sends no input "
                f"transcript and no recognizer is installed; to recognize the delivered "
                f"audio: pip install 'voicelab[speech]'"]
    return []


def _mentions(value: str, kind: str, text: str) -> bool:
    return bool(text) and occurs(value, kind, text)


def _tool_values(value: object) -> Iterator[str]:
    """The short scalar values with a digit anywhere in a tool call's arguments or result
    (walked without recursion, at most ``MAX_TOOL_NODES`` nodes: a product's JSON is hostile
    input)."""
    pending = [value]
    seen = 0
    while pending and seen < MAX_TOOL_NODES:
        item = pending.pop()
        seen += 1
        if isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
        elif isinstance(item, int | float) and not isinstance(item, bool):
            yield str(item)
        elif isinstance(item, str) and len(item) <= MAX_TOOL_VALUE_CHARS \
                and any(ch.isdigit() for ch in item):
            yield item


def _kind_of_tool_value(value: str) -> str:
    if entity_value(value, "time") is not None and ":" in value:
        return "time"
    return "number" if value.replace(",", "").replace("-", "").strip().isdigit() else "text"


class _Recognized:
    """Each audio recognized once (a user turn and a response may share no id, but a response
    checked for several entities is recognized once)."""

    def __init__(self, recording: Recording):
        self.recording = recording
        self.asr = _asr()
        self.texts: dict[tuple[EventType, str], str] = {}

    def text(self, kind: EventType, turn_id: str) -> tuple[str | None, str | None]:
        """(source, words) of a turn's audio recognized; (None, None): no recognizer."""
        if self.asr is None:
            return None, None
        source, recognize = self.asr
        key = (kind, turn_id)
        if key not in self.texts:
            audio = PcmAudio.from_bytes(self.recording.turn_audio(kind, turn_id))
            self.texts[key] = recognize(audio)
            logger.debug("%s %s recognized: %r", kind.value, turn_id, self.texts[key])
        return source, self.texts[key]


def _accuracy(checks: list[EntityCheck]) -> float | None:
    decided = [c for c in checks if c.correct is not None]
    return round(sum(bool(c.correct) for c in decided) / len(decided), 4) if decided else None


def _check(entity_name: str, kind: str, value: str, *, direction: str, turn_id: str,
           source: str | None, words: str | None, origin: str = "scenario",
           missing: str = "") -> EntityCheck:
    if words is None:
        return EntityCheck(name=entity_name, kind=kind, value=value, direction=direction,
                           turn_id=turn_id, source=None, correct=None, origin=origin,
                           why=f"nothing to compare: {missing}")
    correct = occurs(value, kind, words)
    found = numbers_in(words)
    heard = "heard" if direction == "input" else "said in its audio"
    why = f"{heard}: {value!r}" if correct else (
        f"not {heard}; the {source} words say {', '.join(found) if found else 'no number'}"
        if kind in ("number", "time") else f"not {heard} ({source} words: {words!r})")
    return EntityCheck(name=entity_name, kind=kind, value=value, direction=direction,
                       turn_id=turn_id, source=source, correct=correct, numbers_found=found,
                       origin=origin, why=why)


def _input_checks(plan: EntityPlan, transcript: Transcript, recognized: _Recognized
                  ) -> tuple[list[EntityCheck], list[str]]:
    checks: list[EntityCheck] = []
    said_any: set[str] = set()
    for turn in transcript.turns:
        if turn.role != "user":
            continue
        said = [e for e in plan.entities if _mentions(e.value, e.kind, turn.text)]
        if not said:
            continue
        source: str | None
        words: str | None
        if plan.input_mode != "asr" and turn.heard_as is not None:
            source, words = WIRE, turn.heard_as
            missing = ""
        elif plan.input_mode == "wire":
            source, words, missing = None, None, "the product sent no input transcript"
        else:
            source, words = recognized.text(EventType.USER_AUDIO, turn.turn_id)
            missing = "the local recognizer is not installed (voicelab[speech])"
        for entity in said:
            said_any.add(entity.name)
            checks.append(_check(entity.name, entity.kind, entity.value, direction="input",
                                 turn_id=turn.turn_id, source=source, words=words,
                                 missing=missing))
    return checks, [e.name for e in plan.entities if e.name not in said_any]


def _output_checks(plan: EntityPlan, recording: Recording, tool_calls: ToolCalls,
                   recognized: _Recognized) -> list[EntityCheck]:
    responses = ProductTurns()
    for event in recording.events:
        responses.follow(event)
    tools: dict[str, list[str]] = {}
    for call in tool_calls.tool_calls:
        if call.turn_id:
            tools.setdefault(call.turn_id, []).extend(
                [*_tool_values(call.arguments), *_tool_values(call.result)])
    checks: list[EntityCheck] = []
    for response in responses.responses:
        text = " ".join(p for p in response.transcript_parts if p).strip()
        claims: list[tuple[str, str, str, str]] = [
            (e.name, e.kind, e.value, "scenario") for e in plan.entities
            if _mentions(e.value, e.kind, text)]
        for value in dict.fromkeys(tools.get(response.turn_id, [])):
            kind = _kind_of_tool_value(value)
            if _mentions(value, kind, text) and not any(
                    occurs(value, kind, claimed) for _, _, claimed, _ in claims):
                claims.append((f"tool:{value}", kind, value, "tool"))
        if not claims:
            continue
        source, words = recognized.text(EventType.PRODUCT_AUDIO, response.turn_id)
        for name, kind, value, origin in claims:
            checks.append(_check(name, kind, value, direction="output",
                                 turn_id=response.turn_id, source=source, words=words,
                                 origin=origin, missing="the local recognizer is not "
                                                        "installed (voicelab[speech])"))
    return checks


def entity_metrics(recording: Recording, transcript: Transcript, tool_calls: ToolCalls,
                   plan: EntityPlan) -> EntityMetrics | None:
    """The entities of ``plan`` through the call, in the directions it checks (None: it
    checks none)."""
    if not plan.checks:
        return None
    recognized = _Recognized(recording)
    inputs, not_said = _input_checks(plan, transcript, recognized) if plan.heard else ([], [])
    outputs = _output_checks(plan, recording, tool_calls, recognized) if plan.spoken else []
    return EntityMetrics(input=inputs, output=outputs, input_accuracy=_accuracy(inputs),
                         output_accuracy=_accuracy(outputs), not_said=not_said)
