"""Pydantic models of every configuration file a run reads.

All models forbid unknown keys so a typo is an error, not a silently ignored setting.
Paths are kept as written here; the loader resolves them relative to the file that names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ._base import NonNegativeFloat, PositiveFloat, StrictModel
from ._channel import ChannelConfig
from ._cost import BudgetConfig, PricingConfig, StageConfig
from ._entities import EntitySpec, ProductInputTranscription
from ._launch import LaunchConfig
from ._pauses import (
    MAX_PAUSES_PER_SCRIPT,
    SpokenPieces,
    check_pause_count,
    check_pause_seconds,
    count_pause_markers,
    has_pause_markers,
    split_pauses,
)
from ._retention import RetentionConfig
from ._turn_taking import OLD_TURN_TAKING, canonical_turn_taking
from ._voice import LanguageTag, VoicedPersona

Capability = Literal["streaming_input", "streaming_output", "interruption", "tool_events",
                     "input_transcripts", "output_transcripts"]
#: What an endpoint may declare and a scenario may require (``Capability``'s values).
CAPABILITY_NAMES: tuple[str, ...] = Capability.__args__  # type: ignore[attr-defined]

ExitReason = Literal["endpoint_completion", "script_exhaustion", "max_turns", "max_time",
                     "connection_closed", "error", "persona_ended", "repeat_limit",
                     "no_response", "cancelled"]

Volume = Annotated[float, Field(ge=0, le=4)]


# --- scenario -------------------------------------------------------------------------------

#: The longest a trial may last, on the listener's clock: a bundle's timeline is read back
#: within it (docs/artifacts.md), and a trial without ``max_time_seconds`` ends there.
MAX_TRIAL_SECONDS = 3600


class Limits(StrictModel):
    max_turns: Annotated[int, Field(gt=0)] | None = None
    #: at most ``MAX_TRIAL_SECONDS``; it holds inside a turn too (a turn or a reply that would
    #: run past it is cut there, and a script turn that cannot fit is refused by validation)
    max_time_seconds: Annotated[float, Field(gt=0, le=MAX_TRIAL_SECONDS)] | None = None
    #: product audio may arrive at most this many times faster than the listener's clock runs,
    #: beyond ``product_audio_burst_seconds`` (a whole reply sent at once is fine; 500 s of
    #: audio in 2 s is an ``audio_flood`` failure). The total is also bounded by max_time_seconds.
    max_product_audio_speed: PositiveFloat = 10.0
    product_audio_burst_seconds: PositiveFloat = 60.0

    @property
    def time_limit_seconds(self) -> float:
        """A trial's time limit: ``max_time_seconds``, else ``MAX_TRIAL_SECONDS``."""
        return self.max_time_seconds or MAX_TRIAL_SECONDS


class ConversationSpec(StrictModel):
    max_turns: Annotated[int, Field(gt=0)] = 8
    required_capabilities: list[Capability] = Field(default_factory=list)
    #: ``auto``: wait ``first_speaker_wait_seconds`` for the product to speak, then speak
    first_speaker: Literal["product", "user", "auto"] = "product"
    first_speaker_wait_seconds: PositiveFloat = 3.0


class IvrPrompt(StrictModel):
    """Words the product's speech before a user turn must contain (``prompt_heard``)."""

    #: the user turn (1: the first) the prompt comes before; the product's speech that
    #: turn answers or barges into
    before_turn: Annotated[int, Field(ge=1, le=10_000)]
    words: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                     Field(min_length=1, max_length=50)]


class IvrSpec(StrictModel):
    """A menu's verdicts (docs/ivr.md): each is asked for only when configured here."""

    #: ``prompt_heard``: each prompt's words in the product's speech before its turn
    prompts: Annotated[list[IvrPrompt], Field(max_length=200)] = Field(default_factory=list)
    #: ``keys_accepted``: after each key press the product spoke again within
    #: ``response_after_keys_seconds`` (a key barge-in: it stopped its prompt within
    #: ``stop_after_keys_seconds`` too)
    keys_accepted: bool = False
    response_after_keys_seconds: PositiveFloat = 5.0
    #: a key barge-in: the product stops its prompt within this long of the key
    stop_after_keys_seconds: PositiveFloat = 1.0
    #: ``reached_agent``: the product said one of ``agent_words`` within
    #: ``max_seconds_to_agent`` of the call's connect
    agent_words: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                           Field(max_length=50)] = Field(default_factory=list)
    max_seconds_to_agent: PositiveFloat | None = None

    @model_validator(mode="after")
    def _agent_recognisable(self) -> IvrSpec:
        if self.max_seconds_to_agent is not None and not self.agent_words:
            raise ValueError("max_seconds_to_agent needs 'agent_words': the words that say "
                             "the agent answers")
        return self


