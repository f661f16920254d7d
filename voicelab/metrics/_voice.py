"""voice-metrics.json: per-response timing and signal metrics and their summary.

Definitions (all pure functions of the recording; docs/artifacts.md has the full table):

* ``response_latency_ms``: the end of the user's speech, as sent on the line, to the onset of
  the product's *speech* as the listener hears it (voice activity on the product channel, so
  silence frames before the speech do not count as an answer), plus a ``to_user`` telephony
  line's constant path delay (``to_user_delay_ms``): the user hears everything that much
  later. A product that stalls right after its first sound (its first packet, then no packets
  while the listener's playback runs dry, then the rest of the speech: too short a sound
  before the stall for voice activity to start on) is heard beginning at that first sound,
  and the onset is its first audible sample; the stall is counted where stalls are
  (``playback_stall_ms``, ``dead_air_ms``), not hidden in the latency (:mod:`._stall_onset`
  says exactly when). An adapter's own constant conversion delay (a resampling filter: ``session.connected``
  ``conversion_delay_ms``) is not the product's: toward the user it is taken out of the
  placement, toward the product out of this figure and the stop latency. Null for an
  opening.
* ``first_audio_latency_ms``: the reference (commit sent; the user's speech end on a live line;
  the init for an opening) to the first product audio *packet* received.
* ``response_duration_ms``: the same reference to the product's ``response.done``.
* ``output_audio_seconds``: product audio received for the response.
* ``playback_stall_ms``: jitter-buffer underruns: playback starts ``jitter_buffer_ms`` after the
  first packet; a packet arriving after everything before it has played stalls the listener
  for the difference (uneven arrival the buffer absorbs is no stall).
* ``dead_air_ms``: silent stretches of at least 300 ms (10 ms frames no louder than the
  silence threshold) the user waits through *inside* the reply: between its first and its
  last audible sample (stalls included). The silence before the reply's first sound is its
  latency; the silence after its last sound is ``trailing_silence_ms``, not a wait.
* ``trailing_silence_ms``: from the reply's last audible sample to the end of its audio.
* ``interrupted``: the simulated user barged in on this response.
* ``interruption_stop_latency_ms``: the onset of the user's barge-in speech to the end of the
  product's last *audible* sample of the response (magnitude above the silence threshold, 256,
  -42 dBFS: what the user can hear, fade-outs included; no voice-activity hangover or edge
  refinement); 0 when it had already stopped.
* ``audio_after_interrupt_ms``: how much audible product audio of the response played after
  that onset (stretches of samples above the threshold, gaps under 10 ms bridged).
* ``barge_in_after_speech_ms``: how far into the response's speech (its onset as heard) the
  user's barge-in speech began: the moment ``interrupt_after_seconds`` configures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import JsonValue

from .._steps import Steps, run_steps
from ..artifacts import MetricSummary, TurnMetrics, VoiceMetrics
from ..audio import (
    CANONICAL_FORMAT,
    CANONICAL_SAMPLE_RATE_HZ,
    PcmAudio,
    SignalAnalysis,
    analyze_signals,
    audible_edges,
    detect_speech,
)
from ..recording import (
    PRODUCT,
    USER,
    ChannelPackets,
    Connected,
    EnvironmentMixed,
    Event,
    EventType,
    ExpectsResponse,
    HeardResponse,
    ProductTurn,
    ProductTurns,
    Recording,
    TrialStarted,
    UserTurnStarted,
    conversion_delay_ns,
    samples_to_ns,
)
from ._cut_in import cut_in_fields, pauses_on_timeline, pauses_through_phone_band
from ._keys import KeyPress, key_presses
from ._placement import STEP_EVENTS, Placement
from ._selectivity import echo_of, probe_outcomes, self_interruptions
from ._stall_onset import onset_across_stalls, reply_stalls
from ._talk import talk_metrics
from ._turn_metrics import ResponseTurn, TurnMetric, turn_values
from ._turn_metrics import ns_to_ms as _ms

TIMING_METRICS = ("response_latency_ms", "first_audio_latency_ms", "response_duration_ms",
                  "playback_stall_ms", "dead_air_ms", "interruption_stop_latency_ms",
                  "audio_after_interrupt_ms")
PERCENTILES = (50, 90, 95, 99)
_RATE = CANONICAL_SAMPLE_RATE_HZ
_FRAME = _RATE // 100  # the voice activity detector's 10 ms frame
#: Pauses at least this long split the product's speech into segments (shorter ones, between
#: words, do not): what counts as speech heard after a barge-in.
SEGMENT_GAP_MS = 100.0


def percentile(ordered: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile of sorted values, interpolated exactly as ``numpy.percentile``
    (method "linear") does, without its per-call overhead."""
    count = len(ordered)
    index = (count - 1) * (q / 100)
    if index >= count - 1:
        return ordered[-1]
    lower = math.floor(index)
    weight = index - lower
    a, b = ordered[lower], ordered[lower + 1]
    if weight >= 0.5:
        return b - (b - a) * (1 - weight)
    return a + (b - a) * weight


