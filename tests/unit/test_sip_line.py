"""The SIP call's pure parts: the paced line on a fake clock, call options, status mapping and
INFO key bodies. The fake clock is moved past each slot, so nothing waits on real time."""

import asyncio

import pytest

from voicelab.endpoints.sip._far_end import info_key
from voicelab.endpoints.sip._line import RtpLine
from voicelab.endpoints.sip._message import SipMessage
from voicelab.endpoints.sip._rtp import parse_event, parse_rtp
from voicelab.endpoints.sip._types import CallOptions, error_for_status

START_NS = 10**12


class Wire:
    def __init__(self, ok=True):
        self.now = START_NS
        self.packets = []
        self.infos = []
        self.ok = ok

    def clock(self):
        return self.now

    def send(self, data):
        if self.ok:
            self.packets.append(parse_rtp(data))
        return self.ok

    def line(self, dtmf="rfc4733", telephone_event=101):
        return RtpLine(send=self.send, clock_ns=self.clock, codec="pcmu", payload_type=0,
                       telephone_event=telephone_event, dtmf=dtmf,
                       send_info=lambda digit, ms: self.infos.append((digit, ms)))


async def _settle(wire, line, ahead_ns):
    wire.now += ahead_ns  # every slot queued so far is overdue: sent at once, in order
    for _ in range(50):
        if not line.pending:
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_frames_go_out_in_order_and_a_pause_moves_the_timestamp_on():
    async def scenario():
        wire = Wire()
        line = wire.line()
        line.queue_frames([bytes([n]) * 160 for n in range(3)])
        await _settle(wire, line, 100_000_000)
        wire.now += 5_000_000_000  # the line was silent for seconds: pacing restarts
        line.queue_frames([b"\x09" * 160])
        await _settle(wire, line, 1_000_000)
        return wire, line

    wire, line = asyncio.run(scenario())
    packets = wire.packets
    assert [p.payload[0] for p in packets] == [0, 1, 2, 9]
    assert [p.marker for p in packets] == [True, False, False, True]
    assert [(p.timestamp - packets[0].timestamp) & 0xFFFFFFFF for p in packets[:3]] == [
        0, 160, 320]
    silent_ns = (START_NS + 100_000_000 + 5_000_000_000) - (START_NS + 60_000_000)
    assert (packets[3].timestamp - packets[2].timestamp) & 0xFFFFFFFF == \
        160 + silent_ns * 8 // 1_000_000
    assert len({p.ssrc for p in packets}) == 1
    assert line.sent_ns == [START_NS + 100_000_000] * 3 + [wire.now]
    assert (line.packets_sent, line.bytes_sent) == (4, 640)


def test_info_keys_send_requests_and_keep_the_audio_going():
    async def scenario():
        wire = Wire()
        line = wire.line(dtmf="info")
        line.queue_digits("5#", duration_ms=100, gap_ms=40)
        await _settle(wire, line, 1_000_000_000)
        return wire, line

    wire, line = asyncio.run(scenario())
    assert wire.infos == [("5", 100), ("#", 100)]
    assert len(wire.packets) == 14 and {p.payload for p in wire.packets} == {b"\xff" * 160}
    assert [d["digit"] for d in line.digits_sent] == ["5", "#"]
    assert all(d["method"] == "info" and d["end_ns"] >= d["start_ns"] for d in line.digits_sent)


def test_an_opus_line_advances_960_a_packet_and_its_keys_count_on_48_khz():
    async def scenario():
        wire = Wire()
        line = RtpLine(send=wire.send, clock_ns=wire.clock, codec="opus", payload_type=111,
                       telephone_event=102, event_clock_hz=48_000, dtmf="rfc4733",
                       send_info=lambda digit, ms: None)
        line.queue_frames([b"\x08\x01", b"\x08\x02\x03"])  # Opus packets' lengths vary
        line.queue_digits("1", duration_ms=40, gap_ms=20)
        await _settle(wire, line, 1_000_000_000)
        return wire

    packets = asyncio.run(scenario()).packets
    audio = [p for p in packets if p.payload_type == 111]
    events = [p for p in packets if p.payload_type == 102]
    first = audio[0].timestamp
    assert [(p.timestamp - first) & 0xFFFFFFFF for p in audio] == [0, 960, 4 * 960]  # the gap after the key is silence
    assert {(p.timestamp - first) & 0xFFFFFFFF for p in events} == {2 * 960}
    assert [parse_event(p.payload).duration for p in events] == [960] + [1920] * 3


def test_a_codec_change_drops_what_was_queued_in_the_old_codec():
    async def scenario():
        wire = Wire()
        line = wire.line()
        line.queue_frames([b"\xff" * 160] * 3)  # queued for later: the fake clock stands
        line.use_codec("opus", 111, None, event_clock_hz=8000)
        pending = (line.pending, line.dropped_by_codec_change, line.dtmf)
        line.stop()
        return line, pending

    line, pending = asyncio.run(scenario())
    assert pending == (0, 3, "info")
    with pytest.raises(ValueError):
        line.queue_frames([b""])


def test_without_telephone_event_keys_fall_back_to_info():
    wire = Wire()
    assert wire.line(telephone_event=None).dtmf == "info"


