"""Which of a streaming product's silent packets reach the listener.

A product on a phone call or a WebRTC session streams all the time: encoded silence between its
replies. The listener plays chunks back to back (a chunk starts at the later of its arrival and
the end of the one before), so in an endless stream one late packet would delay every later
reply by as much, for the rest of the call. A packet whose audio is inaudible (peak at most
:data:`QUIET_PEAK`, -54 dBFS) more than :data:`QUIET_HANGOVER_NS` after the last audible one is
therefore counted but not delivered: pauses inside a reply still play, and each reply starts
where its first packet arrived. The wires that stream (``sip``, ``webrtc``) share this rule.
"""

from __future__ import annotations

import numpy as np

#: a decoded packet at most this loud is silence (-54 dBFS)
QUIET_PEAK = 64
#: silence is delivered this long after the last audible packet (pauses inside a reply)
QUIET_HANGOVER_NS = 600_000_000


class SilenceGate:
    """Decides, packet by packet in arrival order, whether its audio is delivered."""

    def __init__(self) -> None:
        self._audible_ns: int | None = None
        #: silent packets counted but not delivered
        self.withheld = 0

    def admits(self, pcm: np.ndarray, arrival_ns: int) -> bool:
        """Whether the audio ``pcm`` (int16) that arrived at ``arrival_ns`` is delivered."""
        if pcm.size and int(np.abs(pcm.astype(np.int32)).max()) > QUIET_PEAK:
            self._audible_ns = arrival_ns
            return True
        if self._audible_ns is None or arrival_ns - self._audible_ns > QUIET_HANGOVER_NS:
            self.withheld += 1
            return False
        return True
