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
  in the next piece of speech, the product reacting late to the pause).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
                  heard_delay_ns: int = 0, converting_ns: int = 0) -> dict[str, Any]:
    """The cut-in metrics of one hesitation turn (TurnMetrics fields); {} for a turn without
    pauses or whose speech is not on the timeline. ``product_speech_ns``: the product's speech
    segments on the listener timeline; ``heard_delay_ns``: a ``to_user`` line's constant delay
    (the user hears the product that much later); ``converting_ns``: the adapter's own
    conversion delay toward the product (not the product's: taken out, as for latency)."""
    if not pauses_ns or speech_start_ns is None or speech_end_ns is None:
        return {}
    lengths = [round((end - start) / 1e6, 3) for start, end in pauses_ns]
    onset = next((heard for heard in (start + heard_delay_ns - converting_ns
                                      for start, _ in product_speech_ns)
                  if speech_start_ns < heard < speech_end_ns), None)
    if onset is None:
        return {"user_pauses_ms": lengths, "product_cut_in": False}
    index = max((i for i, (start, _) in enumerate(pauses_ns) if start <= onset), default=None)
    fields: dict[str, Any] = {"user_pauses_ms": lengths, "product_cut_in": True,
                              "cut_in_pause_index": index}
    if index is not None:
        fields["cut_in_after_pause_ms"] = round((onset - pauses_ns[index][0]) / 1e6, 3)
    return fields
