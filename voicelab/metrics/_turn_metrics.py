"""Per-response metrics as registered functions: each column of voice-metrics.json's
``turns`` that one response's figures make is a function of one :class:`ResponseTurn`,
decorated with :func:`turn_metric` (its column name, unit and the evidence it reads).

:mod:`._voice` gathers what every column is measured against once per response (the placed
channels, the product's speech as heard, the user's speech, the line's and the adapter's
delays) into a :class:`ResponseTurn`, then fills the row by iterating
:data:`BUILTIN_TURN_METRICS`. The row's column order is :class:`TurnMetrics`' field order (the
document's), whatever the order here. Two families stay computed as groups, because their
columns depend on the trial: a telephony line's packet counts (one set per line) and a
hesitation turn's cut-in fields (:mod:`._cut_in`, present only on such turns).

Definitions of every column: docs/artifacts.md and :mod:`._voice`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np
from pydantic import JsonValue

from .._registry import import_dotted
from ..artifacts import TurnMetrics
from ..audio import CANONICAL_SAMPLE_RATE_HZ, SignalAnalysis
from ..config import LoadedRun
from ..errors import ConfigError
from ..recording import Event, HeardResponse, ProductTurn, samples_to_ns
from ._keys import KeyPress, key_stop_ns, key_to_speech_ns
from ._placement import audible_extent_ns, audible_ns, silent_runs_ns
from ._selectivity import overlap_ns

logger = logging.getLogger(__name__)

#: What a per-response metric can declare it reads.
TurnNeed = Literal["response", "reference", "playback", "product_speech", "user_speech",
                   "barge_in", "signal", "line"]
TURN_NEEDS: tuple[TurnNeed, ...] = get_args(TurnNeed)
#: A value of one column of one response.
TurnValue = float | int | bool | str | SignalAnalysis | None


def ns_to_ms(ns: int | None) -> float | None:
    """Nanoseconds as the document's milliseconds (to the microsecond)."""
    return None if ns is None else round(ns / 1e6, 3)


@dataclass(frozen=True)
class ResponseTurn:
    """One product response and what its metrics are measured against (ns on the listener
    timeline unless named otherwise)."""

    turn_id: str
    index: int
    found: ProductTurn
    #: how the response sounded to the listener (``None``: nothing of it was placed)
    playback: HeardResponse | None
    #: what the response is timed from: (offset, ``commit`` / ``init`` / ``speech_end``)
    reference: tuple[int, str] | None
    #: the placed product channel's samples
    product_samples: np.ndarray
    #: the product's speech segments as heard, and the user's speech in each turn
    speech: Sequence[tuple[int, int]]
    user_speech: Sequence[tuple[int, int]]
    user_speech_end_ns: int | None
    #: where the response sounds (its first chunk to the end of its last sound heard)
    span: tuple[int, int] | None
    #: the onset of the response's speech as heard (after the user's speech ended)
    speech_onset_ns: int | None
    #: the onset of the speech of the user turn that barged in (``None``: no barge-in)
    barge_onset_ns: int | None
    #: how late the listener hears the product, and the adapter's own conversion delay
    heard_delay_ns: int
    converting_ns: int
    #: the listener's jitter buffer
    depth_ns: int
    #: the product's speech began before the user's ended (a hesitation turn cut into)
    cut_in: bool
    speech_to_noise_db: float | None = None
    input: SignalAnalysis | None = None
    output: SignalAnalysis | None = None
    to_user_delay_ms: float | None = None
    #: the keys the user answered this response with, and where the reply to them sounds
    key: KeyPress | None = None
    key_reply_span: tuple[int, int] | None = None

    @cached_property
    def audible(self) -> tuple[int, int] | None:
        """The reply's first and last audible sample as heard (``None``: none, or unplaced)."""
        if self.playback is None or self.playback.start_ns is None \
                or self.playback.end_ns is None:
            return None
        return audible_extent_ns(self.product_samples, start_ns=self.playback.start_ns,
                                 end_ns=self.playback.end_ns)

    @property
    def placed(self) -> bool:
        return self.playback is not None and self.playback.start_ns is not None \
            and self.playback.end_ns is not None

    @property
    def barged_in(self) -> bool:
        """A barge-in the figures after it can be measured for."""
        return self.found.barged_in_by is not None and self.span is not None \
            and self.barge_onset_ns is not None


