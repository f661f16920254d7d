"""Audio inside pages: a trial's recordings cut to a stretch, encoded small, as ``<audio>``.

Reports and exported notebooks carry their audio inside the page (data URIs), so its size is
the page's size. Speech is encoded as Ogg Opus by default (about 32 kbit/s through soundfile's
libsndfile: a ten-second call is ~40 kB where 16-bit WAV at 24 kHz is 480 kB, and speech stays
clear); ``audio_format="flac"`` is lossless (about two thirds of WAV), ``"wav"`` is the raw
samples. Opus takes 8, 12, 16, 24 and 48 kHz; audio at another rate, or a libsndfile without
Opus, falls back to FLAC. Chromium, Firefox and Edge play all three; older Safari plays FLAC
and WAV only.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ..artifacts import (
    LEGACY_NAMES,
    MIXED_WAV,
    PRODUCT_WAV,
    TRIAL_REPORT,
    USER_WAV,
    audio_not_retained,
    fetch_missing,
    read_json,
    read_member,
)
from ..audio import PcmAudio, read_wav_pcm
from ..audio import wav_bytes as audio_wav_bytes
from ..errors import ConfigError
from ._frames import Frames

if TYPE_CHECKING:
    from IPython.display import HTML

AudioFormat = Literal["opus", "flac", "wav"]
AUDIO_FORMATS: tuple[AudioFormat, ...] = ("opus", "flac", "wav")
_OPUS_RATES_HZ = frozenset({8_000, 12_000, 16_000, 24_000, 48_000})
_MIME = {"opus": "audio/ogg", "flac": "audio/flac", "wav": "audio/wav"}


def turn_windows(turns: pd.DataFrame, *, lead_ms: float = 250.0,
                 tail_ms: float = 250.0) -> pd.DataFrame:
    """Where each turn sounds on the listener timeline: from the user's first audio (the
    response's first audio for an opening) to the end of the response, padded.

    Returns ``start_ms`` and ``end_ms`` aligned with ``turns``' index.
    """
    user = pd.to_numeric(turns.get("user_start_ms", pd.Series(np.nan, index=turns.index)))
    playback = pd.to_numeric(turns["playback_start_ms"])
    end = pd.to_numeric(turns["playback_end_ms"]).fillna(playback)
    start = user.fillna(playback).fillna(0.0)
    return pd.DataFrame({"start_ms": (start - lead_ms).clip(lower=0.0),
                         "end_ms": end.fillna(start) + tail_ms}, index=turns.index)


#: The channels on the listener timeline, by name, and their files.
CHANNEL_FILES = {"mixed": MIXED_WAV, "user": USER_WAV, "product": PRODUCT_WAV}
#: The user channel's name in bundles before 3.0 (still accepted).
_CHANNEL_ALIASES = {"technician": "user"}


def _channel_file(channel: str) -> str:
    return CHANNEL_FILES.get(_CHANNEL_ALIASES.get(channel, channel), f"{channel}.wav")


def channel_path(trial_dir: str | os.PathLike[str], channel: str) -> Path | None:
    """The file of ``channel`` (``mixed``, ``user``, ``product``, or any other ``<name>.wav`` of
    the trial) in ``trial_dir``, under the name its bundle's version gave it (None: absent)."""
    name = _channel_file(channel)
    for candidate in (name, *LEGACY_NAMES.get(name, ())):
        path = Path(trial_dir) / candidate
        if path.is_file() or fetch_missing(path):  # a store's mirror fetches it now
            return path
    return None


def retention_note(trial_dir: str | os.PathLike[str]) -> str | None:
    """Why the trial has no audio when its run's ``retention:`` left it out (``"audio not
    retained (retention: failed)"``), else None."""
    report = Path(trial_dir) / TRIAL_REPORT
    if not report.is_file():
        return None
    try:
        return audio_not_retained(read_json(report))
    except ConfigError:  # an unreadable report says nothing about retention
        return None


def _absent_figure(trial_dir: str | os.PathLike[str], caption: str | None) -> str | None:
    """A note in place of the audio its run did not retain (None: it was not dropped)."""
    note = retention_note(trial_dir)
    if note is None:
        return None
    label = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure style="margin:0.3em 0">{label}<i>{html.escape(note)}</i></figure>'


def read_trial_audio(trial_dir: str | os.PathLike[str], *, channel: str = "mixed",
                     start_ms: float | None = None,
                     end_ms: float | None = None) -> tuple[np.ndarray, int]:
    """int16 samples of a channel (``user``/``product``/``mixed``: :func:`channel_path`) between
    two listener-timeline offsets (the whole file by default), and the sample rate. Reads only
    that stretch."""
    path = channel_path(trial_dir, channel)
    if path is None:
        raise ConfigError(f"no {_channel_file(channel)} in this trial folder",
                          source=Path(trial_dir))
    samples, rate = read_wav_pcm(read_member(path))  # never through a link, bounded
    total = samples.shape[0]
    first = 0 if start_ms is None else min(total, max(0, int(start_ms * rate / 1000)))
    last = total if end_ms is None else min(total, max(first, int(end_ms * rate / 1000)))
    return samples[first:last], rate


