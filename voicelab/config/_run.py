"""The run file: which scenario, persona and environment, the endpoint, and how a run measures,
transcribes, reports and prices its trials.

Paths are kept as written; the loader resolves them relative to the run file.
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
from ._cost import PricingConfig
from ._entities import ProductInputTranscription
from ._launch import LaunchConfig
from ._providers import Providers
from ._quality import QualityEvaluation
from ._retention import RetentionConfig
from ._statistics import GateConfig, StatisticsConfig
from ._turn_taking import OLD_TURN_TAKING, canonical_turn_taking


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


class MeasurementConfig(StrictModel):
    """When a response's timings can be trusted: the evaluator's own event-loop lag (how late a
    ticker wakes while the conversation runs: every 2 ms in real time, 10 ms unpaced) around the arrivals its timing metrics rest
    on bounds how late their stamps may be; beyond these tolerances the response is
    ``timing_degraded``, the trial ``degraded``, and a timing verdict resting on it is
    inconclusive when that error could change its answer (docs/artifacts.md). A bundle recorded
    without the late ticks is judged on the whole conversation's lag against the same
    tolerances."""

    #: the 99th percentile of a response's stamp error bounds, in ms: judges recordings whose
    #: late ticks predate per-figure bounds (each figure now has one bound, judged by the max)
    max_loop_lag_p99_ms: PositiveFloat = 20.0
    #: how far one of a response's timing figures may be off (its own error bound, from the
    #: stamps it rests on), in ms, before the response is ``timing_degraded``
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
