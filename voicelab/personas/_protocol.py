"""The `Persona` protocol: the simulated user, who knows text/audio turns and no transport.

Constructor contract: ``Persona(settings, context)`` with the run's ``persona_settings`` and a
:class:`PersonaContext`. An optional classmethod ``check(settings, context)`` is called by
``validate`` (missing package, missing credential, missing script) without network calls.

The runner asks:

* ``opening()`` when the scenario's ``first_speaker`` is ``user``;
* ``barge_in(response)`` while a product response is playing (possibly several times, as
  evidence arrives): a returned turn with ``interrupt_after_seconds`` is spoken over the product
  once that much of the response's audio has played, and the runner then calls
  ``confirm_barge_in(turn)`` (the interrupted response gets no ``reply``);
* ``reply(response)`` after each product response completes.

Optional: ``planned_turns()`` lists turns the persona already knows it may say (a script), so
the runner can synthesize them before the call; ``evidence()`` returns what to keep.

A :class:`PersonaEnd` stops the conversation with its ``exit_reason``, after waiting up to
``wait_seconds`` for the product to complete on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from ..artifacts import Usage
from ..audio import PcmAudio
from ..config import (
    LoadedRun,
    PersonaConfig,
    Providers,
    ScenarioConfig,
    ScriptConfig,
    SecretScrubber,
)


@dataclass(frozen=True)
class PersonaContext:
    scenario: ScenarioConfig
    persona: PersonaConfig
    data: Mapping[str, JsonValue]
    script: ScriptConfig | None = None
    providers: Providers = field(default_factory=Providers)
    seed: int = 0
    trial_index: int = 1
    scrubber: SecretScrubber = field(default_factory=SecretScrubber)
    base_dir: Path = field(default_factory=Path.cwd)
    environ: Mapping[str, str] | None = None
    speech_provider: str = "tone"
    voice: str | None = None
    #: prerecorded script turns (``audio_path``), decoded once by validation, by turn index
    script_audio: Mapping[int, PcmAudio] = field(default_factory=dict)
    #: where a persona whose model is paid records each call's usage, as it spends
    #: (``usage.recorded`` on the trial's recording; docs/cost.md); None: nowhere
    usage: Callable[[Usage], None] | None = None

    @classmethod
    def for_trial(cls, loaded: LoadedRun, *, trial_index: int, seed: int,
                  script_audio: Mapping[int, PcmAudio] | None = None,
                  usage: Callable[[Usage], None] | None = None) -> PersonaContext:
        """The context a run's persona gets in trial ``trial_index``."""
        return cls(scenario=loaded.scenario, persona=loaded.persona, data=loaded.data,
                   script=loaded.script, providers=loaded.run.providers, seed=seed,
                   trial_index=trial_index, scrubber=loaded.scrubber, base_dir=loaded.base_dir,
                   environ=os.environ, speech_provider=loaded.run.speech_provider,
                   voice=loaded.script.persona_voice if loaded.script else None,
                   script_audio=script_audio or {}, usage=usage)

    def record_usage(self, usage: Usage) -> None:
        """Record what a paid call used (nothing when the context records nowhere)."""
        if self.usage is not None:
            self.usage(usage)


class _RenderedWhenRead:
    """A dataclass field that may be given a zero-argument function instead of its value: the
    function is called once, when the field is first read. A response's audio is joined from
    hundreds of received chunks, and most personas never read it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = f"_{name}_value"

    def __get__(self, instance: object, owner: type | None = None) -> PcmAudio | None:
        if instance is None:
            return None  # the field's default
        value = instance.__dict__[self._key]
        if callable(value):
            value = instance.__dict__[self._key] = value()
        return value

    def __set__(self, instance: object,
                value: PcmAudio | Callable[[], PcmAudio] | None) -> None:
        instance.__dict__[self._key] = value


@dataclass
class ProductResponse:
    """One product response as the persona sees it."""

    index: int
    transcript: str = ""
    #: the response's audio (what the user heard of it); the runner renders it when first read
    audio: _RenderedWhenRead = _RenderedWhenRead()
    tool_calls: list[dict[str, object]] = field(default_factory=list)
    tool_results: list[dict[str, object]] = field(default_factory=list)
    input_transcript: str | None = None
    status: str = "completed"
    conversation_complete: bool = False
    audio_seconds_played: float = 0.0


@dataclass
class UserTurn:
    """What the simulated user says next. Without ``audio`` the runner synthesizes ``text``."""

    text: str
    audio: PcmAudio | None = None
    interrupt_after_seconds: float | None = None
    source: str = "script"
    #: more fields of the turn's ``user.turn_started`` event (each a field of its model)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: keys pressed after the speech (DTMF: 0-9, * and #); with no text or audio, only keys
    dtmf: str | None = None
    #: a replayed recording: ``audio`` already carries the environment and is sent as it is
    recorded: RecordedSpeech | None = None
    #: a hesitation turn: ``pieces`` are said one after another with ``pauses_seconds[i]`` of
    #: silence after ``pieces[i]`` (``text`` is the pieces joined); empty: said in one go
    pieces: tuple[str, ...] = ()
    pauses_seconds: tuple[float, ...] = ()
    #: ``speech``, ``interruption`` or ``backchannel`` (spoken into the product's speech, after
    #: which the user keeps listening; see docs/probes.md)
    kind: str = "speech"


@dataclass(frozen=True)
class RecordedSpeech:
    """What a replayed turn (``UserTurn.recorded``) keeps of the original: where its speech
    was (measured on the clean speech, not on the noisy recording), the clean speech when the
    bundle kept it (for the speech metrics; else the recording stands for it) and the original
    mix's figures (``environment.mixed``)."""

    speech_span: tuple[int, int] | None = None
    clean: PcmAudio | None = None
    mix_summary: Mapping[str, object] | None = None


@dataclass
class PersonaEnd:
    """The simulated user has nothing more to say."""

    exit_reason: str
    wait_seconds: float = 0.0
    message: str = ""


PersonaDecision = UserTurn | PersonaEnd


@runtime_checkable
class Persona(Protocol):
    async def start(self) -> None: ...

    async def opening(self) -> PersonaDecision: ...

    def barge_in(self, response: ProductResponse) -> UserTurn | None: ...

    def confirm_barge_in(self, turn: UserTurn) -> None: ...

    async def reply(self, response: ProductResponse) -> PersonaDecision: ...

    async def close(self) -> None: ...


@runtime_checkable
class KeepsEvidence(Protocol):
    """An optional persona ability: what the session said besides its turns, kept in the
    bundle (``persona-session.json``)."""

    def evidence(self) -> dict[str, JsonValue]:
        """Prompts, replies and session events to keep in the bundle (empty when none)."""


@runtime_checkable
class PlansTurns(Protocol):
    """An optional persona ability: the turns it will say, known before the call (a script),
    so the runner can synthesize them ahead."""

    def planned_turns(self) -> list[UserTurn]:
        """The turns in the order they will be said."""