class EvalSpec(StrictModel):
    expected_exit: ExitReason | None = None
    limits: Limits = Field(default_factory=Limits)
    outcome_spec: dict[str, object] = Field(default_factory=dict)
    concise_max_words: Annotated[int, Field(gt=0)] = 60
    max_interruption_stop_ms: PositiveFloat | None = None
    max_first_audio_latency_ms: PositiveFloat | None = None
    #: selectivity probes (docs/probes.md): every backchannel (and noise probe) of the trial
    #: must leave the product talking; every interruption must stop it
    keeps_talking_through_backchannel: bool = False
    stops_when_interrupted: bool = False
    #: hesitation turns (docs/endpointing.md): the product must not start speaking while the
    #: user pauses mid-turn (critical unless listed in ``advisory_verdicts``)
    no_cut_in: bool = False
    response_timeout_seconds: PositiveFloat = 15.0
    advisory_verdicts: list[str] = Field(default_factory=list)
    #: the scenario's ``entities`` (docs/artifacts.md): every one the user said was heard
    #: exactly by the product (``entities_heard``); every one the product's text or tool
    #: results say is said exactly in its audio (``entities_spoken``)
    entities_heard: bool = False
    entities_spoken: bool = False
    #: menu verdicts (docs/ivr.md): ``prompt_heard``, ``keys_accepted``, ``reached_agent``
    ivr: IvrSpec | None = None


