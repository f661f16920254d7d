"""Hesitations inside a script turn: where the user stops speaking mid-turn, and for how long.

A turn's ``response`` may hold pause markers between its words::

    response: "My account number is {pause: 1.2} 4 4 7 1"

``{pause: S}`` is a pause of S seconds. A bare ``{pause}`` takes its length from the turn's
``pauses`` list, one entry per bare marker in order, so a sweep can vary the lengths with
``--set script.turns.0.pauses=[0.8]`` without retyping the text. A pause lasts more than 0 and
at most ``MAX_PAUSE_SECONDS``; text is needed on both sides of every marker (a pause before
the first word or after the last is only a slower start or a longer silence, not a hesitation).
A turn holds at most ``MAX_PAUSES_PER_TURN`` markers and a script ``MAX_PAUSES_PER_SCRIPT``;
that a turn, pauses and speech, fits in the scenario's ``max_time_seconds`` is checked when the
run is validated (it needs the speech provider: ``voicelab._validate``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The longest hesitation a turn may hold (longer is a different conversation: hold music).
MAX_PAUSE_SECONDS = 10.0
#: The most pause markers one turn may hold: a caller who stops more often in one breath is a
#: different test (several turns); 20 pauses of the longest already make 200 s of silence.
MAX_PAUSES_PER_TURN = 20
#: The most pause markers (and ``pauses`` lengths) a whole script may hold.
MAX_PAUSES_PER_SCRIPT = 100

_MARKER = re.compile(r"\{\s*pause\s*(?::\s*([^}]*?))?\s*\}", re.IGNORECASE)
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]*)?$|^\.[0-9]+$")


@dataclass(frozen=True)
class SpokenPieces:
    """A turn's text split at its pauses: ``pieces[i]`` is said, then ``pauses_seconds[i]`` of
    silence, then ``pieces[i + 1]``."""

    pieces: tuple[str, ...]
    pauses_seconds: tuple[float, ...]

    @property
    def text(self) -> str:
        """What the user says, the markers taken out."""
        return " ".join(self.pieces)


def check_pause_seconds(seconds: float) -> float:
    if not 0 < seconds <= MAX_PAUSE_SECONDS:
        raise ValueError(f"a pause lasts more than 0 and at most {MAX_PAUSE_SECONDS:g} seconds, "
                         f"got {seconds:g}")
    return float(seconds)


def has_pause_markers(text: str) -> bool:
    return _MARKER.search(text) is not None


def count_pause_markers(text: str) -> int:
    return sum(1 for _ in _MARKER.finditer(text))


def check_pause_count(count: int, *, most: int = MAX_PAUSES_PER_TURN, what: str = "a turn"
                      ) -> None:
    """Raise ValueError when ``what`` holds more than ``most`` pauses."""
    if count > most:
        raise ValueError(f"{what} holds {count:,} pauses; at most {most} are allowed (a "
                         f"longer hesitation is several turns)")


def split_pauses(text: str, pauses: list[float] | None = None) -> SpokenPieces:
    """``text`` split at its pause markers (see the module docstring); ``pauses``: the lengths
    of its bare ``{pause}`` markers. Raises ValueError naming the problem."""
    given = list(pauses or [])
    bare = 0
    pieces: list[str] = []
    lengths: list[float] = []
    position = 0
    for match in _MARKER.finditer(text):
        pieces.append(text[position:match.start()].strip())
        position = match.end()
        value = match.group(1)
        if value is None or not value.strip():
            if bare >= len(given):
                raise ValueError(f"the response has more bare {{pause}} markers than "
                                 f"'pauses' gives lengths ({len(given)})")
            lengths.append(check_pause_seconds(given[bare]))
            bare += 1
            continue
        if not _NUMBER.match(value.strip()):
            raise ValueError(f"a pause marker needs a number of seconds, as in "
                             f"{{pause: 1.2}}, got {match.group(0)!r}")
        lengths.append(check_pause_seconds(float(value)))
    pieces.append(text[position:].strip())
    if bare != len(given):
        raise ValueError(f"'pauses' gives {len(given)} length(s) but the response has {bare} "
                         f"bare {{pause}} marker(s)")
    if lengths and any(not piece for piece in pieces):
        raise ValueError("a pause marker needs words on both sides (a hesitation is inside a "
                         "turn)")
    return SpokenPieces(tuple(pieces), tuple(lengths))