def summarize(values: Sequence[float | None]) -> MetricSummary:
    """count, mean, p50, p90, p95, p99 and max of the non-missing values."""
    data = sorted(float(v) for v in values if v is not None and not math.isnan(v))
    if not data:
        return MetricSummary(count=0)
    return MetricSummary(count=len(data), mean=round(math.fsum(data) / len(data), 3),
                         **{f"p{p}": round(percentile(data, p), 3) for p in PERCENTILES},
                         max=round(data[-1], 3))


@dataclass
class _UserTurn:
    speech_start: int | None = None  # samples into the turn's audio
    speech_end: int | None = None
    line_speech_start_ns: int | None = None  # listener ns, from a live line's exact events
    line_speech_end_ns: int | None = None
    pauses: list[list[int]] | None = None  # a hesitation turn's, samples into its audio


_REFERENCES = {EventType.USER_TURN_COMMITTED: "commit", EventType.CONNECTED: "init",
               EventType.USER_SPEECH_ENDED: "speech_end"}


@dataclass
class _Gathered:
    """What the recording says about each response and each user turn (gathered in one
    pass)."""

    responses: ProductTurns = field(default_factory=ProductTurns)
    #: what each response is timed from: (offset, ``commit`` / ``init`` / ``speech_end``)
    references: dict[str, tuple[int, str]] = field(default_factory=dict)
    user_chunks: dict[str, list[Event]] = field(default_factory=dict)
    users: dict[str, _UserTurn] = field(default_factory=dict)
    snr: dict[str, float | None] = field(default_factory=dict)
    listener: dict[str, Any] = field(default_factory=dict)


def _gather(recording: Recording) -> Steps[_Gathered]:
    found = _Gathered()
    references, users = found.references, found.users
    for position, event in enumerate(recording.events):
        if position % STEP_EVENTS == STEP_EVENTS - 1:
            yield
        kind, turn = event.type, event.turn_id
        if kind in _REFERENCES:
            expects = ExpectsResponse.of(event).expects_response if kind is not \
                EventType.CONNECTED else Connected.of(event).expects_response
            if expects:
                references.setdefault(expects, (event.offset_ns, _REFERENCES[kind]))
        elif kind is EventType.TRIAL_STARTED:
            found.listener = dict(TrialStarted.of(event).listener or {})
        found.responses.follow(event)
        if not turn:
            continue
        if kind is EventType.USER_AUDIO:
            found.user_chunks.setdefault(turn, []).append(event)
        elif kind is EventType.USER_TURN_STARTED:
            started = UserTurnStarted.of(event)
            users[turn] = _UserTurn(started.speech_start_sample, started.speech_end_sample,
                                    pauses=started.pauses)
        elif kind is EventType.USER_SPEECH_STARTED and turn in users:
            users[turn].line_speech_start_ns = event.listener_ns
        elif kind is EventType.USER_SPEECH_ENDED and turn in users:
            users[turn].line_speech_end_ns = event.listener_ns
        elif kind is EventType.ENVIRONMENT_MIXED:
            found.snr[turn] = EnvironmentMixed.of(event).speech_to_noise_db
    return found