class ScenarioConfig(StrictModel):
    id: Annotated[str, Field(min_length=1)]
    description: str = ""
    expected_topics: list[str] = Field(default_factory=list)
    conversation: ConversationSpec = Field(default_factory=ConversationSpec)
    eval_spec: EvalSpec = Field(default_factory=EvalSpec)
    #: the language the caller speaks in this scenario (overrides the persona's language)
    language: LanguageTag | None = None
    #: key entities the user says (account numbers, dates, names): see :class:`EntitySpec`
    entities: list[EntitySpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _entities_to_check(self) -> ScenarioConfig:
        names = [entity.name for entity in self.entities]
        if len(set(names)) != len(names):
            raise ValueError("entities: each entity needs its own name")
        spec = self.eval_spec
        if (spec.entities_heard or spec.entities_spoken) and not self.entities:
            raise ValueError("eval_spec.entities_heard / entities_spoken need the scenario's "
                             "'entities'")
        return self


# --- persona, data, script ------------------------------------------------------------------

class SessionBehavior(StrictModel):
    conclude_quickly: bool = False
    decline_extras: bool = False
    interrupts: bool = False
    patience: Literal["low", "normal", "high"] = "normal"


class PersonaConfig(VoicedPersona):
    name: Annotated[str, Field(min_length=1)]
    experience_level: str | None = None
    communication_style: str | None = None
    specialization: str | None = None
    language: LanguageTag = "en-US"
    description: str = ""
    goals: list[str] = Field(default_factory=list)
    session_behavior: SessionBehavior = Field(default_factory=SessionBehavior)

    @property
    def is_concise(self) -> bool:
        return (self.communication_style or "").strip().lower() == "concise"


class ScriptTurn(StrictModel):
    """One line of a script (docs/scripts.md): said in reply to the first product response whose
    transcript contains one of ``keywords`` (any response when there are none)."""

    #: a label for people (what the product says that this turn answers): never matched
    trigger: str = ""
    response: str = ""
    #: case-insensitive substrings of the product's transcript that make this turn the reply
    keywords: list[str] = Field(default_factory=list)
    #: the trial does not need this turn said: the ``script_turns_said`` verdict leaves it out,
    #: and a script whose unsaid turns are all optional is complete
    optional: bool = False
    audio_path: Path | None = None
    interrupt_after_seconds: NonNegativeFloat | None = None
    #: ``speech``: an ordinary turn (a barge-in when it has ``interrupt_after_seconds``);
    #: ``interruption``: a barge-in the product should stop for; ``backchannel``: a short
    #: acknowledgement spoken ``interrupt_after_seconds`` into the product's speech, after which
    #: the user keeps listening (the product should keep talking). See docs/probes.md.
    kind: Literal["speech", "backchannel", "interruption"] = "speech"
    #: keys pressed on the user's phone after the turn's speech (0-9, * and #), for adapters
    #: that carry DTMF (twilio); a turn may press keys and say nothing
    dtmf: Annotated[str, Field(pattern=r"^[0-9*#]+$")] | None = None
    #: the lengths (seconds) of the bare ``{pause}`` markers in ``response``, in order; a
    #: marker may also carry its own, ``{pause: 1.2}`` (docs/endpointing.md)
    pauses: list[float] | None = None

    @property
    def spoken(self) -> SpokenPieces:
        """``response`` split at its pause markers (validated with the turn)."""
        return split_pauses(self.response, self.pauses)

    @field_validator("response")
    @classmethod
    def _pauses_bounded(cls, response: str) -> str:
        check_pause_count(count_pause_markers(response))
        return response

    @field_validator("pauses")
    @classmethod
    def _lengths_bounded(cls, pauses: list[float] | None) -> list[float] | None:
        check_pause_count(len(pauses or ()))
        return pauses

    @model_validator(mode="after")
    def _has_something_to_say(self) -> ScriptTurn:
        if self.pauses is not None or has_pause_markers(self.response):
            self.spoken  # noqa: B018 - raises ValueError naming a bad marker or length
            if self.audio_path is not None:
                raise ValueError("pause markers need a 'response' text to synthesize, not an "
                                 "'audio_path'")
        if not self.response.strip() and self.audio_path is None and self.dtmf is None:
            raise ValueError("a script turn needs a 'response' text, an 'audio_path' or 'dtmf' "
                             "keys to press")
        if self.kind != "speech" and self.interrupt_after_seconds is None:
            raise ValueError(f"a '{self.kind}' turn is spoken into the product's speech: it "
                             f"needs 'interrupt_after_seconds'")
        if self.kind == "backchannel" and self.dtmf is not None:
            raise ValueError("a 'backchannel' turn cannot press dtmf keys")
        if self.dtmf is not None and self.interrupt_after_seconds is not None:
            if self.kind != "interruption":
                raise ValueError("keys pressed into the product's speech are a key barge-in: "
                                 "set kind: interruption (docs/ivr.md)")
            if self.response.strip() or self.audio_path is not None:
                raise ValueError("a key barge-in presses keys only: it cannot also have "
                                 "'response' or 'audio_path' (say it in a turn of its own)")
        return self


class ScriptConfig(StrictModel):
    persona_voice: str | None = None
    post_script_completion_wait_seconds: NonNegativeFloat = 0.0
    repeat_request: str = "Sorry, could you repeat that?"
    max_repeat_requests: Annotated[int, Field(ge=0)] = 2
    turns: list[ScriptTurn] = Field(default_factory=list)

    @field_validator("turns")
    @classmethod
    def _pauses_bounded(cls, turns: list[ScriptTurn]) -> list[ScriptTurn]:
        check_pause_count(sum(len(turn.spoken.pauses_seconds) for turn in turns
                              if turn.pauses is not None or has_pause_markers(turn.response)),
                          most=MAX_PAUSES_PER_SCRIPT, what="the script")
        return turns


# --- environment ----------------------------------------------------------------------------

class TransientEvent(StrictModel):
    type: Path = Field(description="the audio file of the event (the seed calls it 'type')")
    volume: Volume = 0.5
    trigger_mode: Literal["on_turn", "scheduled", "random"] = "on_turn"
    on_turn_number: Annotated[int, Field(gt=0)] | None = None
    at_seconds: NonNegativeFloat | None = None
    probability: Annotated[float, Field(ge=0, le=1)] = 0.5

    @model_validator(mode="after")
    def _trigger_is_complete(self) -> TransientEvent:
        if self.trigger_mode == "on_turn" and self.on_turn_number is None:
            raise ValueError("trigger_mode 'on_turn' needs 'on_turn_number'")
        if self.trigger_mode == "scheduled" and self.at_seconds is None:
            raise ValueError("trigger_mode 'scheduled' needs 'at_seconds'")
        return self


class NoiseProbe(StrictModel):
    """A sound played into the user's line while the product speaks (the product should keep
    talking): ``after_seconds`` after the onset of the product's ``on_reply``-th reply."""

    sound: Path = Field(description="the audio file (e.g. datasets/environments/door-close.wav)")
    volume: Volume = 0.5
    #: the product's replies are counted from 1 in the order heard (the opening is reply 1)
    on_reply: Annotated[int, Field(gt=0)] = 1
    after_seconds: NonNegativeFloat = 1.0


class RoomImpulseResponse(StrictModel):
    """A seeded room impulse response: a direct path, then exponentially decaying noise."""

    #: time for the reverberant tail to decay by 60 dB
    rt60_ms: Annotated[float, Field(gt=0, le=3000)] = 300.0
    #: the speakerphone's band: the echo path is low-passed at this frequency
    lowpass_hz: Annotated[float, Field(gt=100, lt=12000)] = 3400.0
    #: the tail's noise; absent: derived from the trial's seed
    seed: int | None = None


class EchoConfig(StrictModel):
    """A speakerphone: the product's audio as the user heard it leaks back into the user's
    line, ``delay_ms`` later, through a room impulse response, ``echo_return_loss_db`` down."""

    delay_ms: Annotated[float, Field(ge=0, le=2000)] = 40.0
    echo_return_loss_db: Annotated[float, Field(ge=0, le=80)] = 20.0
    rir: RoomImpulseResponse = Field(default_factory=RoomImpulseResponse)


class EnvironmentConfig(StrictModel):
    name: str = ""
    impact: Annotated[float, Field(ge=0, le=1)] = 1.0
    base_noise: Path | None = None
    base_noise_volume: Volume = 0.2
    background_voices: Path | None = None
    background_voices_volume: Volume = 0.15
    transient_events: list[TransientEvent] = Field(default_factory=list)
    #: the telephony line between the user and the product (codec, loss, jitter, concealment),
    #: per direction; absent: a clean line (see ``voicelab.config.ChannelConfig``)
    channel: ChannelConfig | None = None
    #: selectivity probes: sounds timed into the product's speech (docs/probes.md)
    noise_probes: list[NoiseProbe] = Field(default_factory=list)
    #: the product's own voice leaking back into the user's line (a speakerphone)
    echo: EchoConfig | None = None

    def asset_paths(self) -> list[tuple[str, Path]]:
        """(key path, file) for every audio asset the environment names."""
        assets: list[tuple[str, Path]] = []
        if self.base_noise is not None:
            assets.append(("base_noise", self.base_noise))
        if self.background_voices is not None:
            assets.append(("background_voices", self.background_voices))
        for index, event in enumerate(self.transient_events):
            assets.append((f"transient_events[{index}].type", event.type))
        for index, probe in enumerate(self.noise_probes):
            assets.append((f"noise_probes[{index}].sound", probe.sound))
        return assets


QUIET_ENVIRONMENT = EnvironmentConfig(name="quiet", impact=0.0)


# --- endpoint, probe, providers, quality evaluation -----------------------------------------

class EndpointConfig(StrictModel):
    adapter: Annotated[str, Field(min_length=1)] = "fake"
    #: the adapter's settings; voicelab's own ``turn_taking`` is kept under that one name
    #: (``turn_detection``, its older spelling, is read and renamed: :mod:`._turn_taking`)
    settings: dict[str, object] = Field(default_factory=dict)
    #: start the product process for each trial (or once per run) and stop it afterwards
    launch: LaunchConfig | None = None
    #: the settings said ``turn_detection`` (``validate`` warns)
    _old_turn_taking: bool = PrivateAttr(default=False)

    @field_validator("settings")
    @classmethod
    def _one_turn_taking_name(cls, settings: dict[str, object]) -> dict[str, Any]:
        return canonical_turn_taking(settings)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_old_spelling(cls, data: object, handler: ModelWrapValidatorHandler[EndpointConfig]
                               ) -> EndpointConfig:
        given = data.get("settings") if isinstance(data, Mapping) else None
        endpoint = handler(data)
        if isinstance(given, Mapping) and OLD_TURN_TAKING in given:
            endpoint._old_turn_taking = True
        return endpoint

    @property
    def old_turn_taking(self) -> bool:
        """Whether the settings spelled ``turn_taking`` the older way (``turn_detection``)."""
        return self._old_turn_taking


class ListenerConfig(StrictModel):
    """How the simulated user hears the product."""

    #: playback starts this long after the first packet; later packets arriving within it are
    #: absorbed (a phone's or browser's jitter buffer); only underruns count as stalls
    jitter_buffer_ms: NonNegativeFloat = 60.0
    #: listening turn-taking: a reply has ended after this much silence following its speech
    reply_end_hangover_ms: PositiveFloat = 700.0


class OutcomeProbeConfig(StrictModel):
    probe: Annotated[str, Field(min_length=1)]
    settings: dict[str, object] = Field(default_factory=dict)


class AzureOpenAIProvider(StrictModel):
    endpoint: Annotated[str, Field(min_length=1)]
    model: Annotated[str, Field(min_length=1)]
    api_version: str = "2025-04-01-preview"
    auth: Literal["default_credential", "api_key"] = "default_credential"
    api_key: str | None = None
    temperature: float | None = None
    seed: int | None = None


class OpenAIProvider(StrictModel):
    base_url: str | None = None
    api_key: str | None = None
    model: Annotated[str, Field(min_length=1)]
    temperature: float | None = None
    seed: int | None = None


class AzureSpeechProvider(StrictModel):
    region: str | None = None
    endpoint: str | None = None
    auth: Literal["api_key", "default_credential"] = "api_key"
    api_key: str | None = None
    resource_id: str | None = None
    output_format: str = "raw-24khz-16bit-mono-pcm"

    @model_validator(mode="after")
    def _has_location(self) -> AzureSpeechProvider:
        if not self.region and not self.endpoint:
            raise ValueError("azure_speech needs 'region' or 'endpoint'")
        return self


class VoiceLiveProvider(StrictModel):
    endpoint: Annotated[str, Field(min_length=1)]
    model: str = "gpt-realtime"
    api_version: str = "2025-10-01"
    auth: Literal["api_key", "default_credential"] = "api_key"
    api_key: str | None = None
    voice: str | None = None
    instructions: str | None = None


class Providers(StrictModel):
    azure_openai: AzureOpenAIProvider | None = None
    openai: OpenAIProvider | None = None
    azure_speech: AzureSpeechProvider | None = None
    voice_live: VoiceLiveProvider | None = None


class CustomJudge(StrictModel):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")]
    criteria: Annotated[str, Field(min_length=1)]
    is_critical: bool = False
    labels: list[str] = Field(default_factory=lambda: ["pass", "fail"])
    passing_labels: list[str] = Field(default_factory=lambda: ["pass"])


class AzureEvaluator(StrictModel):
    type: Literal["task_adherence", "groundedness", "coherence"]
    threshold: float | None = None
    is_critical: bool = False


class Redaction(StrictModel):
    patterns: list[str] = Field(default_factory=list)
    sensitive_fields: list[str] = Field(default_factory=list)
    replacement: str = "[REDACTED]"

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {error}") from None
        return patterns


class JudgeConfig(StrictModel):
    """A judge a class runs (``quality_evaluation.judges``): a built-in name, a name an
    installed distribution registers under ``voicelab.judges``, or ``module:Class``; its
    ``settings`` are the class's own, checked when the run is validated."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")]
    judge: Annotated[str, Field(min_length=1)]
    is_critical: bool = False
    settings: dict[str, object] = Field(default_factory=dict)


class QualityEvaluation(StrictModel):
    provider: Literal["azure_openai", "openai"] | None = None
    timeout_seconds: PositiveFloat = 60.0
    azure_api_version: str = "2025-04-01-preview"
    custom_judges: list[CustomJudge] = Field(default_factory=list)
    azure_evaluators: list[AzureEvaluator] = Field(default_factory=list)
    #: judges a registered class runs, after the LLM judges (no provider needed)
    judges: list[JudgeConfig] = Field(default_factory=list)
    redaction: Redaction = Field(default_factory=Redaction)

    @model_validator(mode="after")
    def _names_unique(self) -> QualityEvaluation:
        """A judge's name keys its result, its calibration and its column: one per judge."""
        names = [judge.name for judge in self.custom_judges] + [
            judge.name for judge in self.judges]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"judge names must be unique: {', '.join(repeated)} repeated")
        return self

    @property
    def has_llm_judges(self) -> bool:
        """Whether any judge calls a language model (and so needs a provider)."""
        return bool(self.custom_judges or self.azure_evaluators)

    @property
    def has_judges(self) -> bool:
        return self.has_llm_judges or bool(self.judges)