@dataclass(frozen=True)
class TurnMetric:
    """A registered per-response metric: its column, unit, what it reads and the function."""

    name: str
    unit: str
    needs: tuple[TurnNeed, ...]
    function: Callable[[ResponseTurn], TurnValue]

    def __call__(self, turn: ResponseTurn) -> TurnValue:
        return self.function(turn)

    def guarded(self, turn: ResponseTurn) -> float | int | bool | str | None:
        """A run file's own metric: its value, or ``None`` (and a warning in the run's log)
        when it raises or returns anything but a number, a flag, a text or ``None``."""
        try:
            value = self.function(turn)
            if value is not None and not isinstance(value, float | int | bool | str):
                raise TypeError(f"it returned a {type(value).__name__}")
        except Exception:  # noqa: BLE001 - a plug-in's fault is its column's gap, not the run's
            logger.warning("turn metric %s could not be computed for %s", self.name,
                           turn.turn_id, exc_info=True)
            return None
        return value


def turn_metric(name: str, *, unit: str, needs: Iterable[TurnNeed] = ()
                ) -> Callable[[Callable[[ResponseTurn], TurnValue]], TurnMetric]:
    """Register a function of :class:`ResponseTurn` as the column ``name`` (in ``unit``:
    ``ms``, ``s``, ``dB``, ``count``, ``bool``, ``label``, ``text``, ``analysis``)."""
    declared = tuple(needs)
    unknown = [need for need in declared if need not in TURN_NEEDS]
    if unknown:
        raise ValueError(f"turn metric {name!r}: unknown needs {unknown} (known: "
                         f"{', '.join(TURN_NEEDS)})")

    def register(function: Callable[[ResponseTurn], TurnValue]) -> TurnMetric:
        return TurnMetric(name=name, unit=unit, needs=declared, function=function)

    return register


@turn_metric("status", unit="label", needs=("response",))
def status(turn: ResponseTurn) -> str | None:
    """How the response ended (its first ``response.done``'s status), or ``incomplete``."""
    return turn.found.status if turn.found.done_ns is not None else "incomplete"


@turn_metric("reference", unit="label", needs=("reference",))
def reference(turn: ResponseTurn) -> str | None:
    return turn.reference[1] if turn.reference else None


@turn_metric("first_audio_latency_ms", unit="ms", needs=("reference", "response"))
def first_audio_latency_ms(turn: ResponseTurn) -> float | None:
    """The reference to the first product audio packet (none for a cut-in reply)."""
    first = turn.found.first_audio_ns
    if turn.cut_in or first is None or not turn.reference:
        return None
    return ns_to_ms(first - turn.reference[0])


@turn_metric("response_latency_ms", unit="ms", needs=("user_speech", "product_speech"))
def response_latency_ms(turn: ResponseTurn) -> float | None:
    """The end of the user's speech to the onset of the product's speech as heard (none for
    a cut-in reply: its answer's latency is ``answer_after_cut_in_ms``)."""
    if turn.cut_in or turn.speech_onset_ns is None or turn.user_speech_end_ns is None:
        return None
    return ns_to_ms(turn.speech_onset_ns + turn.heard_delay_ns - turn.user_speech_end_ns
                    - turn.converting_ns)


@turn_metric("response_duration_ms", unit="ms", needs=("reference", "response"))
def response_duration_ms(turn: ResponseTurn) -> float | None:
    done = turn.found.done_ns
    if done is None or not turn.reference:
        return None
    return ns_to_ms(done - turn.reference[0])


@turn_metric("output_audio_seconds", unit="s", needs=("response",))
def output_audio_seconds(turn: ResponseTurn) -> float:
    return round(turn.found.audio_samples / CANONICAL_SAMPLE_RATE_HZ, 6)


@turn_metric("user_speech_end_ms", unit="ms", needs=("user_speech",))
def user_speech_end_ms(turn: ResponseTurn) -> float | None:
    return ns_to_ms(turn.user_speech_end_ns)


@turn_metric("speech_start_ms", unit="ms", needs=("product_speech",))
def speech_start_ms(turn: ResponseTurn) -> float | None:
    return ns_to_ms(turn.speech_onset_ns)


@turn_metric("playback_start_ms", unit="ms", needs=("playback",))
def playback_start_ms(turn: ResponseTurn) -> float | None:
    return ns_to_ms(turn.playback.start_ns if turn.playback else None)


@turn_metric("playback_end_ms", unit="ms", needs=("playback",))
def playback_end_ms(turn: ResponseTurn) -> float | None:
    return ns_to_ms(turn.playback.end_ns if turn.playback else None)


def jitter_buffer_stall_ns(chunks: Sequence[Event], *, depth_ns: int) -> int:
    """Underruns of a listener's jitter buffer of ``depth_ns`` playing ``chunks`` (in arrival
    order): playback starts ``depth_ns`` after the first arrival; a chunk that arrives after
    everything before it has played stalls playback until it arrives."""
    if not chunks:
        return 0
    played_until = chunks[0].listener_ns + depth_ns
    stall = 0
    for index, chunk in enumerate(chunks):
        if index and chunk.listener_ns > played_until:
            stall += chunk.listener_ns - played_until
            played_until = chunk.listener_ns
        played_until += samples_to_ns(chunk.audio_samples)
    return stall