def _joined(stream: np.ndarray, events: list[Event]) -> PcmAudio:
    if not events:
        return PcmAudio(np.zeros(0, dtype=np.int16))
    return PcmAudio(np.concatenate([stream[e.audio_start:e.audio_end] for e in events]))


def speech_segments_ns(channel: PcmAudio) -> list[tuple[int, int]]:
    """Speech segments of a channel as (start, end) ns: voice activity finds them in 10 ms
    frames; each edge then moves to what a listener hears, to the sample: the first (last)
    sample above the silence threshold, following the sound out from the detected frame across
    gaps under 10 ms (a quiet attack, a fade-out), never into the neighbouring segment."""
    samples = channel.samples
    found = [(b.start_sample, b.end_sample)
             for b in detect_speech(channel, hangover_ms=SEGMENT_GAP_MS)]
    segments: list[tuple[int, int]] = []
    for index, (start, end) in enumerate(found):
        low = segments[-1][1] if segments else 0
        high = found[index + 1][0] if index + 1 < len(found) else samples.shape[0]
        start, end = audible_edges(samples, start, end, low=low, high=high)
        segments.append((start, max(start, end)))
    return [(samples_to_ns(start), samples_to_ns(end)) for start, end in segments]


def _user_speech_ns(turn: str, users: dict[str, _UserTurn], placement: Placement
                    ) -> tuple[int | None, int | None]:
    """Where a user turn's speech starts and ends on the listener timeline."""
    user = users.get(turn)
    if user is None:
        return None, None
    start = end = None
    placed = placement.user_turn_start_ns.get(turn)
    if placed is not None and user.speech_start is not None:
        start = placed + samples_to_ns(int(user.speech_start))
    if placed is not None and user.speech_end is not None:
        end = placed + samples_to_ns(int(user.speech_end))
    return (user.line_speech_start_ns if user.line_speech_start_ns is not None else start,
            user.line_speech_end_ns if user.line_speech_end_ns is not None else end)


def compute_voice_metrics(recording: Recording, placement: Placement,
                          turn_metrics: Sequence[TurnMetric] = ()) -> VoiceMetrics:
    """The voice-metrics.json document of one trial; ``turn_metrics``: the run file's own
    per-response metrics (their columns follow the document's own)."""
    return run_steps(compute_voice_metrics_steps(recording, placement, turn_metrics))


