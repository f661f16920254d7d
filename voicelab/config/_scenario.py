"""The scenario file: what a trial tests, its limits, the verdicts asked for and their thresholds.

Also the names a scenario shares with the rest of voicelab: the capabilities an endpoint declares
and a scenario requires, and the reasons a trial ends.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import PositiveFloat, StrictModel
from ._entities import EntitySpec
from ._voice import LanguageTag

Capability = Literal["streaming_input", "streaming_output", "interruption", "tool_events",
                     "input_transcripts", "output_transcripts"]
#: What an endpoint may declare and a scenario may require (``Capability``'s values).
CAPABILITY_NAMES: tuple[str, ...] = Capability.__args__  # type: ignore[attr-defined]

ExitReason = Literal["endpoint_completion", "script_exhaustion", "max_turns", "max_time",
                     "connection_closed", "error", "persona_ended", "repeat_limit",
                     "no_response", "cancelled"]


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
