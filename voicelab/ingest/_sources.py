"""Where a recorded call is: its two legs (a stereo file with a channel map, or two mono files)
and, optionally, its transcript with timestamps.

A call recording is hostile input like a bundle: every file is checked at the door (format,
rate, length, channel count) and a problem is one :class:`~voicelab.errors.ConfigError` naming
the file and the key.

The transcript format (``CALL.transcript.json`` beside ``CALL.wav`` is found by itself)::

    {"segments": [{"speaker": "user", "start": 0.42, "end": 2.10, "text": "Hi, I'd like..."},
                  {"speaker": "agent", "start": 2.60, "end": 5.02, "text": "Sure..."}]}

``speaker`` is ``user`` (the caller) or ``agent``; ``start`` and ``end`` are seconds from the
start of the recording. A segment's words go to the user turn or agent response its time span
overlaps most.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from ..artifacts import decode_json, read_member
from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, channel_count, read_channels
from ..config import StrictModel as _StrictModel
from ..config import parse_settings, read_yaml
from ..errors import AudioFileError, ConfigError
from ..recording import MAX_TIMELINE_SECONDS

#: A transcript beside ``CALL.wav`` is ``CALL.transcript.json``.
TRANSCRIPT_SUFFIX = ".transcript.json"
#: The channels of a stereo call recording unless told otherwise: the caller first.
DEFAULT_CHANNELS: Mapping[str, int] = {"user": 0, "agent": 1}
_MAX_TRANSCRIPT_BYTES = 16 * 1024 * 1024
_CALL_ID = re.compile(r"[^A-Za-z0-9._-]+")


#: Seconds from the start of a call: finite (JSON's ``Infinity``, ``NaN`` and ``1e309`` are
#: refused when the transcript is checked, before anything is written) and within the longest
#: call a bundle's timeline holds.
CallSeconds = Annotated[float, Field(ge=0, le=MAX_TIMELINE_SECONDS, allow_inf_nan=False)]


class TranscriptSegment(_StrictModel):
    speaker: Literal["user", "agent"]
    start: CallSeconds
    end: CallSeconds
    text: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> TranscriptSegment:
        if self.end < self.start:
            raise ValueError("end must not be before start")
        return self


class CallTranscript(_StrictModel):
    segments: list[TranscriptSegment] = Field(default_factory=list)


class ChannelMap(_StrictModel):
    """Which channel of a stereo recording is the caller (``user``) and which the agent."""

    user: Annotated[int, Field(ge=0, le=63)] = 0
    agent: Annotated[int, Field(ge=0, le=63)] = 1

    @model_validator(mode="after")
    def _distinct(self) -> ChannelMap:
        if self.user == self.agent:
            raise ValueError("the user and the agent need channels of their own")
        return self


class ManifestCall(_StrictModel):
    """One call of a manifest (``calls:``): a stereo ``audio`` file, or ``user_audio`` and
    ``agent_audio``; paths relative to the manifest."""

    id: Annotated[str, Field(min_length=1, max_length=120)] | None = None
    audio: Path | None = None
    channels: ChannelMap | None = None
    user_audio: Path | None = None
    agent_audio: Path | None = None
    transcript: Path | None = None

    @model_validator(mode="after")
    def _one_layout(self) -> ManifestCall:
        pair = self.user_audio is not None or self.agent_audio is not None
        if self.audio is not None and pair:
            raise ValueError("give a stereo 'audio' or 'user_audio' and 'agent_audio', not both")
        if self.audio is None and (self.user_audio is None or self.agent_audio is None):
            raise ValueError("a call needs a stereo 'audio' file, or both 'user_audio' and "
                             "'agent_audio'")
        if self.channels is not None and self.audio is None:
            raise ValueError("'channels' maps the channels of a stereo 'audio' file")
        return self


class Manifest(_StrictModel):
    calls: Annotated[list[ManifestCall], Field(min_length=1, max_length=10_000)]
    #: the channel map of every stereo call that names none
    channels: ChannelMap = Field(default_factory=ChannelMap)


@dataclass(frozen=True)
class CallSource:
    """One recorded call: a stereo ``audio`` file (``channels`` says which leg is which), or a
    ``user_audio`` and an ``agent_audio`` mono file; ``transcript`` optional."""

    call_id: str
    audio: Path | None = None
    channels: ChannelMap = field(default_factory=ChannelMap)
    user_audio: Path | None = None
    agent_audio: Path | None = None
    transcript: Path | None = None
    #: the file (a manifest) and key that named this call, for error lines
    named_in: Path | None = None
    key: str | None = None

    @property
    def files(self) -> list[Path]:
        return [p for p in (self.audio, self.user_audio, self.agent_audio) if p is not None]


@dataclass(frozen=True)
class CallAudio:
    """A call's two legs on one timeline (the same length, canonical rate)."""

    user: PcmAudio
    agent: PcmAudio
    transcript: CallTranscript | None
    #: the rate the recording was made at (8 kHz for most phone calls)
    source_rate_hz: int

    @property
    def duration_seconds(self) -> float:
        return self.user.duration_seconds


def call_id_of(path: Path) -> str:
    """A call's id from its file name (what a trial folder's report says)."""
    return _CALL_ID.sub("-", path.stem).strip("-") or "call"


def stereo_call(path: str | Path, *, channels: ChannelMap | None = None) -> CallSource:
    """A stereo recording; its transcript is ``NAME.transcript.json`` beside it, if present."""
    path = Path(path).expanduser()
    beside = path.with_name(path.stem + TRANSCRIPT_SUFFIX)
    return CallSource(call_id_of(path), audio=path, channels=channels or ChannelMap(),
                      transcript=beside if beside.is_file() else None)


