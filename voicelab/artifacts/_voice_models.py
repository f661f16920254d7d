"""The models of ``voice-metrics.json`` and ``voice-events.jsonl``: per-turn timing and signal
metrics, their summaries, the selectivity probes' outcomes and the measurement's quality (the
evaluator's own loop lag). Versioning: see :mod:`._models`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from ..audio import SignalAnalysis
from ._endpointing_models import without_absent
from ._models import ArtifactModel, Versioned
from ._talk_models import EntityMetrics, TalkMetrics

#: The seed's signal-analysis fields: one definition, shared with :mod:`voicelab.audio`.
SignalStats = SignalAnalysis
#: TurnMetrics fields of a hesitation turn only (absent from every other turn's document)
HESITATION_FIELDS = ("user_pauses_ms", "product_cut_in", "cut_in_pause_index",
                     "cut_in_after_pause_ms", "answer_after_cut_in_ms",
                     "user_pauses_phone_band_ms")
#: TurnMetrics fields of a response the user answered with keys only (docs/ivr.md)
KEY_FIELDS = ("key_turn_id", "key_digits", "key_barge_in", "key_to_speech_ms",
              "key_stop_latency_ms")


class ProbeOutcome(ArtifactModel):
    """What the product did about one selectivity probe (docs/probes.md). Times are ms on
    the listener timeline."""

    probe_id: str
    kind: Literal["backchannel", "noise", "interruption"]
    #: the turn whose reply was probed, and the user turn of the probe (None: a noise)
    response_turn_id: str
    turn_id: str | None = None
    label: str = ""
    #: the first and last audible sample of the probe's sound on the line
    onset_ms: float
    #: when the line frame carrying the onset was sent: the product can hear the probe from
    #: here (a frame's samples arrive at once), and its reaction is timed from here
    sent_ms: float
    end_ms: float | None = None
    #: when the probe was aimed (after the onset of the reply's speech)
    after_product_speech_ms: float | None = None
    #: False: a noise probe whose reply was over before its moment (``probe.skipped``; its
    #: onset and sent times are that moment); never judged
    played: bool = True
    #: the product's speech was going on at the onset (else nothing to judge: stopped is None)
    product_speaking: bool
    stopped: bool | None = None
    #: ``sent_ms`` to the end of the product's audible speech, when it stopped
    stop_ms: float | None = None
    #: what showed the stop: ``cancelled`` (the response ended cancelled), ``interruption``
    #: (the product said so), ``speech_end`` (its speech ended within the window)
    stop_evidence: Literal["cancelled", "interruption", "speech_end"] | None = None
    #: the product's speech heard after the onset, until its speech ran out
    speech_after_onset_ms: float | None = None
    #: kept talking (backchannel, noise) or stopped (interruption); None: not applicable
    correct: bool | None = None


class SelfInterruption(ArtifactModel):
    """The product stopped or answered while no user speech and no probe was on the line
    (only its own echo, or nothing) in the ``lookback_ms`` before."""

    kind: Literal["stopped", "answered"]
    at_ms: float
    turn_id: str | None = None
    #: stopped: how long the product had been talking; answered: how long it had been quiet
    after_product_speech_ms: float | None = None
    silence_before_ms: float | None = None
    lookback_ms: float


# --- timeline and metrics (written as plain dicts for speed; these models give their schemas) --

class PcmInfo(ArtifactModel):
    encoding: Literal["pcm_s16le"]
    sample_rate_hz: int
    channels: int
    byte_count: int
    duration_ms: float


class TraceInfo(ArtifactModel):
    trace_id: str
    span_id: str | None = None
    parent_span_id: str | None = None


class VoiceEvent(ArtifactModel):
    """One line of voice-events.jsonl."""

    contract_version: str
    event_id: str
    sequence: int
    session_id: str
    turn_id: str | None = None
    timestamp_utc: str
    monotonic_offset_ns: int
    listener_offset_ns: int | None = Field(
        None, description="where the simulated listener was: monotonic_offset_ns plus every "
                          "virtual advance before the event (2.0; absent in 1.0 bundles)")
    offset_ms: float
    source: str
    direction: Literal["outbound", "inbound", "internal"]
    event_type: str
    speaker_role: Literal["user", "assistant"] | None = None
    pcm: PcmInfo | None = None
    trace: TraceInfo | None = None
    attributes: dict[str, object] = Field(default_factory=dict)


class TurnMetrics(ArtifactModel):
    turn_id: str
    index: int
    status: str
    reference: Literal["commit", "init", "speech_end"] | None = None
    #: end of the user's speech to the onset of the product's speech as the user hears it
    #: (listener timeline, plus a ``to_user`` line's constant delay)
    response_latency_ms: float | None = None
    first_audio_latency_ms: float | None = None
    response_duration_ms: float | None = None
    output_audio_seconds: float
    user_speech_end_ms: float | None = None
    speech_start_ms: float | None = None
    playback_start_ms: float | None = None
    playback_end_ms: float | None = None
    playback_stall_ms: float | None = None
    #: silences of 300 ms or more between the reply's first and last audible sample
    dead_air_ms: float | None = None
    #: the reply's last audible sample to the end of its audio (not a wait: the user has
    #: heard the whole reply)
    trailing_silence_ms: float | None = None
    interrupted: bool
    interruption_stop_latency_ms: float | None = None
    audio_after_interrupt_ms: float | None = None
    #: the user's barge-in speech onset minus this response's speech onset as heard
    barge_in_after_speech_ms: float | None = None
    transcript: str = ""
    #: where ``transcript`` came from: ``wire`` or ``asr:<engine>`` (as in transcript.json)
    transcript_source: str | None = None
    tool_calls: int = 0
    input_speech_to_noise_db: float | None = None
    input: SignalStats | None = None
    output: SignalStats | None = None
    # advisory speech metrics (``speech_metrics: true``): flattened headline numbers, and the
    # full per-role detail under ``speech``
    input_wer: float | None = None
    input_stoi: float | None = None
    input_pesq_wb: float | None = None
    output_completeness: float | None = None
    output_completeness_flagged: bool | None = None
    output_dnsmos_ovrl: float | None = None
    # the product's voice in the reply as heard (advisory, ``speech_metrics: true``; definitions
    # in voicelab/metrics/_product_voice.py and docs/artifacts.md); detail under
    # ``speech["product_voice"]``
    output_speech_rate_onsets_per_s: float | None = None
    output_pitch_median_hz: float | None = None
    output_pitch_range_semitones: float | None = None
    output_loudness_dbfs: float | None = None
    output_pause_count: int | None = None
    output_pause_total_ms: float | None = None
    output_longest_pause_ms: float | None = None
    overlap_with_user_ms: float | None = None
    #: double talk: the product's speech in this response heard while the user's speech (any
    #: user turn, backchannels included) was on the line, in ms
    double_talk_ms: float | None = None
    speech: dict[str, object] | None = None
    # a telephony line (an environment's ``channel:``): this turn's packets on each direction
    # (``to_product``: the user's turn; ``to_user``: the product's reply as heard); the loss
    # rate counts packets dropped or too late to play. Full counts under ``channel``.
    to_product_packets_sent: int | None = None
    to_product_packets_dropped: int | None = None
    to_product_loss_rate: float | None = None
    to_user_packets_sent: int | None = None
    to_user_packets_dropped: int | None = None
    to_user_loss_rate: float | None = None
    #: the ``to_user`` line's constant path delay, included in ``response_latency_ms``
    to_user_delay_ms: float | None = None
    channel: dict[str, object] | None = None
    #: a hesitation turn (script pauses, docs/endpointing.md): its pauses' lengths; whether the
    #: product's speech, as heard, began before the user's last piece of speech ended; the
    #: pause it began in or after (0-based; None: before the first pause); how long after
    #: that pause began. None on every other turn. A hesitation turn the product answered
    #: only by cutting in gets a row of its own (``status: no_response``).
    user_pauses_ms: list[float] | None = None
    product_cut_in: bool | None = None
    cut_in_pause_index: int | None = None
    cut_in_after_pause_ms: float | None = None
    #: a cut-into turn: the latency of the product's answer after the user finished (its first
    #: speech after the user's end that is not the cut-in reply running on; None: no such
    #: speech). Its ``response_latency_ms`` and ``first_audio_latency_ms`` are None
    answer_after_cut_in_ms: float | None = None
    #: each pause as an 8 kHz phone line carries it: the silence around it in the turn's audio
    #: as sent, kept to the telephone band (300-3400 Hz); None: noise fills it
    user_pauses_phone_band_ms: list[float | None] | None = None
    #: a response the user answered with keys (its prompt, docs/ivr.md): the turn that pressed
    #: them, the keys, whether they were pressed into its speech (a key barge-in); the first
    #: key to the onset of the product's next speech as heard, and (a key barge-in) to the
    #: end of this response's last audible sample. None on every other turn.
    key_turn_id: str | None = None
    key_digits: str | None = None
    key_barge_in: bool | None = None
    key_to_speech_ms: float | None = None
    key_stop_latency_ms: float | None = None

    @model_serializer(mode="wrap")
    def _hesitation_only_when_measured(self, handler: SerializerFunctionWrapHandler
                                       ) -> dict[str, object]:
        """The hesitation and key fields are written only for a turn they describe, the figure
        bounds only when judged: every other turn's document stays as it was (a bundle
        re-scores to the same bytes)."""
        return without_absent(handler(self), (*HESITATION_FIELDS, *KEY_FIELDS,
                                               "figure_error_bounds_ms", "degraded_figures"))

    def figure(self, name: str) -> float | None:
        """The number in field ``name`` (a gate or a summary names it as data, from the run
        config or the timing metric list); None when the field is unset or holds no number."""
        value = self.model_dump(include={name}).get(name)
        return float(value) if isinstance(value, int | float) else None

    #: how late this response's timing stamps (its audio chunks' and response.done's arrivals)
    #: may be, from the evaluator's loop lag around them, in ms (0: no late tick near them);
    #: ``None``: not judged per turn (docs/artifacts.md, measurement_quality)
    stamp_error_bound_ms: float | None = None
    #: the bound exceeds the ``measurement`` tolerances: this turn's timing figures cannot be
    #: trusted (a timing verdict resting on it is decided only when the error cannot change it)
    timing_degraded: bool | None = None
    #: how late the first audio packet's own stamp may be (ms; ``first_audio_latency_ms``
    #: rests on that one stamp), and whether that exceeds ``max_first_audio_error_ms``:
    #: ``first_audio_latency_ms`` is then not trusted (gates leave it out)
    first_audio_error_bound_ms: float | None = None
    first_audio_degraded: bool | None = None
    #: how far each timing figure may be off (ms, by its column: ``response_latency_ms``,
    #: ``speech_start_ms``, ``response_duration_ms``, ``playback_stall_ms``, ``dead_air_ms``,
    #: and the figures a barge-in cuts), from the range it can take over every arrival inside
    #: its stamps' bounds; ``timing_degraded`` is set when one exceeds ``max_loop_lag_max_ms``.
    #: Absent: judged per stamp (a recording before per-figure bounds) or not per turn
    figure_error_bounds_ms: dict[str, float] | None = None
    #: the figures of ``figure_error_bounds_ms`` whose bound exceeds ``max_loop_lag_max_ms``:
    #: only these are left out of gates. Absent when there are none (``timing_degraded`` is
    #: then false) and where ``figure_error_bounds_ms`` is
    degraded_figures: list[str] | None = None


class MetricSummary(ArtifactModel):
    count: int
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


class LoopLag(ArtifactModel):
    """How late the evaluator's event loop ran while the conversation went: a ticker asleep for
    ``interval_ms`` at a time, and the lateness of each wake-up (actual minus intended, ms, on
    the recording's monotonic clock). ``None`` statistics: no tick completed."""

    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    ticks: int = 0
    interval_ms: float


class MeasurementTolerances(ArtifactModel):
    """The loop-lag bounds a trial's timings were judged against (run config ``measurement``)."""

    max_loop_lag_p99_ms: float
    max_loop_lag_max_ms: float
    #: absent in bundles judged before the first audio's own stamp was
    max_first_audio_error_ms: float | None = None


class MeasurementQuality(ArtifactModel):
    """Whether the trial's timing metrics can be trusted. ``degraded``: the loop lagged beyond a
    tolerance around some turn's arrivals (``degraded_turns``), so their stamps (and every
    latency, stall and dead-air figure built on them) may be late by up to the lag; the metrics
    are still written, and a timing verdict resting on those turns is ``inconclusive`` when
    that error could change its answer (its interval straddles the limit), decided otherwise.
    ``loop_lag_ms`` is ``None`` when the lag was not measured (a bundle written before it
    was)."""

    loop_lag_ms: LoopLag | None = None
    tolerances: MeasurementTolerances
    degraded: bool = False
    reasons: list[str] = Field(default_factory=list)
    #: ``turn``: judged per turn from the lag around each turn's timing stamps (the turns'
    #: ``stamp_error_bound_ms``); ``trial``: on the whole conversation's ``loop_lag_ms`` (a
    #: bundle recorded before the late ticks were kept)
    scope: Literal["turn", "trial"] = "trial"
    #: the turns whose timings cannot be trusted (``scope: turn``)
    degraded_turns: list[str] = Field(default_factory=list)


class VoiceMetrics(Versioned):
    audio_format: dict[str, object]
    #: the simulated listener the timing metrics assume (jitter buffer depth, reply hangover)
    listener: dict[str, object] = Field(default_factory=dict)
    #: the telephony line, per direction: its parameters and whole-call packet counts (empty:
    #: a clean line both ways)
    channel: dict[str, object] = Field(default_factory=dict)
    input: SignalStats
    output: SignalStats
    turns: list[TurnMetrics] = Field(default_factory=list)
    summary: dict[str, MetricSummary] = Field(default_factory=dict)
    #: selectivity probes and self-interruptions (docs/probes.md); the echo path, when the
    #: environment has one
    probes: list[ProbeOutcome] = Field(default_factory=list)
    self_interruptions: list[SelfInterruption] = Field(default_factory=list)
    echo: dict[str, object] | None = None
    #: the evaluator's own event-loop lag during the call, and whether it degraded the timings
    measurement_quality: MeasurementQuality | None = None
    #: who talked how much (absent in bundles scored before it was measured)
    talk: TalkMetrics | None = None
    #: the scenario's key entities, heard and said (absent: no entity verdict configured)
    entities: EntityMetrics | None = None
    #: how long the call took to set up on its wire, ms (a SIP call: INVITE to 200 OK;
    #: absent on wires that do not say)
    call_setup_ms: float | None = None

    @model_serializer(mode="wrap")
    def _without_absent_entities(self, handler: SerializerFunctionWrapHandler
                                 ) -> dict[str, object]:
        # a scenario without entities (a wire without a call setup) writes the document it
        # always wrote
        return without_absent(handler(self), ("entities", "call_setup_ms"))
