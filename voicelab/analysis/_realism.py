"""How the callers behave: one long frame of observations per metric, simulated or recorded.

:func:`caller_behaviour` measures simulated runs and ingested production calls the same way, so
their distributions can be held against each other (:func:`compare_realism`). Every caller
metric is measured here from the user channel's audio, never taken from what the simulation
meant to say (a script's ``{pause}``) or what an ingest's detector reported: both sides go
through one voice activity detector with one set of settings.

The user channel of a turn
    ``user.wav`` (the listener timeline) from the turn's first ``user.audio_chunk``
    (``listener_offset_ns``) for the sum of its chunks' durations: a turn plays contiguously
    from its first chunk, as the bundle's placement renders it.

Speech in it
    :func:`voicelab.audio.detect_speech` (energy backend, 10 ms frames) with a hangover of
    ``min_pause_ms`` (300 ms by default: the dead-air threshold of voice-metrics.json; a fluent
    sentence break of the tone voice stays below it) and an initial noise floor estimated from
    the turn itself (the 10th percentile of its frame levels), so a turn that begins in room
    noise is judged against that noise from its first frame. Positions are 10 ms frames.

Metrics (``metric``, ``unit``; one row per observation)
    ``user_turn_ms``: first speech onset to last speech end of a user turn.
    ``pause_ms``: each silence between two speech segments of one user turn (at least
    ``min_pause_ms`` by construction). A side without pauses has no rows here.
    ``turn_pause_ms``: the sum of a user turn's pauses (0 for a fluent turn), so a side that
    never pauses still has a distribution to compare.
    ``caller_words_per_minute``: words of the turn's text (``user.turn_started`` ``text``) over
    ``user_turn_ms``.
    ``speech_to_noise_db``: the turn's speech frames' mean power over the median power of its
    other frames (at least 100 ms of them: the lead-in, the tail, the pauses), in dB; the
    median keeps the fading edges of words out of the noise. Digital silence counts as the
    16-bit quantization floor (-101 dBFS), so a noiseless simulation reads about 85-90 dB,
    not infinity.
    ``barge_in_rate``: per call, ``user.barge_in`` events over the agent's responses that sounded
    (distinct ``turn_id`` of ``product.audio_chunk``).
    ``talk_ratio``: per call, voice-metrics.json ``talk.talk_ratio`` (agent talk over caller).
    ``response_latency_ms``, ``dead_air_ms``: per response, voice-metrics.json's (the agent's
    figures, measured the same way on both sides by the metrics code).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..audio import FRAME_MS, PcmAudio, detect_speech
from ..errors import ConfigError
from ._embed import channel_path, read_trial_audio
from ._frames import Frames, load_frames

logger = logging.getLogger(__name__)

#: Silence inside a turn shorter than this is no pause (the dead-air threshold).
DEFAULT_MIN_PAUSE_MS = 300.0
#: The noise power of 16-bit quantization (1/12 LSB squared), in dBFS: digital silence.
QUANTIZATION_FLOOR_DBFS = 10 * math.log10((1 / 12) / 32768.0**2)
#: Fewer non-speech frames than this in a turn: no speech-to-noise estimate for it.
MIN_NOISE_FRAMES = 10
SIMULATION, PRODUCTION = "simulation", "production"

BEHAVIOUR_COLUMNS = ("run_id", "cell", "trial_id", "turn_id", "source", "scenario_id",
                     "persona", "environment", "metric", "value", "unit")
#: metric -> unit, in the order the tables list them.
CALLER_METRICS = {
    "user_turn_ms": "ms",
    "pause_ms": "ms",
    "turn_pause_ms": "ms",
    "barge_in_rate": "per response",
    "caller_words_per_minute": "words/min",
    "speech_to_noise_db": "dB",
    "talk_ratio": "agent/caller",
    "response_latency_ms": "ms",
    "dead_air_ms": "ms",
}
_WORD = re.compile(r"\w+(?:'\w+)?")
_USER_TURN, _USER_CHUNK = "user.turn_started", "user.audio_chunk"
_BARGE_IN, _PRODUCT_CHUNK = "user.barge_in", "product.audio_chunk"
_RESPONSE_METRICS = ("response_latency_ms", "dead_air_ms")


@dataclass(frozen=True)
class TurnSpeech:
    """What the detector found in one user turn's audio (ms from the turn's first sample)."""

    segments_ms: tuple[tuple[float, float], ...]
    speech_to_noise_db: float | None

    @property
    def turn_ms(self) -> float | None:
        if not self.segments_ms:
            return None
        return self.segments_ms[-1][1] - self.segments_ms[0][0]

    @property
    def pauses_ms(self) -> list[float]:
        return [later[0] - earlier[1]
                for earlier, later in zip(self.segments_ms, self.segments_ms[1:], strict=False)]


def _frame_power(samples: np.ndarray, frame: int) -> np.ndarray:
    """Mean-removed mean square of each whole frame (full scale = 1)."""
    count = samples.shape[0] // frame
    framed = samples[:count * frame].astype(np.float64).reshape(count, frame) / 32768.0
    return np.asarray(framed.var(axis=1))


def _dbfs(power: float) -> float:
    return max(QUANTIZATION_FLOOR_DBFS, 10 * math.log10(power) if power > 0 else -math.inf)


def measure_turn(samples: np.ndarray, *, sample_rate_hz: int,
                 min_pause_ms: float = DEFAULT_MIN_PAUSE_MS) -> TurnSpeech:
    """Speech segments and speech-to-noise of one user turn's int16 samples (module docstring)."""
    audio = PcmAudio(np.ascontiguousarray(samples, dtype=np.int16), sample_rate_hz)
    frame = sample_rate_hz * FRAME_MS // 1000
    power = _frame_power(audio.samples, frame)
    if not power.size:
        return TurnSpeech((), None)
    floor = _dbfs(float(np.percentile(power, 10)))
    found = detect_speech(audio, hangover_ms=min_pause_ms, initial_floor_dbfs=floor)
    to_ms = 1000.0 / sample_rate_hz
    segments = tuple((b.start_sample * to_ms, b.end_sample * to_ms) for b in found)
    speech = np.zeros(power.size, dtype=bool)
    for bounds in found:
        speech[bounds.start_sample // frame:-(-bounds.end_sample // frame)] = True
    snr = None
    if speech.any() and (~speech).sum() >= MIN_NOISE_FRAMES:
        snr = round(_dbfs(float(power[speech].mean()))
                    - _dbfs(float(np.median(power[~speech]))), 3)
    return TurnSpeech(segments, snr)


# --- reading the frames -------------------------------------------------------------------------

def _frames_of(given: Frames | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
               ) -> Frames:
    frames = given if isinstance(given, Frames) else load_frames(given)
    if len(frames.trials) and frames.events.empty:
        raise ValueError("caller_behaviour needs the voice events: load the frames with "
                         "events=True (the default)")
    return frames


def _sources(frames: Frames) -> dict[object, str]:
    """run_id -> ``simulation`` / ``production`` (a run report without ``source`` simulated)."""
    runs = frames.runs
    values = runs["source"] if "source" in runs.columns else pd.Series([None] * len(runs))
    return {run: (str(value) if isinstance(value, str) and value else SIMULATION)
            for run, value in zip(runs["run_id"].astype(object), values, strict=True)}


def _keys(frame: pd.DataFrame) -> pd.Series:
    """One string per trial (run, cell, trial), the same for every frame that has the keys."""
    parts = [frame[c].astype(object).where(frame[c].notna(), "").astype(str)
             for c in ("run_id", "cell", "trial_id")]
    return parts[0] + "\x1f" + parts[1] + "\x1f" + parts[2]


def _by_trial(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    if frame.empty:
        return {}
    return dict(iter(frame.groupby(_keys(frame), sort=False)))


def _turn_windows(events: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """turn_id -> (start, end) ms of its user audio on the listener timeline: a turn plays
    contiguously from its first chunk (as ``user.wav`` is placed)."""
    chunks = events[(events["event_type"] == _USER_CHUNK) & events["turn_id"].notna()]
    if chunks.empty:
        return {}
    table = pd.DataFrame({"turn": chunks["turn_id"].astype(object),
                          "start": chunks["listener_ms"],
                          "length": chunks["pcm_duration_ms"].fillna(0.0)})
    spans = table.groupby("turn", sort=False).agg(start=("start", "min"),
                                                  length=("length", "sum"))
    return {str(turn): (float(r.start), float(r.start + r.length))
            for turn, r in spans.iterrows()}


def _words(attributes: object) -> int:
    text = attributes.get("text") if isinstance(attributes, dict) else None
    return len(_WORD.findall(text)) if isinstance(text, str) else 0


def _caller_rows(trial_dir: str, events: pd.DataFrame, *, min_pause_ms: float
                 ) -> list[tuple[str | None, str, float]]:
    """(turn_id, metric, value) of one call's audio and events."""
    rows: list[tuple[str | None, str, float]] = []
    barge_ins = int((events["event_type"] == _BARGE_IN).sum())
    product = events[(events["event_type"] == _PRODUCT_CHUNK) & events["turn_id"].notna()]
    responses = product["turn_id"].astype(object).nunique()
    if responses:
        rows.append((None, "barge_in_rate", barge_ins / responses))
    started = events[events["event_type"] == _USER_TURN]
    windows = _turn_windows(events)
    if started.empty or not windows:
        return rows
    if channel_path(trial_dir, "user") is None:
        logger.warning("%s: no user.wav; its caller speech is not measured", trial_dir)
        return rows
    samples, rate = read_trial_audio(trial_dir, channel="user")
    for turn_id, attributes in zip(started["turn_id"].astype(object), started["attributes"],
                                   strict=True):
        if turn_id is None or turn_id not in windows:
            continue
        start, end = windows[turn_id]
        first, last = int(start * rate / 1000), int(end * rate / 1000)
        speech = measure_turn(samples[first:last], sample_rate_hz=rate,
                              min_pause_ms=min_pause_ms)
        if speech.turn_ms is None:
            continue
        pauses = speech.pauses_ms
        rows.append((turn_id, "user_turn_ms", speech.turn_ms))
        rows.extend((turn_id, "pause_ms", pause) for pause in pauses)
        rows.append((turn_id, "turn_pause_ms", float(sum(pauses))))
        words = _words(attributes)
        if words and speech.turn_ms > 0:
            rows.append((turn_id, "caller_words_per_minute", words * 60_000 / speech.turn_ms))
        if speech.speech_to_noise_db is not None:
            rows.append((turn_id, "speech_to_noise_db", speech.speech_to_noise_db))
    return rows


def caller_behaviour(frames_or_paths: Frames | str | os.PathLike[str]
                     | Iterable[str | os.PathLike[str]], *,
                     min_pause_ms: float = DEFAULT_MIN_PAUSE_MS) -> pd.DataFrame:
    """One row per observation of a caller (or response) metric, in long format.

    ``frames_or_paths``: :class:`Frames` loaded with their events, or what
    :func:`load_frames` reads (runs, ingested bundles, folders of them). Columns:
    ``BEHAVIOUR_COLUMNS`` (``turn_id`` NA for per-call metrics; ``source`` the run report's,
    ``simulation`` when it has none). Metrics and how each is measured: the module docstring.
    """
    if not min_pause_ms > 0:
        raise ValueError(f"min_pause_ms must be > 0, got {min_pause_ms!r}")
    frames = _frames_of(frames_or_paths)
    sources = _sources(frames)
    events_of = _by_trial(frames.events)
    turns_of = _by_trial(frames.turns)
    records: list[tuple[object, ...]] = []
    trials = frames.trials
    columns = [c for c in ("run_id", "cell", "trial_id", "scenario_id", "persona",
                           "environment", "path", "talk_ratio") if c in trials.columns]
    table = trials[columns].astype(object)
    for key, row in zip(_keys(trials), table.itertuples(index=False), strict=True):
        ids = (row.run_id, None if pd.isna(row.cell) else row.cell, row.trial_id)
        optional = row._asdict()  # the columns a frame may lack
        keys = (sources.get(row.run_id, SIMULATION), optional.get("scenario_id"),
                optional.get("persona"), optional.get("environment"))
        try:
            found = _caller_rows(str(row.path), events_of.get(key, frames.events.iloc[:0]),
                                 min_pause_ms=min_pause_ms)
        except (ConfigError, ValueError) as error:  # a hostile or broken user.wav
            logger.warning("%s: caller speech not measured: %s", row.path, error)
            found = []
        records.extend((*ids, turn, *keys, metric, value) for turn, metric, value in found)
        turns = turns_of.get(key)
        if turns is not None:
            for metric in _RESPONSE_METRICS:
                if metric not in turns.columns:
                    continue
                values = pd.to_numeric(turns[metric], errors="coerce")
                records.extend((*ids, turn, *keys, metric, float(value))
                               for turn, value in zip(turns["turn_id"].astype(object), values,
                                                      strict=True) if pd.notna(value))
        ratio = optional.get("talk_ratio")
        if ratio is not None and pd.notna(ratio):
            records.append((*ids, None, *keys, "talk_ratio", float(ratio)))
    return _frame(records)


def _frame(records: list[tuple[object, ...]]) -> pd.DataFrame:
    names = [c for c in BEHAVIOUR_COLUMNS if c != "unit"]
    frame = pd.DataFrame.from_records(records, columns=names)
    frame["value"] = frame["value"].astype(float)
    frame["unit"] = frame["metric"].map(CALLER_METRICS).astype(object)
    order = {metric: index for index, metric in enumerate(CALLER_METRICS)}
    frame = frame.sort_values(["metric"], key=lambda s: s.map(order), kind="stable")
    for column in ("run_id", "cell", "trial_id", "source", "scenario_id", "persona",
                   "environment", "metric"):
        frame[column] = frame[column].astype("category")
    return frame.reset_index(drop=True)
