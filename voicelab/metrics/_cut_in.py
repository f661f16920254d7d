"""Cut-ins: the product's speech beginning while a hesitating user has not finished their turn.

A hesitation turn (a script turn with pauses, docs/endpointing.md) records where its pauses are
in the turn's audio (``user.turn_started`` ``pauses``); this module places them on the listener
timeline and compares them with the product's speech as the user hears it: the speech segments
of the placed product channel (voice activity, each edge moved to its first and last audible
sample), each heard ``to_user_delay`` later. All pure functions of the recording.

* ``product_cut_in``: a product speech segment begins after the turn's speech began and before
  its last piece of speech ended (a reply already under way when the user started is not one);
* ``cut_in_pause_index``: the pause it began in or after (0-based; None: during the first
  piece, before any pause);
* ``cut_in_after_pause_ms``: how long after that pause began (longer than the pause: it began
  in the next piece of speech, the product reacting late to the pause);
* ``answer_after_cut_in_ms``: the latency of the product's answer after the user finished: its
  first speech after the user's end that is not the cut-in reply running on (the cut-in reply
  is the product's speech from the cut-in on, through silences shorter than the listener's
  ``reply_end_hangover_ms``, the simulated user's own rule for a reply that is over); ``None``
  when the product said nothing after the cut-in reply. The turn's ``response_latency_ms`` and
  ``first_audio_latency_ms`` are ``None``: what follows the user's end on the line is first the
  cut-in reply still playing (a word onset inside it is no answer; its packets are no first
  audio), so a cut-into turn has no latency to summarize or to pass a latency limit with;
* ``user_pauses_phone_band_ms``: each pause as an 8 kHz phone line carries it: the silence
  around the pause in the turn's audio as sent, kept to the telephone band (300-3400 Hz). The
  edges of the neighbouring words that lie outside the band fall silent too, so it is the
  nominal pause plus that much (``None`` for a pause noise fills).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..audio import PcmAudio, silence_around, telephone_band
from ..recording import samples_to_ns

Span = tuple[int, int]


def pauses_on_timeline(pauses: Sequence[Sequence[int]] | None, *, speech_start_sample: int | None,
                       line_speech_start_ns: int | None, placed_start_ns: int | None
                       ) -> list[Span]:
    """A turn's pauses (samples into its audio) on the listener timeline (ns): anchored on the
    live line's exact speech start when there is one, else where the turn's audio was placed."""
    if not pauses:
        return []
    if line_speech_start_ns is not None and speech_start_sample is not None:
        anchor = line_speech_start_ns - samples_to_ns(int(speech_start_sample))
    elif placed_start_ns is not None:
        anchor = placed_start_ns
    else:
        return []
    return [(anchor + samples_to_ns(int(start)), anchor + samples_to_ns(int(end)))
            for start, end in pauses]


def cut_in_fields(pauses_ns: Sequence[Span], *, speech_start_ns: int | None,
                  speech_end_ns: int | None, product_speech_ns: Sequence[Span],
                  heard_delay_ns: int = 0, converting_ns: int = 0,
                  reply_end_hangover_ns: int = 0) -> dict[str, Any]:
    """The cut-in metrics of one hesitation turn (TurnMetrics fields); {} for a turn without
    pauses or whose speech is not on the timeline. ``product_speech_ns``: the product's speech
    segments on the listener timeline; ``heard_delay_ns``: a ``to_user`` line's constant delay
    (the user hears the product that much later); ``converting_ns``: the adapter's own
    conversion delay toward the product (not the product's: taken out, as for latency);
    ``reply_end_hangover_ns``: the silence after which the listener takes a reply as over
    (where the cut-in reply ends, for ``answer_after_cut_in_ms``)."""
    if not pauses_ns or speech_start_ns is None or speech_end_ns is None:
        return {}
    lengths = [round((end - start) / 1e6, 3) for start, end in pauses_ns]
    # the product's speech where the user's timeline puts it (as for response latency)
    heard = sorted((start + heard_delay_ns - converting_ns, end + heard_delay_ns - converting_ns)
                   for start, end in product_speech_ns)
    onset = next((start for start, _ in heard if speech_start_ns < start < speech_end_ns), None)
    if onset is None:
        return {"user_pauses_ms": lengths, "product_cut_in": False}
    index = max((i for i, (start, _) in enumerate(pauses_ns) if start <= onset), default=None)
    fields: dict[str, Any] = {"user_pauses_ms": lengths, "product_cut_in": True,
                              "cut_in_pause_index": index}
    if index is not None:
        fields["cut_in_after_pause_ms"] = round((onset - pauses_ns[index][0]) / 1e6, 3)
    answer = answer_onset(heard, cut_in_ns=onset, speech_end_ns=speech_end_ns,
                          reply_end_hangover_ns=reply_end_hangover_ns)
    fields["answer_after_cut_in_ms"] = round((answer - speech_end_ns) / 1e6, 3) \
        if answer is not None else None
    return fields


def answer_onset(speech_ns: Sequence[Span], *, cut_in_ns: int, speech_end_ns: int,
                 reply_end_hangover_ns: int) -> int | None:
    """Where the product's answer to a cut-into turn begins: its first speech segment (of the
    sorted ``speech_ns``) starting at or after the user's end that is not the cut-in reply
    running on. The cut-in reply is the speech from the segment the cut-in began with, through
    silences shorter than ``reply_end_hangover_ns`` (a gap between its words at the moment the
    user finished is no end of it); the first segment after the user's end that follows the
    reply's last sound by the hangover or more answers. ``None``: nothing but the cut-in reply
    came after the user's end (or the answer followed it too closely to tell them apart)."""
    reply_end: int | None = None
    for start, end in speech_ns:
        if end <= cut_in_ns:
            continue
        if reply_end is not None and start >= speech_end_ns \
                and start - reply_end >= reply_end_hangover_ns:
            return start
        reply_end = end if reply_end is None else max(reply_end, end)
    return None


def pauses_through_phone_band(turn_audio: PcmAudio, pauses: Sequence[Sequence[int]]
                              ) -> list[float | None]:
    """Each pause (``[first silent sample, first sample of the next piece]`` in ``turn_audio``,
    the turn's audio as sent) as an 8 kHz phone line carries it: the silence around the pause's
    middle in the audio kept to the telephone band, ms (``None``: noise fills it)."""
    band = telephone_band(turn_audio.samples, sample_rate_hz=turn_audio.sample_rate_hz)
    rate = turn_audio.sample_rate_hz
    silences: list[float | None] = []
    for start, end in pauses:
        run = silence_around(band, (int(start) + int(end)) // 2)
        silences.append(round((run[1] - run[0]) * 1000 / rate, 3) if run is not None else None)
    return silences