def test_rfc4733_keys_follow_the_audio_with_one_timestamp_each():
    async def scenario():
        wire = Wire()
        line = wire.line()
        line.queue_frames([b"\x01" * 160])
        line.queue_digits("9", duration_ms=60, gap_ms=0)
        # the caller's line goes on: its next three frames' time went to the key
        line.queue_frames([b"\x07" * 160] * 3 + [b"\x02" * 160])
        await _settle(wire, line, 1_000_000_000)
        return wire, line

    (wire, line) = asyncio.run(scenario())
    packets = wire.packets
    assert line.frames_replaced_by_keys == 3
    assert b"\x07" * 160 not in {p.payload for p in packets}
    events = [p for p in packets if p.payload_type == 101]
    assert [parse_event(p.payload).duration for p in events] == [160, 320, 480, 480, 480]
    assert {p.timestamp for p in events} == {(packets[0].timestamp + 160) & 0xFFFFFFFF}
    assert [p.marker for p in events] == [True, False, False, False, False]
    assert packets[-1].payload_type == 0 and packets[-1].marker
    assert (packets[-1].timestamp - packets[0].timestamp) & 0xFFFFFFFF == 4 * 160


def test_keys_keep_the_line_on_the_callers_time():
    """Audio handed after a key goes in the slot the caller's line says (slot n leaves n * 20 ms
    after the line started, with timestamp n * 160), not later by the key's length."""
    async def scenario():
        wire = Wire()
        line = wire.line()
        line.queue_frames([b"\x00" * 160])  # slot 0
        line.queue_digits("1", duration_ms=100, gap_ms=60)  # slots 1-8
        line.queue_frames([bytes([slot]) * 160 for slot in range(1, 13)])  # the line goes on
        await _settle(wire, line, 1_000_000_000)
        return wire, line

    wire, line = asyncio.run(scenario())
    audio = {p.payload[0]: p.timestamp for p in wire.packets if p.payload_type == 0}
    assert line.frames_replaced_by_keys == 8 and 8 not in audio
    assert (audio[9] - audio[0]) & 0xFFFFFFFF == 9 * 160


def test_a_line_that_cannot_send_is_broken_and_drops_its_queue():
    async def scenario():
        wire = Wire(ok=False)
        line = wire.line()
        line.queue_frames([b"\x01" * 160] * 5)
        await _settle(wire, line, 1_000_000_000)
        return line

    line = asyncio.run(scenario())
    assert line.broken and line.pending == 0


@pytest.mark.parametrize(("frames", "digits"), [([b"\x01" * 100], None), (None, "E"),
                                                 (None, "1x")])
def test_bad_frames_and_keys_are_refused(frames, digits):
    line = Wire().line()
    with pytest.raises(ValueError):
        if frames is not None:
            line.queue_frames(frames)
        else:
            line.queue_digits(digits)


# --- options, errors, INFO bodies ------------------------------------------------------------

@pytest.mark.parametrize("changes", [
    {"uri": "http://agent"}, {"uri": "sip:a@b;transport=tls"}, {"codecs": ("g729",)},
    {"codecs": ()}, {"headers": {"X-Test": "a\r\nVia: evil"}}, {"headers": {"Via": "x"}},
    {"headers": {"Bad Name": "x"}}, {"headers": {"X-Long": "x" * 2000}},
    {"user_agent": "a\nb"}, {"answer_timeout_seconds": 0}, {"local_address": "localhost"},
])
def test_bad_options_are_refused_before_any_socket(changes):
    with pytest.raises(ValueError):
        CallOptions(**{"uri": "sip:agent@127.0.0.1:5070", **changes})


def test_the_password_is_not_in_the_options_repr_and_the_uri_names_the_transport():
    options = CallOptions(uri="sip:agent@example.org;transport=tcp", password="hunter2")
    assert "hunter2" not in repr(options)
    assert options.effective_transport == "tcp"
    assert CallOptions(uri="sip:a@b", transport="tcp").effective_transport == "tcp"


@pytest.mark.parametrize(("status", "code"), [
    (486, "busy"), (600, "busy"), (603, "declined"), (404, "not_found"), (604, "not_found"),
    (408, "no_answer"), (480, "no_answer"), (401, "auth_refused"), (407, "auth_refused"),
    (500, "rejected"), (302, "rejected")])
def test_statuses_map_to_error_codes(status, code):
    error = error_for_status(status, "Reason")
    assert (error.code, error.status, str(error)) == (code, status, f"{code}: {status} Reason")


@pytest.mark.parametrize(("content_type", "body", "key"), [
    ("application/dtmf-relay", b"Signal=5\r\nDuration=160\r\n", ("5", 160.0)),
    ("application/dtmf-relay", b"Signal=10\r\n", ("*", None)),
    ("application/dtmf-relay; charset=x", b"signal= #\r\nduration=x\r\n", ("#", None)),
    ("application/dtmf", b"B", ("B", None)),
    ("application/dtmf-relay", b"Signal=55\r\n", None),
    ("text/plain", b"Signal=5", None),
    ("application/dtmf-relay", b"\xff\xfe" * 500, None),
])
def test_info_bodies_give_keys(content_type, body, key):
    message = SipMessage(method="INFO", request_uri="sip:x",
                         headers=[("Content-Type", content_type)], body=body)
    assert info_key(message) == key