def wav_bytes(samples: np.ndarray, *, sample_rate_hz: int) -> bytes:
    """A 16-bit mono WAV file in memory."""
    return audio_wav_bytes(PcmAudio(np.asarray(samples, dtype=np.int16), sample_rate_hz))


def _opus_available() -> bool:
    import soundfile

    return "OPUS" in soundfile.available_subtypes("OGG")


def encode_audio(samples: np.ndarray, *, sample_rate_hz: int,
                 audio_format: AudioFormat = "opus") -> tuple[bytes, str]:
    """16-bit mono ``samples`` as a file in memory: (bytes, MIME type). See the module
    docstring for the formats and the fallback."""
    if audio_format not in AUDIO_FORMATS:
        raise ValueError(f"audio_format must be one of {', '.join(AUDIO_FORMATS)}, got "
                         f"{audio_format!r}")
    pcm = np.asarray(samples, dtype=np.int16)
    if audio_format == "opus" and (sample_rate_hz not in _OPUS_RATES_HZ or not pcm.size
                                   or not _opus_available()):
        audio_format = "flac"
    if audio_format == "wav" or not pcm.size:
        return wav_bytes(pcm, sample_rate_hz=sample_rate_hz), _MIME["wav"]
    import soundfile

    buffer = io.BytesIO()
    if audio_format == "opus":
        soundfile.write(buffer, pcm, sample_rate_hz, format="OGG", subtype="OPUS")
    else:
        soundfile.write(buffer, pcm, sample_rate_hz, format="FLAC", subtype="PCM_16")
    return buffer.getvalue(), _MIME[audio_format]


def audio_data_uri(trial_dir: str | os.PathLike[str], *, channel: str = "mixed",
                   start_ms: float | None = None, end_ms: float | None = None,
                   audio_format: AudioFormat = "opus") -> str:
    samples, rate = read_trial_audio(trial_dir, channel=channel, start_ms=start_ms, end_ms=end_ms)
    data, mime = encode_audio(samples, sample_rate_hz=rate, audio_format=audio_format)
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def audio_figure(uri: str, caption: str | None) -> str:
    """An ``<audio>`` element (with a caption) for a data URI."""
    label = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (f'<figure style="margin:0.3em 0">{label}'
            f'<audio controls preload="none" src="{uri}"></audio></figure>')


def audio_html(trial_dir: str | os.PathLike[str], *, channel: str = "mixed",
               start_ms: float | None = None, end_ms: float | None = None,
               caption: str | None = None, audio_format: AudioFormat = "opus") -> HTML:
    """An ``<audio>`` element with the audio embedded (a data URI): it survives HTML export;
    a note where the run's ``retention:`` did not keep the trial's audio."""
    from IPython.display import HTML

    absent = _absent_figure(trial_dir, caption) if channel_path(trial_dir, channel) is None \
        else None
    if absent is not None:
        return HTML(absent)
    uri = audio_data_uri(trial_dir, channel=channel, start_ms=start_ms, end_ms=end_ms,
                         audio_format=audio_format)
    return HTML(audio_figure(uri, caption))


def turn_audio_html(frames: Frames, turns: pd.DataFrame, *, channel: str = "mixed",
                    metric: str | None = "first_audio_latency_ms",
                    audio_format: AudioFormat = "opus") -> HTML:
    """One ``<audio>`` per row of ``turns`` (a slice of ``frames.turns``, e.g. the worst turns),
    cut to the turn and captioned with its ids and ``metric`` (a note for a trial whose audio
    the run did not retain)."""
    from IPython.display import HTML

    windows = turn_windows(turns)
    parts = []
    for (_, turn), (_, window) in zip(turns.iterrows(), windows.iterrows(), strict=True):
        trial_dir = frames.trial_dir(run_id=turn["run_id"], trial_id=turn["trial_id"])
        caption = f"{turn['run_id']} / {turn['trial_id']} / {turn['turn_id']}"
        if metric and metric in turn.index and pd.notna(turn[metric]):
            caption += f": {metric} = {float(turn[metric]):.1f}"
        absent = _absent_figure(trial_dir, caption) if channel_path(trial_dir, channel) is None \
            else None
        if absent is not None:
            parts.append(absent)
            continue
        uri = audio_data_uri(trial_dir, channel=channel, start_ms=window["start_ms"],
                             end_ms=window["end_ms"], audio_format=audio_format)
        parts.append(audio_figure(uri, caption))
    return HTML("".join(parts) or "<i>no turns</i>")


__all__ = ["AUDIO_FORMATS", "AudioFormat", "audio_data_uri", "audio_figure", "audio_html",
           "encode_audio", "read_trial_audio", "retention_note", "turn_audio_html", "turn_windows", "wav_bytes"]
