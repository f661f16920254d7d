"""Key presses (DTMF) and what the product did about them: the figures of an IVR caller.

A key press is a user turn's ``user.dtmf`` events; it is timed from the first key's stamp (the
moment the evaluator handed the keys to the adapter, which sends them after the line audio it
already holds: at most one line frame later, docs/ivr.md). Each press answers one product
response, its *prompt*: the response it barged into (a key barge-in), else the response heard
last before the keys. The figures go on the prompt's row of voice-metrics.json (a prompt is
there whether or not the product answered the keys), beside ``interruption_stop_latency_ms``
for a spoken barge-in:

* ``key_to_speech_ms``: the first key to the onset of the product's next speech as heard (the
  speech of the response to the keys' turn; ``None``: the product never spoke again);
* ``key_stop_latency_ms`` (a key barge-in): the first key to the end of the prompt's last
  audible sample, measured as a spoken barge-in's stop latency is (0: nothing audible after).

Both rest on the prompt's arrival stamps as every timing figure of the row does: the row's
``stamp_error_bound_ms`` and ``timing_degraded`` state their error.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..recording import Event, EventType, HeardResponse, UserDtmf, UserTurnStarted
from ._placement import audible_extent_ns


@dataclass(frozen=True)
class KeyPress:
    """The keys one user turn pressed (ns on the listener timeline)."""

    turn_id: str
    digits: str
    #: when the first key was handed to the adapter
    at_ns: int
    #: the response the keys answer (barged into, or heard last before them)
    prompt_turn_id: str
    barge_in: bool


def key_presses(events: Iterable[Event], responses: Mapping[str, HeardResponse]
                ) -> list[KeyPress]:
    """Every user turn's key press, in order, with the prompt it answers; a press before any
    product response was heard answers none and is left out (it has no row to go on)."""
    barged: dict[str, str] = {}
    first_ns: dict[str, int] = {}
    digits: dict[str, list[str]] = {}  # joined once: a bundle read back may hold many keys
    for event in events:
        if event.turn_id is None:
            continue
        if event.type == EventType.USER_TURN_STARTED:
            turn = UserTurnStarted.of(event)
            if turn.dtmf and turn.barge_in_of:
                barged[event.turn_id] = turn.barge_in_of
        elif event.type == EventType.USER_DTMF:
            first_ns.setdefault(event.turn_id, event.listener_ns)
            digits.setdefault(event.turn_id, []).append(UserDtmf.of(event).digits or "")
    started = sorted((playback.start_ns, turn_id) for turn_id, playback in responses.items()
                     if playback.start_ns is not None)
    presses = []
    for turn_id, at_ns in first_ns.items():
        prompt = barged.get(turn_id) or _heard_last(started, at_ns)
        if prompt is not None:
            presses.append(KeyPress(turn_id, "".join(digits[turn_id]), at_ns, prompt,
                                    turn_id in barged))
    return presses


def _heard_last(started: Sequence[tuple[int, str]], at_ns: int) -> str | None:
    """The response that began to sound last at or before ``at_ns`` (``started``: each
    response's start and turn, sorted)."""
    position = bisect_right(started, (at_ns, "\uffff"))
    return started[position - 1][1] if position else None


def key_to_speech_ns(key: KeyPress, reply_span: tuple[int, int] | None,
                     speech: Sequence[tuple[int, int]], *, heard_delay_ns: int) -> int | None:
    """The first key to the onset of the product's speech in the reply to the keys' turn
    (``reply_span``: where that reply sounds; ``None``: the product did not answer)."""
    if reply_span is None:
        return None
    onset = next((start for start, end in speech
                  if start >= key.at_ns and start < reply_span[1] and end > reply_span[0]),
                 None)
    return None if onset is None else onset + heard_delay_ns - key.at_ns


def key_stop_ns(key: KeyPress, prompt_span: tuple[int, int] | None,
                product_samples: np.ndarray) -> int | None:
    """A key barge-in: the first key to the end of the prompt's last audible sample after it
    (``None``: not a barge-in, or the prompt was never heard)."""
    if not key.barge_in or prompt_span is None:
        return None
    heard = audible_extent_ns(product_samples, start_ns=max(key.at_ns, prompt_span[0]),
                              end_ns=prompt_span[1])
    return max(0, heard[1] - key.at_ns) if heard else 0
