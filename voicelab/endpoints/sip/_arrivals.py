"""The product's RTP in arrival order -> canonical PCM: each packet decoded by its negotiated
codec, loss concealed as silence, late packets dropped, silence between replies withheld.

Pure (no sockets, no clocks): the adapter feeds it the packets in the order they arrived.
"""

from __future__ import annotations

import numpy as np

from ...audio import PcmAudio
from .._silence_gate import SilenceGate
from ._codecs import Codec, WireDecoder, decoder_for
from ._types import RtpPacket

#: RFC 3551's static payload types of the codecs a call may carry
STATIC_CODECS: dict[int, Codec] = {0: "pcmu", 8: "pcma"}
#: A sequence gap up to this many packets is concealed with silence; a longer one is the far
#: end starting over (a new talk spurt after silence suppression, a re-INVITE).
MAX_CONCEALED_PACKETS = 10
class Arrivals:
    """The product's RTP in arrival order -> canonical PCM, with loss concealed as silence.

    Packets come in the negotiated codec (the media receiver drops other payload types); one
    of another payload type (a re-INVITE changed the codec) starts a new decoder. A payload the codec cannot decode
    (garbage from a hostile far end) is counted and skipped, never raised."""

    def __init__(self) -> None:
        #: the codec of each payload type: G.711's static ones, and what the call negotiated
        self._codecs: dict[int, Codec] = dict(STATIC_CODECS)
        self._payload_type: int | None = None
        self._decoder: WireDecoder | None = None
        self._next_sequence: int | None = None
        self._silence = SilenceGate()
        self.concealed_packets = 0
        self.late_packets = 0
        self.undecodable_packets = 0

    @property
    def silence_withheld(self) -> int:
        """Silent packets between replies, counted but not delivered."""
        return self._silence.withheld

    def use(self, codec: Codec, payload_type: int) -> None:
        """``payload_type`` carries ``codec`` (what the call negotiated, maybe dynamic)."""
        self._codecs[payload_type] = codec

    def decode(self, packet: RtpPacket) -> bytes | None:
        """The canonical PCM bytes ``packet`` (and any loss just before it) gives, or None
        for a late or undecodable packet, one of a payload type this adapter does not decode,
        or silence between replies."""
        codec = self._codecs.get(packet.payload_type)
        if codec is None:
            return None
        if packet.payload_type != self._payload_type or self._decoder is None:
            self._payload_type, self._next_sequence = packet.payload_type, None
            self._decoder = decoder_for(codec)  # a new codec (a re-INVITE): a new decoder
        decoder = self._decoder
        gap = 0
        if self._next_sequence is not None:
            gap = (packet.sequence - self._next_sequence) & 0xFFFF
            if gap >= 0x8000:  # behind what was played already
                self.late_packets += 1
                return None
        self._next_sequence = (packet.sequence + 1) & 0xFFFF
        pcm = decoder.decode(packet.payload)
        if pcm is None:
            self.undecodable_packets += 1
            return None
        if 0 < gap <= MAX_CONCEALED_PACKETS:
            self.concealed_packets += gap
            pcm = np.concatenate([decoder.silence(gap), pcm])
        if not self._silence.admits(pcm, packet.received_ns):
            return None
        return PcmAudio(pcm).to_bytes()