def compute_voice_metrics_steps(recording: Recording, placement: Placement,
                                turn_metrics: Sequence[TurnMetric] = ()
                                ) -> Steps[VoiceMetrics]:
    """:func:`compute_voice_metrics` in steps (see :mod:`voicelab._steps`)."""
    gathered = yield from _gather(recording)
    responses = gathered.responses.by_turn
    user_stream = recording.streams[USER].samples()
    analyses = yield from _analyze_signals(recording, gathered, user_stream)
    # the product's speech as the listener hears it (voice activity on the placed channel)
    speech = speech_segments_ns(placement.product)
    yield

    lines = {str(packets.line): packets for packets in
             (ChannelPackets.of(e) for e in recording.of_type(EventType.CHANNEL_PACKETS))}
    measured = _measured_against(recording, gathered, placement, speech, lines, analyses,
                                 user_stream)
    turns: list[TurnMetrics] = []
    for index, turn_id in enumerate(responses):
        turns.append((yield from _response_metrics(measured, index, turn_id,
                                                   responses[turn_id], turn_metrics)))
    # a hesitation turn the product never answered after its end (it cut in, or said nothing)
    for turn_id in sorted(set(gathered.users) - set(responses)):
        cut_in = measured.cut_in_of(turn_id)
        if cut_in:
            turns.append(TurnMetrics(turn_id=turn_id, index=len(turns), status="no_response",
                                     output_audio_seconds=0.0, interrupted=False,
                                     user_speech_end_ms=_ms(measured.user_speech_of(turn_id)[1]),
                                     **cut_in))
    yield
    user_channel_speech = speech_segments_ns(placement.user)  # who talked how much
    yield

    hangover_ms = measured.hangover_ms
    return VoiceMetrics(
        audio_format=CANONICAL_FORMAT.to_dict(), input=analyses.all_input,
        output=analyses.all_output, turns=turns, listener=gathered.listener,
        channel={name: {k: v for k, v in line.recorded().items() if k not in ("line", "turns")}
                 for name, line in lines.items()},
        summary={name: summarize([t.figure(name) for t in turns]) for name in TIMING_METRICS},
        probes=probe_outcomes(recording, speech, hangover_ms=hangover_ms),
        self_interruptions=self_interruptions(recording, speech, measured.user_speech,
                                              hangover_ms=hangover_ms),
        echo=echo_of(recording),
        talk=talk_metrics(speech, user_channel_speech, measured.user_speech),
        call_setup_ms=_call_setup_ms(recording))


def _call_setup_ms(recording: Recording) -> float | None:
    """The call's setup time as the adapter reported it at connect (``session.connected``)."""
    connected = next(recording.of_type(EventType.CONNECTED), None)
    value = Connected.of(connected).call_setup_ms if connected is not None else None
    return float(value) if value is not None else None


@dataclass(frozen=True)
class _Analyses:
    """The signal analysis of each turn's audio, and of each whole channel."""

    inputs: dict[str, SignalAnalysis]
    all_input: SignalAnalysis
    outputs: dict[str, SignalAnalysis]
    all_output: SignalAnalysis


def _analyze_signals(recording: Recording, gathered: _Gathered, user_stream: np.ndarray
                     ) -> Steps[_Analyses]:
    """Each turn's signal analysis, and each whole channel's (the turns one after another)."""
    responses, user_chunks = gathered.responses.by_turn, gathered.user_chunks
    product_stream = recording.streams[PRODUCT].samples()
    user_ids = sorted(user_chunks)
    each, all_input = analyze_signals([_joined(user_stream, user_chunks[k]) for k in user_ids])
    inputs = dict(zip(user_ids, each, strict=True))
    yield
    with_audio = [k for k in responses if responses[k].audio]
    each, all_output = analyze_signals([_joined(product_stream, responses[k].audio)
                                        for k in with_audio])
    outputs = dict(zip(with_audio, each, strict=True))
    yield
    return _Analyses(inputs, all_input, outputs, all_output)


@dataclass(frozen=True)
class _MeasuredAgainst:
    """What each turn's metrics are measured against: the placed channels, the product's
    speech and the user's on the listener timeline, the delays of the line and the adapter,
    and the turn-by-turn records beside them."""

    gathered: _Gathered
    placement: Placement
    analyses: _Analyses
    user_stream: np.ndarray
    #: the product's speech segments on the listener timeline
    speech: list[tuple[int, int]]
    #: the user's speech in each turn, in order
    user_speech: list[tuple[int, int]]
    #: how late the listener hears the product (the line toward the user)
    heard_delay_ns: int
    #: the adapter's own conversion toward the product: the product heard the user that late
    converting_ns: int
    hangover_ms: float
    depth_ns: int
    line_turns: dict[str, dict[Any, dict[str, JsonValue]]]
    to_user_delay_ms: float | None
    #: the key presses by the response (prompt) they answer
    keys: dict[str, KeyPress] = field(default_factory=dict)

    def user_speech_of(self, turn_id: str) -> tuple[int | None, int | None]:
        return _user_speech_ns(turn_id, self.gathered.users, self.placement)

    def cut_in_of(self, turn_id: str) -> dict[str, Any]:
        user_chunks = self.gathered.user_chunks
        sent = _joined(self.user_stream, user_chunks[turn_id]) if turn_id in user_chunks \
            else None
        return _cut_in(turn_id, self.gathered.users, self.placement, self.speech,
                       self.heard_delay_ns, self.converting_ns,
                       hangover_ns=int(self.hangover_ms * 1_000_000), sent=sent)


