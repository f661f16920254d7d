"""The user's outbound line: 20 ms RTP packets paced in real time, and key presses among them.

Pacing follows the phone line of the Twilio adapter: slot ``n`` of the line is due ``n * 20 ms``
after the line started; a slot handed over late is sent at once to catch up, and one later than
:data:`CATCH_UP_NS` restarts the pacing from now (the RTP timestamp then jumps by the time the
line was silent, so the far end's playout stays true). Nothing sleeps in the caller's call.

Keys take the line's slots after what is already queued. By RFC 4733 a key of ``duration_ms``
is ``duration_ms / 20`` event packets, one a slot, all with the timestamp of the event's first
slot, the marker on the first, the growing duration in each, the last one (E bit) sent three
times, each with a new sequence number; the gap after it is silence. By SIP INFO the key's
request goes out at its first slot and its slots carry silence. Either way the audio's
timestamps stay continuous.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from ._codecs import (
    CLOCK_RATE_HZ,
    MAX_OPUS_PAYLOAD_BYTES,
    Codec,
    rtp_samples_per_frame,
    silence_payload,
)
from ._rtp import TelephoneEvent, event_code, pack_event, pack_rtp

FRAME_MS = 20
FRAME_NS = FRAME_MS * 1_000_000
FRAME_BYTES = 160  # a G.711 frame; an Opus packet's length varies
CATCH_UP_NS = 1_000_000_000
#: records of when packets left: about 33 minutes of 20 ms packets; later ones are counted only
MAX_SENT_RECORDS = 100_000
MAX_DIGIT_RECORDS = 1000
EVENT_VOLUME = 10  # -10 dBm0
END_REPEATS = 3
DIGITS = "0123456789*#ABCD"


@dataclass(slots=True)
class _Slot:
    due_ns: int
    timestamp: int
    frame: bytes | None = None  # audio (or silence) to send
    digit: str | None = None
    event_index: int = 0  # which slot of its key this is
    event_slots: int = 0  # how many slots the key has (0: not a key's slot)
    event_timestamp: int = 0


class RtpLine:
    """Queues the user's frames and keys and sends each when due (see the module docstring).

    ``send`` puts one packet on the wire and returns False once it cannot; the line is then
    :attr:`broken` and drops what it holds. ``send_info(digit, duration_ms)`` sends a key by
    SIP INFO. :attr:`sent_ns` holds the clock read just before each packet left (the first
    :data:`MAX_SENT_RECORDS`).
    """

    def __init__(self, *, send: Callable[[bytes], bool], clock_ns: Callable[[], int],
                 codec: Codec, payload_type: int, telephone_event: int | None,
                 dtmf: Literal["rfc4733", "info"],
                 send_info: Callable[[str, int], None], event_clock_hz: int = 8000) -> None:
        self._send = send
        self._clock_ns = clock_ns
        self.codec = codec
        self.payload_type = payload_type
        self.telephone_event = telephone_event
        self.event_clock_hz = event_clock_hz
        self._dtmf = dtmf
        self.dtmf = dtmf if telephone_event is not None else "info"
        #: slots dropped unsent because a re-INVITE changed the codec under them
        self.dropped_by_codec_change = 0
        self._send_info = send_info
        self._ssrc = secrets.randbits(32)
        self._sequence = secrets.randbits(16)
        self._next_timestamp = secrets.randbits(32)
        self._next_due_ns = 0
        self._queue: deque[_Slot] = deque()
        self._task: asyncio.Task[None] | None = None
        self._marker = True
        self.broken = False
        #: True while the far end's SDP says it does not want our media (it holds the call:
        #: its sendonly or inactive, RFC 3264 section 8.4); slots pass unsent
        self.muted = False
        self.muted_slots = 0
        #: the RTP timestamp and send stamp of the last audio packet (for RTCP sender reports)
        self.last_sent: tuple[int, int] | None = None
        self.packets_sent = 0
        self.bytes_sent = 0
        self.sent_ns: list[int] = []
        self.digits_sent: list[dict[str, JsonValue]] = []
        self._digit_record: dict[str, JsonValue] | None = None
        #: line slots keys took that the caller's audio has not yet given back: that many of
        #: the next frames handed over are dropped, so the line keeps the caller's time
        self._slots_owed = 0
        self.frames_replaced_by_keys = 0

    def use_codec(self, codec: Codec, payload_type: int, telephone_event: int | None, *,
                  event_clock_hz: int) -> None:
        """The far end's SDP settled (again): a new codec drops what is queued in the old one
        (a few packets at most: the line is handed over in real time), and its audio starts a
        new talk spurt."""
        if codec != self.codec:
            self.dropped_by_codec_change += len(self._queue)
            self._queue.clear()
            self._slots_owed = 0
            self._marker = True
        self.codec, self.payload_type = codec, payload_type
        self.telephone_event, self.event_clock_hz = telephone_event, event_clock_hz
        self.dtmf = self._dtmf if telephone_event is not None else "info"

    def queue_frames(self, frames: Sequence[bytes]) -> None:
        """Queue 20 ms payloads of the negotiated codec (160 bytes of G.711, or one Opus
        packet)."""
        for frame in frames:
            if self.codec == "opus" and not 0 < len(frame) <= MAX_OPUS_PAYLOAD_BYTES:
                raise ValueError(f"an Opus packet is 1-{MAX_OPUS_PAYLOAD_BYTES} bytes, "
                                 f"not {len(frame)}")
            if self.codec != "opus" and len(frame) != FRAME_BYTES:
                raise ValueError(f"a frame is {FRAME_BYTES} bytes (20 ms of G.711), "
                                 f"not {len(frame)}")
        self._restart_if_paused()
        for frame in frames:
            if self._slots_owed:  # this frame's time went to a key
                self._slots_owed -= 1
                self.frames_replaced_by_keys += 1
                continue
            self._queue.append(self._slot(frame=frame))
        self._start()

    def queue_digits(self, digits: str, *, duration_ms: int = 100, gap_ms: int = 60) -> None:
        """Queue keys after what is queued, each ``duration_ms`` long, ``gap_ms`` apart.

        Keys take the line's time, as a phone sends a key instead of its microphone's sound:
        the caller's audio handed over for the same stretch is dropped (``queue_frames``), so
        what follows the keys leaves when the caller's line says it is due, not later by the
        keys' length."""
        if any(d.upper() not in DIGITS for d in digits) or not 40 <= duration_ms <= 5000 \
                or not 0 <= gap_ms <= 5000:
            raise ValueError("keys are 0-9 * # A-D, 40-5000 ms long, gaps of 0-5000 ms")
        self._restart_if_paused()
        silence = silence_payload(self.codec)
        slots = max(1, round(duration_ms / FRAME_MS))
        for digit in digits.upper():
            first = self._next_timestamp
            for index in range(slots):
                self._queue.append(self._slot(
                    frame=silence if self.dtmf == "info" else None, digit=digit,
                    event_index=index, event_slots=slots, event_timestamp=first))
            for _ in range(round(gap_ms / FRAME_MS)):
                self._queue.append(self._slot(frame=silence))
            self._slots_owed += slots + round(gap_ms / FRAME_MS)
        self._start()

    def stop(self) -> None:
        """The call is over: what is still queued is never sent."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._queue.clear()

    @property
    def ssrc(self) -> int:
        return self._ssrc

    @property
    def pending(self) -> int:
        """Slots still queued."""
        return len(self._queue)

    def _restart_if_paused(self) -> None:
        now = self._clock_ns()
        if self._next_due_ns < now - CATCH_UP_NS:
            if self._next_due_ns:  # a pause: the timestamp moves on by the silent time
                self._next_timestamp += (now - self._next_due_ns) \
                    * CLOCK_RATE_HZ[self.codec] // 1_000_000_000
                self._marker = True
            self._next_due_ns = now

    def _slot(self, *, frame: bytes | None, digit: str | None = None, event_index: int = 0,
              event_slots: int = 0, event_timestamp: int = 0) -> _Slot:
        slot = _Slot(self._next_due_ns, self._next_timestamp, frame, digit, event_index,
                     event_slots, event_timestamp)
        self._next_due_ns += FRAME_NS
        self._next_timestamp = (self._next_timestamp + rtp_samples_per_frame(self.codec)) \
            & 0xFFFFFFFF
        return slot

    def _start(self) -> None:
        if self._queue and not self.broken and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name="voicelab-sip-line")

    async def _run(self) -> None:
        while self._queue:
            delay = self._queue[0].due_ns - self._clock_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            slot = self._queue.popleft()
            if not self._send_slot(slot):
                self.broken = True
                self._queue.clear()
                return

    def _send_slot(self, slot: _Slot) -> bool:
        if self.muted:  # the far end holds the call: the slot's time passes in silence
            self.muted_slots += 1
            return True
        if slot.digit is not None and slot.event_index == 0:
            self._digit_started(slot.digit, slot.event_slots)
        if slot.frame is not None:
            ok = self._packet(self.payload_type, slot.timestamp, slot.frame, self._marker)
            self._marker = False
        else:
            ok = self._event_packets(slot)
        if slot.digit is not None and slot.event_index == slot.event_slots - 1:
            if self._digit_record is not None:
                self._digit_record["end_ns"] = self._clock_ns()
        return ok

    def _digit_started(self, digit: str, slots: int) -> None:
        self._digit_record = None
        if len(self.digits_sent) < MAX_DIGIT_RECORDS:
            self._digit_record = {"digit": digit, "method": self.dtmf,
                                  "start_ns": self._clock_ns(), "end_ns": None}
            self.digits_sent.append(self._digit_record)
        if self.dtmf == "info":
            self._send_info(digit, slots * FRAME_MS)

    def _event_packets(self, slot: _Slot) -> bool:
        assert slot.digit is not None and self.telephone_event is not None
        last = slot.event_index == slot.event_slots - 1
        event = TelephoneEvent(event=event_code(slot.digit), end=last, volume=EVENT_VOLUME,
                               duration=(slot.event_index + 1) * self.event_clock_hz
                               * FRAME_MS // 1000)
        payload = pack_event(event)
        for _ in range(END_REPEATS if last else 1):
            if not self._packet(self.telephone_event, slot.event_timestamp, payload,
                                slot.event_index == 0):
                return False
        self._marker = True  # the audio after a key starts a new talk spurt
        return True

    def _packet(self, payload_type: int, timestamp: int, payload: bytes, marker: bool) -> bool:
        packet = pack_rtp(payload_type=payload_type, sequence=self._sequence,
                          timestamp=timestamp, ssrc=self._ssrc, payload=payload, marker=marker)
        self._sequence = (self._sequence + 1) & 0xFFFF
        sent_ns = self._clock_ns()
        if not self._send(packet):
            return False
        if len(self.sent_ns) < MAX_SENT_RECORDS:
            self.sent_ns.append(sent_ns)
        if payload_type == self.payload_type:
            self.last_sent = (timestamp, sent_ns)
        self.packets_sent += 1
        self.bytes_sent += len(payload)
        return True
