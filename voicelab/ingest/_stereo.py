"""A simulated trial as a call recording: its two channels on the listener timeline, in one
stereo file, the way a telephony platform records both legs of a call.

Ingesting such a file is how ingest is checked against a known truth (the trial's own metrics),
and how a shipped dataset of "real" calls with known caller behaviour is made.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..artifacts import (
    PRODUCT_WAV,
    TRANSCRIPT_JSON,
    USER_WAV,
    VOICE_EVENTS,
    VOICE_METRICS,
    read_json,
    read_voice_events,
)
from ..audio import CANONICAL_SAMPLE_RATE_HZ, read_audio
from ._sources import TRANSCRIPT_SUFFIX, ChannelMap


def write_stereo_call(trial_dir: str | Path, path: str | Path, *,
                      sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ,
                      channels: ChannelMap | None = None, subtype: str = "PCM_16",
                      transcript: bool = False) -> Path:
    """Write ``trial_dir``'s ``user.wav`` and ``product.wav`` as the channels ``channels`` maps
    (default: the caller on 0, the agent on 1) of a stereo file at ``sample_rate_hz`` (WAV, or
    FLAC by ``path``'s suffix). ``transcript``: also write ``NAME.transcript.json`` beside it
    from the trial's transcript (each turn's text over its speech)."""
    import soundfile

    trial_dir, path = Path(trial_dir), Path(path)
    channels = channels or ChannelMap()
    user = read_audio(trial_dir / USER_WAV, sample_rate_hz=sample_rate_hz).samples
    agent = read_audio(trial_dir / PRODUCT_WAV, sample_rate_hz=sample_rate_hz).samples
    length = max(user.shape[0], agent.shape[0])
    frames = np.zeros((length, max(channels.user, channels.agent) + 1), dtype=np.int16)
    frames[:user.shape[0], channels.user] = user
    frames[:agent.shape[0], channels.agent] = agent
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), frames, sample_rate_hz, subtype=subtype)
    if transcript:
        _write_transcript(trial_dir, path.with_name(path.name.rsplit(".", 1)[0]
                                                    + TRANSCRIPT_SUFFIX))
    return path


def _user_speech_ms(trial_dir: Path) -> dict[str, tuple[float, float]]:
    """Each user turn's speech on the listener timeline (ms): a live line's own speech events,
    else the turn's first chunk plus its recorded speech bounds."""
    starts: dict[str, float] = {}
    bounds: dict[str, tuple[int, int]] = {}
    line: dict[str, list[float]] = {}
    for event in read_voice_events(trial_dir / VOICE_EVENTS):
        turn, kind = event.get("turn_id"), event.get("event_type")
        at_ms = event["listener_offset_ns"] / 1e6
        if not turn:
            continue
        if kind == "user.audio_chunk":
            starts.setdefault(turn, at_ms)
        elif kind == "user.turn_started":
            attributes = event["attributes"]
            if attributes.get("speech_start_sample") is not None \
                    and attributes.get("speech_end_sample") is not None:
                bounds[turn] = (attributes["speech_start_sample"], attributes["speech_end_sample"])
        elif kind in ("user.speech_started", "user.speech_ended"):
            line.setdefault(turn, []).append(at_ms)
    spans = {turn: (times[0], times[-1]) for turn, times in line.items() if len(times) >= 2}
    for turn, (start, end) in bounds.items():
        if turn not in spans and turn in starts:
            rate = CANONICAL_SAMPLE_RATE_HZ / 1000
            spans[turn] = (starts[turn] + start / rate, starts[turn] + end / rate)
    return spans


def _write_transcript(trial_dir: Path, path: Path) -> None:
    """The trial's turns as transcript segments over their speech on the listener timeline."""
    responses = {t["turn_id"]: t for t in read_json(trial_dir / VOICE_METRICS)["turns"]}
    users = _user_speech_ms(trial_dir)
    segments = []
    for turn in read_json(trial_dir / TRANSCRIPT_JSON)["turns"]:
        if not turn.get("text"):
            continue
        if turn["role"] == "assistant":
            placed = responses.get(turn["turn_id"], {})
            span = (placed.get("speech_start_ms") or placed.get("playback_start_ms"),
                    placed.get("playback_end_ms"))
        else:
            span = users.get(turn["turn_id"], (None, None))
        if span[0] is None or span[1] is None:
            continue
        segments.append({"speaker": "user" if turn["role"] == "user" else "agent",
                         "start": round(span[0] / 1000, 3), "end": round(span[1] / 1000, 3),
                         "text": turn["text"]})
    path.write_text(json.dumps({"segments": segments}, indent=2) + "\n")
