"""What the WebRTC stamp tests share (test_webrtc_backlog.py, test_webrtc_loop_stamped.py): a
stand-in for aioice's STUN protocol, whose transport's socket is what the kernel stamps are read
from, and a minimal RTP packet."""

from __future__ import annotations

import socket


class FakeStun:
    """Stands in for aioice's STUN protocol: its transport's socket is what the stamps read."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.transport = self

    def get_extra_info(self, name: str) -> object:
        return self.sock

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        pass


def rtp(sequence: int) -> bytes:
    """An RTP packet (version 2, payload type 111, SSRC 77) of one byte, numbered ``sequence``."""
    return bytes([0x80, 111]) + sequence.to_bytes(2, "big") + bytes(4) + \
        (77).to_bytes(4, "big") + b"x"
