"""A recorded call cut into turns: who spoke when, from voice activity on each leg.

Each leg's speech comes from :func:`._legs.leg_speech` (the metrics' detector, held to the
leg's own noise floor). Then:

* **User turns.** The caller's segments join into one turn until the agent starts speaking
  after one of them, or the caller is silent longer than ``turn_gap_ms``; the silences inside a
  turn (at least :data:`MIN_PAUSE_MS`: shorter ones are between words) are its pauses.
* **Responses.** Each agent segment belongs to the response to the latest user turn that had
  started when the segment began (``turn-000``: speech before the caller's first turn, an
  opening); but an agent that speaks again within :data:`RESUME_GAP_MS` of its last sound,
  when the caller began in that gap or over it, is still in its old response (it talks over
  the barge-in); what it says after it stopped answers the new turn.
* **Barge-ins.** A user turn that starts while a response sounds (between its first and last
  sample) barges in on it.

Each user turn's audio runs from its speech's first sample to the next turn's, so the leg
before the first turn (the line's, no turn's) and the turns joined are the caller's leg, sample
for sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ._legs import Span, leg_speech

#: A caller silent this long (with the agent silent too) has ended the turn; its next speech is
#: a new turn the agent did not answer.
DEFAULT_TURN_GAP_MS = 3000.0

#: An agent that speaks again within this of its last sound is still in the same response
#: (between its sentences), whoever spoke in between.
RESUME_GAP_MS = 500



@dataclass
class UserTurn:
    turn_id: str
    #: the speech segments of the turn, samples on the call's timeline
    segments: list[Span]
    #: the turn's audio: from its speech to the next turn's (the leg in turns)
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


def _responses(agent: list[Span], starts: list[int], *, resume: int) -> list[Response]:
    """Each agent segment to the response to the latest user turn started before it; but an
    agent that resumes within ``resume`` samples of its last sound, after a caller who began
    in that gap or over it, is still in its response (it talks over the barge-in)."""
    responses: list[Response] = []
    answered: list[int] = []  # the user turn each response answers
    for segment in agent:
        answering = sum(start <= segment[0] for start in starts)
        if responses and answering != answered[-1]:
            current = responses[-1]
            caller = starts[answering - 1]
            if caller < current.end + resume and segment[0] - current.end < resume:
                current.segments.append(segment)
                continue
        if not responses or answering != answered[-1]:
            responses.append(Response(turn_id(answering)))
            answered.append(answering)
        responses[-1].segments.append(segment)
    return responses


def segment_call(user: PcmAudio, agent: PcmAudio, *,
                 turn_gap_ms: float = DEFAULT_TURN_GAP_MS) -> CallTurns:
    """The turns of a call whose legs are ``user`` and ``agent`` (one timeline, one rate)."""
    rate = user.sample_rate_hz
    length = user.samples.shape[0]
    user_segments, agent_segments = leg_speech(user), leg_speech(agent)
    grouped = _user_turns(user_segments, agent_segments, gap=int(turn_gap_ms * rate / 1000))
    turns = [UserTurn(turn_id(index), segments)
             for index, segments in enumerate(grouped, start=1)]
    for index, turn in enumerate(turns):
        turn.audio_start = turn.speech_start
        turn.audio_end = turns[index + 1].speech_start if index + 1 < len(turns) else length

    ordered = _responses(agent_segments, [turn.speech_start for turn in turns],
                         resume=int(RESUME_GAP_MS * rate / 1000))
    for turn in turns:
        sounding = next((r for r in ordered if r.start < turn.speech_start < r.end), None)
        if sounding is not None:
            turn.barge_in_of = sounding.turn_id
            turn.after_product_audio_samples = turn.speech_start - sounding.start
    return CallTurns(turns, ordered, length, rate)
