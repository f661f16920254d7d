"""Who talked how much: talk times, crosstalk and the product's speaking rate, per trial.

Pure functions of the placed channels (voice activity on the listener timeline, edges to the
audible sample: :func:`~._voice.speech_segments_ns`) and of the responses' transcripts. The
user's talk is its channel's speech *within its turns' speech* (a live line's room noise
between turns is not talk); the product's is its channel's speech as heard.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..artifacts import TalkMetrics, VoiceMetrics
from ._entity_text import tokens_of
from ._selectivity import overlap_ns

Interval = tuple[int, int]


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _total(intervals: Sequence[Interval]) -> int:
    return sum(max(0, end - start) for start, end in intervals)


def within(segments: Sequence[Interval], spans: Sequence[Interval]) -> list[Interval]:
    """The parts of ``segments`` inside ``spans`` (each list of disjoint intervals)."""
    return [(max(a, c), min(b, d)) for a, b in segments for c, d in spans
            if min(b, d) > max(a, c)]


def _disjoint(intervals: Sequence[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif end > start:
            merged.append((start, end))
    return merged


def talk_metrics(product_speech: Sequence[Interval], user_channel_speech: Sequence[Interval],
                 user_turn_speech: Sequence[Interval]) -> TalkMetrics:
    """Talk times and crosstalk (ns intervals on the listener timeline): ``product_speech``
    and ``user_channel_speech``, the speech segments of each placed channel;
    ``user_turn_speech``, where each user turn's speech starts and ends."""
    product = _disjoint(product_speech)
    user = _disjoint(within(user_channel_speech, _disjoint(user_turn_speech)))
    user_ns, product_ns = _total(user), _total(product)
    return TalkMetrics(user_talk_ms=_ms(user_ns), product_talk_ms=_ms(product_ns),
                       talk_ratio=round(product_ns / user_ns, 4) if user_ns else None,
                       crosstalk_ms=_ms(overlap_ns(product, user)))


def add_words_per_minute(metrics: VoiceMetrics) -> None:
    """The product's speaking rate, once the responses' transcripts are final (recognized ones
    included): the words of its completed, uninterrupted responses over their speaking time
    (the onset of each one's speech to its last audible sample)."""
    talk = metrics.talk
    if talk is None:
        return
    words = 0
    speaking_ms = 0.0
    for turn in metrics.turns:
        if turn.status != "completed" or turn.interrupted or turn.speech_start_ms is None \
                or turn.playback_end_ms is None or turn.trailing_silence_ms is None:
            continue
        count = len(tokens_of(turn.transcript))
        duration = turn.playback_end_ms - turn.trailing_silence_ms - turn.speech_start_ms
        if count and duration > 0:
            words += count
            speaking_ms += duration
    talk.product_words = words
    talk.product_speaking_ms = round(speaking_ms, 3) if words else None
    talk.product_words_per_minute = round(words * 60_000 / speaking_ms, 2) if words else None