def _measured_against(recording: Recording, gathered: _Gathered, placement: Placement,
                      speech: list[tuple[int, int]], lines: dict[str, ChannelPackets],
                      analyses: _Analyses, user_stream: np.ndarray) -> _MeasuredAgainst:
    listener, users = gathered.listener, gathered.users
    to_user = lines.get("to_user")
    heard_delay_ns = int(float(to_user.base_delay_ms or 0.0) * 1_000_000) if to_user else 0
    connected = next(recording.of_type(EventType.CONNECTED), None)
    converting_ns = conversion_delay_ns(Connected.of(connected), "to_product") \
        if connected else 0
    user_speech = sorted((start, end) for start, end in
                         (_user_speech_ns(turn, users, placement) for turn in users)
                         if start is not None and end is not None)
    return _MeasuredAgainst(
        gathered=gathered, placement=placement, analyses=analyses,
        user_stream=user_stream, speech=speech, user_speech=user_speech,
        heard_delay_ns=heard_delay_ns, converting_ns=converting_ns,
        hangover_ms=float(listener.get("reply_end_hangover_ms", 700.0)),
        depth_ns=int(float(listener.get("jitter_buffer_ms", 0.0)) * 1_000_000),
        line_turns={name: {t.get("turn_id"): t for t in line.turns or []}
                    for name, line in lines.items()},
        to_user_delay_ms=_ms(heard_delay_ns) if to_user else None,
        keys={key.prompt_turn_id: key for key in key_presses(
            recording.of_type(EventType.USER_TURN_STARTED, EventType.USER_DTMF),
            placement.responses)})


def _response_metrics(measured: _MeasuredAgainst, index: int, turn_id: str,
                      found: ProductTurn, extra: Sequence[TurnMetric] = ()
                      ) -> Steps[TurnMetrics]:
    """One response's row: what it is measured against gathered once (:class:`ResponseTurn`),
    then every registered per-response metric (:mod:`._turn_metrics`), the line's packets and
    a hesitation turn's cut-in fields."""
    placement = measured.placement
    playback = placement.responses.get(turn_id)
    if playback is not None and playback.start_ns is not None and playback.end_ns is not None:
        yield  # the audible extent of the reply is measured next
    _, user_speech_end = measured.user_speech_of(turn_id)
    span = _span(playback)
    speech_onset = _heard_onset(measured, playback, span, user_speech_end)
    barge_onset = measured.user_speech_of(found.barged_in_by)[0] \
        if found.barged_in_by is not None else None
    cut_in = measured.cut_in_of(turn_id)
    analyses = measured.analyses
    turn = ResponseTurn(
        turn_id=turn_id, index=index, found=found, playback=playback,
        reference=measured.gathered.references.get(turn_id),
        product_samples=placement.product.samples, speech=measured.speech,
        user_speech=measured.user_speech, user_speech_end_ns=user_speech_end, span=span,
        speech_onset_ns=speech_onset, barge_onset_ns=barge_onset,
        heard_delay_ns=measured.heard_delay_ns, converting_ns=measured.converting_ns,
        depth_ns=measured.depth_ns, cut_in=bool(cut_in.get("product_cut_in")),
        speech_to_noise_db=measured.gathered.snr.get(turn_id),
        input=analyses.inputs.get(turn_id), output=analyses.outputs.get(turn_id),
        to_user_delay_ms=measured.to_user_delay_ms, key=measured.keys.get(turn_id),
        key_reply_span=_key_reply_span(measured, turn_id))
    return TurnMetrics(turn_id=turn_id, index=index, **turn_values(turn, extra),
                       **_line_fields(measured.line_turns, turn_id), **cut_in)


