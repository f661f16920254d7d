"""argparse types for numeric options: each converts and checks its range at the door, so a
value that is no number (``--seed forty-two``, ``nan``, ``1e309``) or out of range is a usage
error (exit 2, one line) before any command runs, never an exception deep inside one.

Every numeric option of every sub-command takes one of these (a unit test walks the parser).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WholeNumber:
    """An integer from ``low`` to ``high`` (inclusive)."""

    low: int
    high: int
    #: marks an argparse type that takes a number (the walk over the parser looks for it)
    numeric = True

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{self._must()}, got {text!r}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"{self._must()}, got {value}")
        return value

    def _must(self) -> str:
        return f"must be a whole number from {self.low:,} to {self.high:,}"

    def __repr__(self) -> str:  # argparse names the type in some messages
        return "whole number"


@dataclass(frozen=True)
class RealNumber:
    """A finite number above ``low`` (or at it, ``low_inclusive``) and at most ``high``
    (below it unless ``high_inclusive``)."""

    low: float
    high: float = math.inf
    low_inclusive: bool = False
    high_inclusive: bool = True
    #: how the range reads in the error (default: from the bounds)
    described: str | None = None
    numeric = True

    def __call__(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {self._range()}, got {text!r}") from None
        above = value >= self.low if self.low_inclusive else value > self.low
        below = value <= self.high if self.high_inclusive else value < self.high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(f"must be {self._range()}, got {text.strip()}")
        return value

    def _range(self) -> str:
        if self.described is not None:
            return self.described
        low = f"{'at least' if self.low_inclusive else 'more than'} {self.low:,g}"
        if math.isinf(self.high):
            return f"a number {low}"
        high = f"{'at most' if self.high_inclusive else 'less than'} {self.high:,g}"
        return f"a number {low} and {high}"

    def __repr__(self) -> str:
        return "number"


#: A probability-like fraction strictly between 0 and 1 (a confidence level).
FRACTION = RealNumber(0.0, 1.0, high_inclusive=False, described="between 0 and 1")
#: An allowed increase or drop: 0 or more, finite.
NON_NEGATIVE = RealNumber(0.0, low_inclusive=True)
#: A seed for numpy's generators, which take no negative number.
SEED = WholeNumber(0, 2**63 - 1)
