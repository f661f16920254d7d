"""Retransmission over UDP (RFC 3261 17.1.2.2 and 17.2.1): a message is sent again after T1,
then at doubling intervals capped at T2, until it is answered or 64*T1 have passed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

T1_SECONDS, T2_SECONDS, TIMEOUT_SECONDS = 0.5, 4.0, 32.0


async def resend(send: Callable[[bytes], None], data: bytes, *,
                 waiting: Callable[[], bool]) -> bool:
    """Send ``data`` again while ``waiting()``; True when it timed out still waiting."""
    interval, waited = T1_SECONDS, 0.0
    while waited < TIMEOUT_SECONDS:
        await asyncio.sleep(interval)
        waited += interval
        if not waiting():
            return False
        send(data)
        interval = min(interval * 2, T2_SECONDS)
    return waiting()