def mono_pair(user_audio: str | Path, agent_audio: str | Path, *,
              transcript: str | Path | None = None) -> CallSource:
    """A call recorded as two mono files (the caller's leg and the agent's)."""
    user = Path(user_audio).expanduser()
    return CallSource(call_id_of(user), user_audio=user, agent_audio=Path(agent_audio).expanduser(),
                      transcript=Path(transcript).expanduser() if transcript else None)


def read_manifest(path: str | Path) -> list[CallSource]:
    """The calls a manifest (YAML or JSON) lists, paths resolved against its folder."""
    path = Path(path).expanduser().resolve()
    manifest = parse_settings(Manifest, read_yaml(path), key=None, source=path)
    calls = []
    for index, call in enumerate(manifest.calls):
        key = f"calls[{index}]"

        def resolved(value: Path | None) -> Path | None:
            return None if value is None else (path.parent / value.expanduser())

        first = resolved(call.audio or call.user_audio)
        assert first is not None
        calls.append(CallSource(
            call.id or call_id_of(first), audio=resolved(call.audio),
            channels=call.channels or manifest.channels, user_audio=resolved(call.user_audio),
            agent_audio=resolved(call.agent_audio), transcript=resolved(call.transcript),
            named_in=path, key=key))
    return calls


def unique_ids(calls: Sequence[CallSource]) -> list[CallSource]:
    """The calls, each id made unique (``-2``, ``-3``... for a repeated file name)."""
    seen: dict[str, int] = {}
    unique = []
    for call in calls:
        count = seen.get(call.call_id, 0) + 1
        seen[call.call_id] = count
        unique.append(call if count == 1 else replace(call, call_id=f"{call.call_id}-{count}"))
    return unique


#: What the error line calls a recording longer than ``MAX_TIMELINE_SECONDS``.
_RECORDINGS = "call recordings"


def check_call(call: CallSource) -> None:
    """The call's files exist, last at most ``MAX_TIMELINE_SECONDS`` and have the channels its
    layout needs, and its transcript is valid, from the headers and the transcript alone (no
    decoding): checked for every call before the first one is ingested (before the bundle's
    folder exists)."""
    def channels_of(path: Path) -> int:
        return channel_count(path, max_seconds=MAX_TIMELINE_SECONDS, what=_RECORDINGS)

    try:
        if call.audio is not None:
            count = channels_of(call.audio)
            if count < 2:
                raise AudioFileError(
                    "a mono recording: a call needs the caller and the agent on separate "
                    "channels (a stereo file, or two mono files: --pair USER AGENT)",
                    source=call.audio)
            needed = max(call.channels.user, call.channels.agent)
            if needed >= count:
                raise AudioFileError(f"the file has {count} channels: no channel {needed} "
                                     f"(the channel map says user={call.channels.user}, "
                                     f"agent={call.channels.agent})", source=call.audio)
        else:
            for leg, path in (("user", call.user_audio), ("agent", call.agent_audio)):
                assert path is not None
                if channels_of(path) != 1:
                    raise AudioFileError(f"the {leg}'s leg must be a mono file", source=path)
        if call.transcript is not None:
            read_transcript(call.transcript)
    except ConfigError as error:
        if call.named_in is not None and error.key is None:
            raise ConfigError(f"{error.message} ({error.source})", source=call.named_in,
                              key=call.key) from None
        raise


def read_transcript(path: Path) -> CallTranscript:
    try:
        data: Any = decode_json(read_member(path, limit=_MAX_TRANSCRIPT_BYTES), source=path)
    except FileNotFoundError:
        raise ConfigError("transcript file not found", source=path) from None
    except OSError as error:
        raise ConfigError(f"cannot read the transcript: {error.strerror or error}",
                          source=path) from None
    if isinstance(data, list):  # the segments alone
        data = {"segments": data}
    return parse_settings(CallTranscript, data, key=None, source=path)


def read_call(call: CallSource, *, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> CallAudio:
    """Both legs of ``call`` at ``sample_rate_hz`` on one timeline (the shorter padded with
    silence at its end), and its transcript."""
    import soundfile

    what = _RECORDINGS
    if call.audio is not None:
        user, agent = read_channels(call.audio, [call.channels.user, call.channels.agent],
                                    sample_rate_hz=sample_rate_hz,
                                    max_seconds=MAX_TIMELINE_SECONDS, what=what)
        rate = soundfile.info(str(call.audio)).samplerate
    else:
        assert call.user_audio is not None and call.agent_audio is not None
        [user] = read_channels(call.user_audio, [0], sample_rate_hz=sample_rate_hz,
                               max_seconds=MAX_TIMELINE_SECONDS, what=what)
        [agent] = read_channels(call.agent_audio, [0], sample_rate_hz=sample_rate_hz,
                                max_seconds=MAX_TIMELINE_SECONDS, what=what)
        rate = soundfile.info(str(call.user_audio)).samplerate
    length = max(user.samples.shape[0], agent.samples.shape[0])
    transcript = read_transcript(call.transcript) if call.transcript is not None else None
    return CallAudio(_padded(user, length), _padded(agent, length), transcript, int(rate))


def _padded(audio: PcmAudio, length: int) -> PcmAudio:
    missing = length - audio.samples.shape[0]
    if missing <= 0:
        return audio
    return PcmAudio(np.concatenate([audio.samples, np.zeros(missing, dtype=np.int16)]),
                    audio.sample_rate_hz)
