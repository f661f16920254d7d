"""A recorded call cut into turns: who spoke when, from voice activity on each leg.

Each leg's speech segments come from the same detector the metrics use on the product's
channel (:func:`voicelab.metrics.speech_segments_ns`: energy voice activity in 10 ms frames,
pauses under 100 ms bridged, edges moved to the first and last audible sample). Then:

* **User turns.** The caller's segments join into one turn until the agent starts speaking
  after one of them, or the caller is silent longer than ``turn_gap_ms``; the silences inside a
  turn (at least :data:`MIN_PAUSE_MS`: shorter ones are between words) are its pauses.
* **Responses.** Each agent segment belongs to the response to the latest user turn that had
  started when the segment began (``turn-000``: speech before the caller's first turn, an
  opening), so an agent that keeps talking over a barge-in keeps talking in its old response,
  and what it says after the barge-in answers the new turn.
* **Barge-ins.** A user turn that starts while a response sounds (between its first and last
  sample) barges in on it.

Each user turn's audio runs from its first sample (the first turn: from the recording's start)
to the next turn's first sample, so the turns joined are the caller's leg, sample for sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ..metrics import speech_segments_ns
from ..recording import ns_to_samples

#: A caller silent this long (with the agent silent too) has ended the turn; its next speech is
#: a new turn the agent did not answer.
DEFAULT_TURN_GAP_MS = 3000.0

#: A silence inside a leg's speech shorter than this is part of the speech (between words),
#: not a pause.
MIN_PAUSE_MS = 200

Span = tuple[int, int]  # [first sample, end sample) on the call's timeline


@dataclass
class UserTurn:
    turn_id: str
    #: the speech segments of the turn, samples on the call's timeline
    segments: list[Span]
    #: the turn's audio: from here to the next turn's start (the leg in turns)
    audio_start: int = 0
    audio_end: int = 0
    #: the response it barged in on, and how far into that response's speech
    barge_in_of: str | None = None
    after_product_audio_samples: int = 0
    text: str = ""

    @property
    def speech_start(self) -> int:
        return self.segments[0][0]

    @property
    def speech_end(self) -> int:
        return self.segments[-1][1]

    def pauses(self) -> list[list[int]]:
        """The silences between its segments, samples into the turn's audio."""
        return [[end - self.audio_start, start - self.audio_start]
                for (_, end), (start, _) in zip(self.segments, self.segments[1:], strict=False)]


@dataclass
class Response:
    turn_id: str
    segments: list[Span] = field(default_factory=list)
    text: str = ""

    @property
    def start(self) -> int:
        return self.segments[0][0]

    @property
    def end(self) -> int:
        return self.segments[-1][1]


@dataclass
class CallTurns:
    user_turns: list[UserTurn]
    responses: list[Response]
    length: int
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ


def turn_id(index: int) -> str:
    return f"turn-{index:03d}"


def _segments(audio: PcmAudio) -> list[Span]:
    """The leg's speech, silences shorter than :data:`MIN_PAUSE_MS` bridged."""
    bridge = audio.sample_rate_hz * MIN_PAUSE_MS // 1000
    segments: list[Span] = []
    for start_ns, end_ns in speech_segments_ns(audio):
        start, end = ns_to_samples(start_ns), ns_to_samples(end_ns)
        if end <= start:
            continue
        if segments and start - segments[-1][1] < bridge:
            segments[-1] = (segments[-1][0], end)
        else:
            segments.append((start, end))
    return segments


def _user_turns(user: list[Span], agent: list[Span], *, gap: int) -> list[list[Span]]:
    turns: list[list[Span]] = []
    for segment in user:
        if turns:
            previous_end = turns[-1][-1][1]
            agent_spoke = any(previous_end <= start < segment[0] for start, _ in agent)
            if not agent_spoke and segment[0] - previous_end <= gap:
                turns[-1].append(segment)
                continue
        turns.append([segment])
    return turns


def segment_call(user: PcmAudio, agent: PcmAudio, *,
                 turn_gap_ms: float = DEFAULT_TURN_GAP_MS) -> CallTurns:
    """The turns of a call whose legs are ``user`` and ``agent`` (one timeline, one rate)."""
    rate = user.sample_rate_hz
    length = user.samples.shape[0]
    user_segments, agent_segments = _segments(user), _segments(agent)
    grouped = _user_turns(user_segments, agent_segments, gap=int(turn_gap_ms * rate / 1000))
    turns = [UserTurn(turn_id(index), segments)
             for index, segments in enumerate(grouped, start=1)]
    for index, turn in enumerate(turns):
        turn.audio_start = 0 if index == 0 else turn.speech_start
        turn.audio_end = turns[index + 1].speech_start if index + 1 < len(turns) else length

    responses: dict[str, Response] = {}
    starts = [turn.speech_start for turn in turns]
    for segment in agent_segments:
        answering = sum(start <= segment[0] for start in starts)
        key = turn_id(answering)
        responses.setdefault(key, Response(key)).segments.append(segment)
    ordered = list(responses.values())
    for turn in turns:
        sounding = next((r for r in ordered if r.start < turn.speech_start < r.end), None)
        if sounding is not None:
            turn.barge_in_of = sounding.turn_id
            turn.after_product_audio_samples = turn.speech_start - sounding.start
    return CallTurns(turns, ordered, length, rate)