# --- statistics and gates -------------------------------------------------------------------

class StatisticsConfig(StrictModel):
    """How rates are reported: the confidence level and the interval of a binomial rate."""

    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.95
    #: ``wilson`` (score interval) or ``clopper_pearson`` (exact, conservative)
    interval: Literal["wilson", "clopper_pearson"] = "wilson"


class GateConfig(StrictModel):
    """A statistical gate of a run, judged on the conservative end of an interval.

    ``{metric: pass_rate, min_lower_bound: 0.9}``: the pass rate's lower confidence bound must
    reach 0.9. ``{metric: first_audio_latency_ms, quantile: 0.95, max: 800}``: the upper
    confidence bound of the 95th percentile of a per-response metric must stay at or below 800
    (``min`` instead: its lower bound must reach it, for metrics where more is better). Which
    metric names exist is checked when the run is validated.
    """

    metric: Annotated[str, Field(min_length=1)]
    min_lower_bound: Annotated[float, Field(ge=0, le=1)] | None = None
    quantile: Annotated[float, Field(gt=0, lt=1)] | None = None
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _complete(self) -> GateConfig:
        if self.metric == "pass_rate":
            if self.min_lower_bound is None or self.quantile is not None \
                    or self.max is not None or self.min is not None:
                raise ValueError("a pass_rate gate takes 'min_lower_bound' (and no quantile, "
                                 "max or min)")
        elif self.quantile is None or (self.max is None) == (self.min is None) \
                or self.min_lower_bound is not None:
            raise ValueError(f"a {self.metric} gate takes 'quantile' and one of 'max' or 'min' "
                             "(min_lower_bound is for metric: pass_rate)")
        return self


