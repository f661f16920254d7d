"""How a call's SIP messages reach the caller: back to a UDP peer, or on a TCP connection."""

from __future__ import annotations

import asyncio
from typing import Protocol


class Link(Protocol):
    """What a call sends its messages through."""

    transport: str  # "UDP" | "TCP"
    local: tuple[str, int]

    def send(self, data: bytes) -> None: ...


class UdpLink:
    """A UDP peer (the source address of what it sent, as ``rport`` would have it)."""

    transport = "UDP"

    def __init__(self, udp: asyncio.DatagramTransport, peer: tuple[str, int],
                 local: tuple[str, int]):
        self.udp, self.peer, self.local = udp, peer, local

    def send(self, data: bytes) -> None:
        if not self.udp.is_closing():
            self.udp.sendto(data, self.peer)


class TcpLink:
    """A TCP connection: responses and the double's own requests go back on it."""

    transport = "TCP"

    def __init__(self, writer: asyncio.StreamWriter, local: tuple[str, int]):
        self.writer, self.local = writer, local

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)
