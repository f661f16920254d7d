"""Stepwise computations: long CPU work written as a generator that yields between steps.

The runner builds a trial's evidence on the event loop, where it must not hold the loop for
long (other trials' arrival timestamps are taken there). A function written as a generator of
steps runs to completion synchronously with :func:`run_steps`, or cooperatively with
:func:`arun_steps`, which lets the loop run between two steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

#: A computation that yields (nothing) between steps and returns its result.
Steps = Generator[None, None, T]


def run_steps(steps: Steps[T]) -> T:
    """Run every step now and return the result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def arun_steps(steps: Steps[T]) -> T:
    """Run the steps, letting the event loop run between them; return the result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)
