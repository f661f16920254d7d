"""Selectivity probes, self-interruption and double talk: pure functions of the recording.

Definitions (docs/probes.md has them with examples; times on the listener timeline):

* The product's **speech** is voice activity on its placed channel (``speech_segments_ns``);
  its **talk spurts** join segments separated by pauses shorter than the listener's
  ``reply_end_hangover_ms`` (the same pause after which the simulated user takes a reply to be
  over).
* A **probe** (``probe.started``) finds the product *speaking* when its onset falls inside a
  talk spurt. The product **stopped** for it when the probed response ended ``cancelled`` or the
  product reported an interruption after the onset (``stop_evidence`` ``cancelled`` /
  ``interruption``), or when its talk spurt ended within ``STOP_WINDOW_MS`` of the onset
  (``speech_end``). ``stop_ms`` is the onset to the end of the product's audible speech (the
  last speech segment that began before the wire's cancellation, or the spurt's end).
  A reply that ends on its own within the window after a probe reads as a stop: aim probes at
  least that far before the end of a reply.
* A **self-interruption** is the product stopping (a cancelled response or an interruption
  event) or starting a talk spurt (answering) when no user speech and no probe sound was on the
  line during the ``SELF_LOOKBACK_MS`` before it (stops), or ended within
  ``ANSWER_LOOKBACK_MS`` before it (answers): only its own echo, or nothing, can have caused it.
  An answer starts a talk spurt, or is the first speech after a ``response.done`` (a response
  that follows the previous one closely); the call's first speech (an opening) is no answer.
  Answers are looked for only on a call with an echo (``environment.echo``): without one, a
  product that takes more than ``ANSWER_LOOKBACK_MS`` to answer, or speaks twice in a row on
  purpose, would read as answering nothing. A barge-in counts as the user acting (in
  ``client`` mode the evaluator's cancel precedes the barge-in's speech).
* **Double talk** of a response: its speech heard while the user's speech was on the line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..artifacts import ProbeOutcome, SelfInterruption
from ..recording import (
    EnvironmentEcho,
    Event,
    EventType,
    ProbeMarked,
    ProbeSkipped,
    Recording,
    ResponseDone,
    UserAudio,
    samples_to_ns,
)

#: a talk spurt ending this soon after a probe's onset is a stop
STOP_WINDOW_MS = 2000.0
#: a stop with no user speech or probe sound on the line this long before it is self-caused
SELF_LOOKBACK_MS = 1500.0
#: a talk spurt with no user speech or probe sound ending this long before it answers nothing
ANSWER_LOOKBACK_MS = 3000.0
DEFAULT_HANGOVER_MS = 700.0

Interval = tuple[int, int]


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def talk_spurts(segments: Sequence[Interval], *, pause_ns: int) -> list[Interval]:
    """Speech segments joined across pauses shorter than ``pause_ns``."""
    spurts: list[list[int]] = []
    for start, end in segments:
        if spurts and start - spurts[-1][1] < pause_ns:
            spurts[-1][1] = max(spurts[-1][1], end)
        else:
            spurts.append([start, end])
    return [(a, b) for a, b in spurts]


def overlap_ns(intervals: Sequence[Interval], others: Sequence[Interval]) -> int:
    """Total time both an interval of ``intervals`` and one of ``others`` cover (each list
    made of disjoint intervals)."""
    total = 0
    for a, b in intervals:
        for c, d in others:
            total += max(0, min(b, d) - max(a, c))
    return total


@dataclass
class _Probe:
    probe_id: str
    kind: str
    response_turn_id: str
    turn_id: str | None
    label: str
    onset: int
    end: int | None
    after_ms: float | None
    sent: int  # when the frame carrying the onset was sent (the product could hear it)
    played: bool = True


def _probes(recording: Recording) -> list[_Probe]:
    found: dict[str, _Probe] = {}
    for event in recording.events:
        if event.type is EventType.PROBE_STARTED:
            marked = ProbeMarked.of(event)
            found[str(marked.probe_id)] = _Probe(
                str(marked.probe_id), str(marked.kind), str(marked.response_turn_id),
                event.turn_id, marked.label or "", event.listener_ns, None,
                marked.after_product_speech_ms,
                event.listener_ns - int(float(marked.frame_lead_ms or 0.0) * 1e6))
        elif event.type is EventType.PROBE_ENDED:
            marked = ProbeMarked.of(event)
            if marked.probe_id in found:
                found[marked.probe_id].end = event.listener_ns
        elif event.type is EventType.PROBE_SKIPPED:
            skipped = ProbeSkipped.of(event)
            found[str(skipped.probe_id)] = _Probe(
                str(skipped.probe_id), str(skipped.kind), str(skipped.response_turn_id), None,
                skipped.label or "", event.listener_ns, None, skipped.after_product_speech_ms,
                event.listener_ns, played=False)
    return list(found.values())


def probe_sounds(recording: Recording) -> list[Interval]:
    """Where the noise probes' sounds were on the line (listener ns)."""
    return sorted((p.onset, p.end if p.end is not None else p.onset)
                  for p in _probes(recording) if p.kind == "noise" and p.played)