class MeasurementConfig(StrictModel):
    """When a response's timings can be trusted: the evaluator's own event-loop lag (how late a
    ticker wakes while the conversation runs: every 2 ms in real time, 10 ms unpaced) around the arrivals its timing metrics rest
    on bounds how late their stamps may be; beyond these tolerances the response is
    ``timing_degraded``, the trial ``degraded``, and a timing verdict resting on it is
    inconclusive when that error could change its answer (docs/artifacts.md). A bundle recorded
    without the late ticks is judged on the whole conversation's lag against the same
    tolerances."""

    #: the 99th percentile of a response's stamp error bounds, in ms
    max_loop_lag_p99_ms: PositiveFloat = 20.0
    #: the largest stamp error bound of a response, in ms (one blocked moment delays every
    #: arrival behind it)
    max_loop_lag_max_ms: PositiveFloat = 25.0
    #: how late a response's first audio packet may have been stamped (its own stamp's bound,
    #: ms) for ``first_audio_latency_ms`` to be trusted: one stamp carries that whole figure
    max_first_audio_error_ms: PositiveFloat = 3.0
    #: lower the number of concurrent trials while finished trials saw a loop-lag p99 above
    #: this (ms); ``null``: concurrency stays as configured
    lag_budget_ms: PositiveFloat | None = None