def _heard_onset(measured: _MeasuredAgainst, playback: HeardResponse | None,
                 span: tuple[int, int] | None, user_speech_end: int | None) -> int | None:
    """Where the reply's speech begins as heard: the first speech segment inside its span that
    starts after the user's speech, moved back across a stall of the product right after its
    first sound (:mod:`._stall_onset`: the user heard that sound before the stall)."""
    if not span:
        return None
    found = next((index for index, (start, end) in enumerate(measured.speech)
                  if end > span[0] and start < span[1]
                  and (user_speech_end is None or start >= user_speech_end)), None)
    if found is None:
        return None
    onset = measured.speech[found][0]
    stalls = reply_stalls(playback)
    if not stalls:
        return onset
    before = max(measured.speech[found - 1][1] if found else 0, user_speech_end or 0)
    return onset_across_stalls(measured.placement.product.samples, onset, stalls,
                               after_ns=before, from_ns=span[0])


def _cut_in(turn_id: str, users: dict[str, _UserTurn], placement: Placement,
            speech: list[tuple[int, int]], heard_delay_ns: int, converting_ns: int, *,
            hangover_ns: int, sent: PcmAudio | None) -> dict[str, Any]:
    """A hesitation turn's cut-in metrics (:mod:`._cut_in`); {} for any other turn.
    ``sent``: the turn's audio as sent (its pauses through the telephone band)."""
    user = users.get(turn_id)
    if user is None or not user.pauses:
        return {}
    start, end = _user_speech_ns(turn_id, users, placement)
    pauses = pauses_on_timeline(user.pauses, speech_start_sample=user.speech_start,
                                line_speech_start_ns=user.line_speech_start_ns,
                                placed_start_ns=placement.user_turn_start_ns.get(turn_id))
    fields = cut_in_fields(pauses, speech_start_ns=start, speech_end_ns=end,
                           product_speech_ns=speech, heard_delay_ns=heard_delay_ns,
                           converting_ns=converting_ns, reply_end_hangover_ns=hangover_ns)
    if fields and sent is not None:
        fields["user_pauses_phone_band_ms"] = pauses_through_phone_band(sent, user.pauses)
    return fields


def _line_fields(line_turns: dict[str, dict[object, dict[str, JsonValue]]], turn_id: str
                 ) -> dict[str, Any]:
    """A turn's packets on each telephony line (none: that direction is a clean line)."""
    fields: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    for name, by_turn in line_turns.items():
        stats = by_turn.get(turn_id)
        sent = stats["packets_sent"] if stats else 0
        fields[f"{name}_packets_sent"] = sent
        fields[f"{name}_packets_dropped"] = stats["packets_dropped"] if stats else 0
        fields[f"{name}_loss_rate"] = stats["effective_loss_rate"] if stats else None
        detail[name] = {k: v for k, v in stats.items() if k != "turn_id"} if stats else None
    if detail:
        fields["channel"] = detail
    return fields


def _key_reply_span(measured: _MeasuredAgainst, turn_id: str) -> tuple[int, int] | None:
    """Where the reply to the keys that answered response ``turn_id`` sounds."""
    key = measured.keys.get(turn_id)
    return _span(measured.placement.responses.get(key.turn_id)) if key else None


def _span(playback: HeardResponse | None) -> tuple[int, int] | None:
    """Where a response sounds on the listener timeline: from its first chunk to the end of the
    last sound of it heard (a flush, the user's or the product's own ``clear``, cuts what was
    buffered; audio sent after a cancel is still heard)."""
    if playback is None or not playback.chunks:
        return None
    ends = [c.end for c in playback.chunks if c.heard]
    return (samples_to_ns(playback.chunks[0].start),
            samples_to_ns(max(ends)) if ends else samples_to_ns(playback.chunks[0].start))