#: a cancelled response and the interruption the product reports with it are one stop
SAME_STOP_MS = 500.0


def _cancellations(recording: Recording) -> list[tuple[int, str | None, str]]:
    """(listener ns, turn, evidence) of every response the product ended cancelled and every
    interruption it reported (one per stop: the first evidence of it)."""
    found: list[tuple[int, str | None, str]] = []
    for event in recording.events:
        if event.source != "product":
            continue
        if event.type is EventType.PRODUCT_RESPONSE_DONE \
                and ResponseDone.of(event).status == "cancelled":
            evidence = "cancelled"
        elif event.type is EventType.PRODUCT_INTERRUPTION:
            evidence = "interruption"
        else:
            continue
        if found and found[-1][1] == event.turn_id \
                and event.listener_ns - found[-1][0] <= SAME_STOP_MS * 1e6:
            continue
        found.append((event.listener_ns, event.turn_id, evidence))
    return found


def line_frame_ns(recording: Recording) -> int:
    """The live line's frame (0 without one): a frame carries its samples at once, so the
    product can hear a sound up to a frame before its place on the timeline."""
    return max((samples_to_ns(e.audio_samples) for e in recording.of_type(EventType.USER_AUDIO)
                if UserAudio.of(e).line), default=0)


def probe_outcomes(recording: Recording, speech: Sequence[Interval], *,
                   hangover_ms: float = DEFAULT_HANGOVER_MS) -> list[ProbeOutcome]:
    """What the product did about each probe of the recording (see the module docstring)."""
    spurts = talk_spurts(speech, pause_ns=int(hangover_ms * 1e6))
    cancels = _cancellations(recording)
    window = int(STOP_WINDOW_MS * 1e6)
    outcomes = []
    for probe in _probes(recording):
        onset = probe.sent  # the product can react from here
        spurt = next(((a, b) for a, b in spurts if a <= onset < b), None)
        common = {"probe_id": probe.probe_id, "kind": probe.kind,
                  "response_turn_id": probe.response_turn_id, "turn_id": probe.turn_id,
                  "label": probe.label, "onset_ms": _ms(probe.onset), "sent_ms": _ms(onset),
                  "end_ms": _ms(probe.end), "after_product_speech_ms": probe.after_ms,
                  "played": probe.played}
        if spurt is None or not probe.played:
            outcomes.append(ProbeOutcome(**common, product_speaking=False))
            continue
        cancel = next(((at, evidence) for at, turn, evidence in cancels
                       if turn == probe.response_turn_id and onset <= at <= spurt[1] + window),
                      None)
        stop_end: int | None = None
        evidence: str | None = None
        if cancel is not None:
            evidence = cancel[1]
            stop_end = max([onset] + [min(b, spurt[1]) for a, b in speech
                                      if spurt[0] <= a < max(cancel[0], onset) and b > onset])
        elif spurt[1] - onset <= window:
            evidence, stop_end = "speech_end", spurt[1]
        stopped = stop_end is not None
        after = sum(max(0, min(b, spurt[1]) - max(a, onset)) for a, b in speech
                    if b > onset and a < spurt[1])
        outcomes.append(ProbeOutcome(
            **common, product_speaking=True, stopped=stopped,
            stop_ms=_ms(stop_end - onset) if stop_end is not None else None,
            stop_evidence=evidence,
            speech_after_onset_ms=_ms(after),
            correct=stopped if probe.kind == "interruption" else not stopped))
    return outcomes