def _before_barge(playback: HeardResponse) -> list[Event]:
    """The response's chunks that arrived before a barge-in flushed the listener's buffer
    (stalls after it are the product stopping, not stalls)."""
    return [c.event for c in playback.chunks if not c.after_cancel
            and (playback.barge_in_ns is None or c.event.listener_ns < playback.barge_in_ns)]


@turn_metric("playback_stall_ms", unit="ms", needs=("playback",))
def playback_stall_ms(turn: ResponseTurn) -> float | None:
    """Jitter-buffer underruns before any barge-in."""
    if turn.playback is None or not turn.playback.chunks:
        return None
    return ns_to_ms(jitter_buffer_stall_ns(_before_barge(turn.playback),
                                           depth_ns=turn.depth_ns))


@turn_metric("dead_air_ms", unit="ms", needs=("playback",))
def dead_air_ms(turn: ResponseTurn) -> float | None:
    """Silences of 300 ms or more between the reply's first and last audible sample."""
    if not turn.placed:
        return None
    audible = turn.audible
    if not audible:
        return 0.0
    return ns_to_ms(silent_runs_ns(turn.product_samples, start_ns=audible[0],
                                   end_ns=audible[1]))


@turn_metric("trailing_silence_ms", unit="ms", needs=("playback",))
def trailing_silence_ms(turn: ResponseTurn) -> float | None:
    """The reply's last audible sample to the end of its audio."""
    audible = turn.audible if turn.placed else None
    if not audible or turn.playback is None or turn.playback.end_ns is None:
        return None
    return ns_to_ms(turn.playback.end_ns - audible[1])


@turn_metric("interrupted", unit="bool", needs=("barge_in",))
def interrupted(turn: ResponseTurn) -> bool:
    return turn.found.barged_in_by is not None


@turn_metric("interruption_stop_latency_ms", unit="ms", needs=("barge_in", "playback"))
def interruption_stop_latency_ms(turn: ResponseTurn) -> float | None:
    """The barge-in's speech onset to the end of the response's last audible sample."""
    if not turn.barged_in or turn.span is None or turn.barge_onset_ns is None:
        return None
    onset = turn.barge_onset_ns
    heard = audible_extent_ns(turn.product_samples, start_ns=max(onset, turn.span[0]),
                              end_ns=turn.span[1])
    return ns_to_ms(max(0, heard[1] - onset - turn.converting_ns)) if heard else 0.0


@turn_metric("audio_after_interrupt_ms", unit="ms", needs=("barge_in", "playback"))
def audio_after_interrupt_ms(turn: ResponseTurn) -> float | None:
    """How much audible product audio of the response played after the barge-in's onset."""
    if not turn.barged_in or turn.span is None or turn.barge_onset_ns is None:
        return None
    return ns_to_ms(audible_ns(turn.product_samples,
                               start_ns=max(turn.barge_onset_ns, turn.span[0]),
                               end_ns=turn.span[1]))


@turn_metric("barge_in_after_speech_ms", unit="ms", needs=("barge_in", "product_speech"))
def barge_in_after_speech_ms(turn: ResponseTurn) -> float | None:
    """How far into the response's speech (as heard) the barge-in's speech began."""
    if not turn.barged_in or turn.barge_onset_ns is None or turn.speech_onset_ns is None:
        return None
    return ns_to_ms(turn.barge_onset_ns - turn.speech_onset_ns - turn.heard_delay_ns)


@turn_metric("transcript", unit="text", needs=("response",))
def transcript(turn: ResponseTurn) -> str:
    return turn.found.transcript


@turn_metric("tool_calls", unit="count", needs=("response",))
def tool_calls(turn: ResponseTurn) -> int:
    return turn.found.tool_calls


@turn_metric("input_speech_to_noise_db", unit="dB", needs=("signal",))
def input_speech_to_noise_db(turn: ResponseTurn) -> float | None:
    return turn.speech_to_noise_db


@turn_metric("input", unit="analysis", needs=("signal",))
def input_analysis(turn: ResponseTurn) -> SignalAnalysis | None:
    return turn.input


@turn_metric("output", unit="analysis", needs=("signal",))
def output_analysis(turn: ResponseTurn) -> SignalAnalysis | None:
    return turn.output


@turn_metric("double_talk_ms", unit="ms", needs=("product_speech", "user_speech"))
def double_talk_ms(turn: ResponseTurn) -> float | None:
    """The response's speech heard while the user's speech was on the line."""
    span = turn.span
    if not span:
        return None
    return ns_to_ms(overlap_ns([(max(a, span[0]), min(b, span[1])) for a, b in turn.speech
                                if b > span[0] and a < span[1]], turn.user_speech))