ProductTranscription = Literal["auto", "wire", "asr"]


class TranscriptionConfig(StrictModel):
    """Where the product's words come from, for the transcript, the text verdicts and the
    judges (docs/artifacts.md, "The product's words"). ``auto``: each response's transcript
    from the wire when the product sent one; on an adapter that declares no
    ``output_transcripts``, else its received audio recognized locally (``voicelab[speech]``)
    when a text verdict or judge reads the words; ``wire``: the wire's transcripts only (no
    recognition); ``asr``: every response recognized from its audio."""

    product: ProductTranscription = "auto"
    #: what the product heard of the user, for the scenario's entities: its input transcripts,
    #: else the user's audio recognized (``ProductInputTranscription``)
    product_input: ProductInputTranscription = "auto"


# --- run ------------------------------------------------------------------------------------

class RunConfig(StrictModel):
    scenario_path: Path
    persona_path: Path
    data_path: Path | None = None
    script_path: Path | None = None
    environment_path: Path | None = None
    persona_mode: Annotated[str, Field(min_length=1)] = "scripted"
    speech_provider: Annotated[str, Field(min_length=1)] = "tone"
    speech_settings: dict[str, object] = Field(default_factory=dict)
    persona_settings: dict[str, Any] = Field(default_factory=dict)
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig)
    outcome_probe: OutcomeProbeConfig | None = None
    providers: Providers = Field(default_factory=Providers)
    quality_evaluation: QualityEvaluation | None = None
    #: a folder, or a store URL (``s3://bucket/runs``; kept as a string: a Path would turn
    #: it into a local folder named ``s3:``)
    artifacts_dir: Path | str = Path("artifacts")
    trial_seed: int = 0
    trials: Annotated[int, Field(gt=0)] = 1
    concurrency: Annotated[int, Field(gt=0)] = 1
    pace_audio: bool = True
    speech_metrics: bool = False
    listener: ListenerConfig = Field(default_factory=ListenerConfig)
    statistics: StatisticsConfig = Field(default_factory=StatisticsConfig)
    gates: list[GateConfig] = Field(default_factory=list)
    measurement: MeasurementConfig = Field(default_factory=MeasurementConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    #: which trials keep their audio, and whether transcripts are redacted (docs/artifacts.md)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    #: what each unit of usage costs (docs/cost.md); ``pricing_path``: the same from a file
    pricing: PricingConfig | None = None
    pricing_path: Path | None = None
    #: the run's own verdicts (docs/custom-verdicts.md): dotted paths of functions decorated
    #: with ``voicelab.scoring.verdict``, imported from the run file's folder at validation
    #: and judged after the built-in verdicts
    verdicts: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    #: the run's own per-response metrics (docs/custom-verdicts.md): dotted paths of functions
    #: decorated with ``voicelab.metrics.turn_metric``; their columns follow the document's
    turn_metrics: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _plug_ins_only_when_given(self, handler: SerializerFunctionWrapHandler
                                  ) -> dict[str, object]:
        """A run without verdicts or metrics of its own is written as before
        (resolved-settings.json, the suite hash): each key appears only when it names some."""
        data: dict[str, object] = handler(self)
        for key in ("verdicts", "turn_metrics"):
            if not data.get(key):
                data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _one_price_table(self) -> RunConfig:
        if self.pricing is not None and self.pricing_path is not None:
            raise ValueError("give pricing or pricing_path, not both")
        return self


# --- suite (scenario x persona x environment x trial matrix) --------------------------------

class SuitePersona(StrictModel):
    """One persona of a matrix, with the script and data it speaks from."""

    persona: Path
    script: Path | None = None
    data: Path | None = None
    persona_mode: str | None = None


class EndpointingAxis(StrictModel):
    """A suite's endpointing sweep (docs/endpointing.md): every cell once per pause length,
    given to the bare ``{pause}`` marker of script turn ``turn`` (``script.turns.N.pauses``)."""

    turn: Annotated[int, Field(ge=0)] = 0
    pause_seconds: Annotated[list[float], Field(min_length=1, max_length=100)]

    @field_validator("pause_seconds")
    @classmethod
    def _pauses_in_range(cls, values: list[float]) -> list[float]:
        for value in values:
            check_pause_seconds(value)
        if len(set(values)) != len(values):
            raise ValueError("each pause length once")
        return values


class SuiteConfig(StrictModel):
    name: str = ""
    base: Path = Field(description="a run config every cell inherits (endpoint, speech, seeds...)")
    scenarios: list[Path] = Field(default_factory=list)
    personas: list[SuitePersona] = Field(default_factory=list)
    environments: list[Path | Literal["quiet"]] = Field(default_factory=list)
    trials: Annotated[int, Field(gt=0)] = 1
    concurrency: Annotated[int, Field(gt=0)] = 2
    artifacts_dir: Path | str | None = None  # a folder or a store URL, as the run's
    assumed_response_seconds: PositiveFloat = 5.0
    assumed_user_turn_seconds: PositiveFloat = 3.0
    #: when given, every cell reports with it (else each cell keeps its base run's)
    statistics: StatisticsConfig | None = None
    #: the endpointing curve: every cell once per pause length (docs/endpointing.md)
    endpointing: EndpointingAxis | None = None
    #: when given, every cell is priced with it (else each cell keeps its base run's)
    pricing: PricingConfig | None = None
    pricing_path: Path | None = None
    #: the most the sweep may spend (docs/cost.md); ``--max-cost`` replaces it
    budget: BudgetConfig | None = None
    #: run the matrix once per stage, cheap stages first; a stage whose gate fails stops the
    #: sweep (docs/cost.md)
    stages: list[StageConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _stages_and_prices(self) -> SuiteConfig:
        if self.pricing is not None and self.pricing_path is not None:
            raise ValueError("give pricing or pricing_path, not both")
        names = [stage.name for stage in self.stages]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two stages are named {name!r}")
        return self