def self_interruptions(recording: Recording, speech: Sequence[Interval],
                       user_speech: Sequence[Interval], *,
                       hangover_ms: float = DEFAULT_HANGOVER_MS) -> list[SelfInterruption]:
    """Stops and answers nothing on the line can explain (see the module docstring);
    ``user_speech``: where the user's speech was, every turn (listener ns)."""
    lead = line_frame_ns(recording)
    # the user's acts: speech and probe sounds (a frame early: it arrives at once), and
    # barge-ins (in client mode the evaluator's own cancel precedes the barge-in speech)
    barge_ins = [(e.listener_ns, e.listener_ns) for e in recording.of_type(EventType.USER_BARGE_IN)]
    active = sorted([*((a - lead, b) for a, b in [*user_speech, *probe_sounds(recording)]),
                     *barge_ins])
    spurts = talk_spurts(speech, pause_ns=int(hangover_ms * 1e6))
    stop_lookback = int(SELF_LOOKBACK_MS * 1e6)
    answer_lookback = int(ANSWER_LOOKBACK_MS * 1e6)

    def quiet(since: int, until: int) -> bool:
        return not any(a <= until and b >= since for a, b in active)

    found: list[SelfInterruption] = []
    for at, turn, _ in _cancellations(recording):
        if quiet(at - stop_lookback, at):
            spurt = next(((a, b) for a, b in spurts if a <= at <= b + stop_lookback), None)
            found.append(SelfInterruption(
                kind="stopped", at_ms=_ms(at), turn_id=turn,
                after_product_speech_ms=_ms(min(at, spurt[1]) - spurt[0]) if spurt else None,
                lookback_ms=SELF_LOOKBACK_MS))
    if echo_of(recording) is None:
        return found  # without an echo, nothing can have made it answer: see the docstring
    for start, previous_end in answer_onsets(recording, speech, spurts):
        if quiet(start - answer_lookback, start):
            found.append(SelfInterruption(
                kind="answered", at_ms=_ms(start), turn_id=_turn_at(recording, start),
                silence_before_ms=_ms(max(0, start - previous_end)),
                lookback_ms=ANSWER_LOOKBACK_MS))
    return sorted(found, key=lambda s: s.at_ms)


def answer_onsets(recording: Recording, speech: Sequence[Interval],
                  spurts: Sequence[Interval]) -> list[tuple[int, int]]:
    """(onset, end of the speech before it) of every product answer but the call's first
    speech: each talk spurt's start, and the first speech after each ``response.done`` (a new
    response, even one that follows the last one closely)."""
    if not speech:
        return []
    onsets = {a for a, _ in spurts[1:]}
    for event in recording.of_type(EventType.PRODUCT_RESPONSE_DONE):
        after = next((a for a, _ in speech if a >= event.listener_ns), None)
        if after is not None and after > speech[0][0]:
            onsets.add(after)
    found: list[tuple[int, int]] = []
    for onset in sorted(onsets):
        previous = max((b for a, b in speech if b <= onset), default=None)
        if previous is not None and not any(abs(onset - o) < 1e8 for o, _ in found):
            found.append((onset, previous))
    return found


def _turn_at(recording: Recording, listener_ns: int) -> str | None:
    """The turn of the product audio heard at ``listener_ns``."""
    for chunk in recording.timeline.heard:
        if samples_to_ns(chunk.start) <= listener_ns < samples_to_ns(chunk.end):
            return chunk.event.turn_id
    return None


def echo_of(recording: Recording) -> dict[str, object] | None:
    """The call's echo path as recorded (``environment.echo``), if it had one."""
    event: Event | None = next((e for e in recording.events
                                if e.type is EventType.ENVIRONMENT_ECHO), None)
    return EnvironmentEcho.of(event).recorded() if event is not None else None