@turn_metric("to_user_delay_ms", unit="ms", needs=("line",))
def to_user_delay_ms(turn: ResponseTurn) -> float | None:
    return turn.to_user_delay_ms


@turn_metric("key_turn_id", unit="label", needs=("user_speech",))
def key_turn_id(turn: ResponseTurn) -> str | None:
    return turn.key.turn_id if turn.key else None


@turn_metric("key_digits", unit="text", needs=("user_speech",))
def key_digits(turn: ResponseTurn) -> str | None:
    return turn.key.digits if turn.key else None


@turn_metric("key_barge_in", unit="bool", needs=("barge_in",))
def key_barge_in(turn: ResponseTurn) -> bool | None:
    return turn.key.barge_in if turn.key else None


@turn_metric("key_to_speech_ms", unit="ms", needs=("user_speech", "product_speech"))
def key_to_speech_ms(turn: ResponseTurn) -> float | None:
    """The first key to the onset of the product's next speech as heard (docs/ivr.md)."""
    if turn.key is None:
        return None
    return ns_to_ms(key_to_speech_ns(turn.key, turn.key_reply_span, turn.speech,
                                     heard_delay_ns=turn.heard_delay_ns))


@turn_metric("key_stop_latency_ms", unit="ms", needs=("barge_in", "playback"))
def key_stop_latency_ms(turn: ResponseTurn) -> float | None:
    """A key barge-in: the first key to the end of this response's last audible sample."""
    if turn.key is None:
        return None
    return ns_to_ms(key_stop_ns(turn.key, turn.span, turn.product_samples))


#: The built-in per-response metrics (their columns; the document orders them).
BUILTIN_TURN_METRICS: tuple[TurnMetric, ...] = (
    status, reference, first_audio_latency_ms, response_latency_ms, response_duration_ms,
    output_audio_seconds, user_speech_end_ms, speech_start_ms, playback_start_ms,
    playback_end_ms, playback_stall_ms, dead_air_ms, trailing_silence_ms, interrupted,
    interruption_stop_latency_ms, audio_after_interrupt_ms, barge_in_after_speech_ms,
    transcript, tool_calls, input_speech_to_noise_db, input_analysis, output_analysis,
    double_talk_ms, to_user_delay_ms, key_turn_id, key_digits, key_barge_in, key_to_speech_ms,
    key_stop_latency_ms)


def turn_values(turn: ResponseTurn, extra: Sequence[TurnMetric] = ()
                ) -> dict[str, TurnValue]:
    """Every built-in column of one response by name, then those of ``extra`` (the run
    file's own metrics: columns after the document's own)."""
    values = {metric.name: metric.function(turn) for metric in BUILTIN_TURN_METRICS}
    for metric in extra:
        values[metric.name] = metric.guarded(turn)
    return values


def run_turn_metrics(loaded: LoadedRun) -> tuple[TurnMetric, ...]:
    """The run file's own per-response metrics (``turn_metrics:``, dotted paths of functions
    decorated with :func:`turn_metric`, imported from the run file's folder like every
    plug-in). A path that is not a metric, or a column voice-metrics.json already has, is a
    configuration error (exit 2)."""
    taken = set(TurnMetrics.model_fields)
    metrics: list[TurnMetric] = []
    for index, path in enumerate(loaded.run.turn_metrics):
        key = f"turn_metrics[{index}]"
        found = import_dotted(path, search_dirs=[loaded.base_dir], source=loaded.run_path,
                              key=key)
        if not isinstance(found, TurnMetric):
            raise ConfigError(f"{path!r} is not a per-response metric: decorate the function "
                              f"with @voicelab.metrics.turn_metric(name, unit=...)",
                              source=loaded.run_path, key=key)
        if found.name in taken:
            raise ConfigError(f"{path!r} is named {found.name!r}, which voice-metrics.json "
                              f"already has", source=loaded.run_path, key=key)
        taken.add(found.name)
        metrics.append(found)
    return tuple(metrics)


def keep_recorded_columns(turns: Sequence[TurnMetrics],
                          recorded: Sequence[Mapping[str, JsonValue]]) -> None:
    """Give each re-scored response the columns the run file's own metrics wrote when it ran
    (every column not of the document's own), as recorded: ``rescore`` imports nothing a
    bundle names."""
    by_turn = {str(row.get("turn_id")): row for row in recorded}
    for turn in turns:
        row = by_turn.get(turn.turn_id, {})
        for name, value in row.items():
            if name not in TurnMetrics.model_fields:
                setattr(turn, name, value)
