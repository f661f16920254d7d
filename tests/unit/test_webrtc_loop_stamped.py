"""A kernel-stamped WebRTC call says ``arrival_stamps: kernel_stream``, and its ``closed`` event
lists every event whose stamp the loop took (audio whose datagram had no kernel stamp or whose
stamp was forgotten, data-channel messages, the closing events), so those stay charged the
loop's lag while the kernel-stamped audio is not (``metrics/_measurement.py``)."""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest
from _webrtc_fakes import FakeStun, rtp

pytest.importorskip("aiortc")

from voicelab.doubles.webrtc._call import RATE_HZ, encode_all  # noqa: E402
from voicelab.endpoints import EndpointContext, EndpointEvent  # noqa: E402
from voicelab.endpoints._socket import LOOP_STAMPED_ATTRIBUTE, MAX_LOOP_STAMPED  # noqa: E402
from voicelab.endpoints.webrtc import WebRtcEndpoint  # noqa: E402
from voicelab.endpoints.webrtc._kernel_stamps import KernelStamps  # noqa: E402
from voicelab.endpoints.webrtc._line import CallerLine  # noqa: E402
from voicelab.endpoints.webrtc._peer import DataMessage, Peer  # noqa: E402
from voicelab.endpoints.webrtc._rtp import ArrivedPacket, LoopStamped  # noqa: E402

MS = 1_000_000


def test_a_datagram_read_without_a_kernel_stamp_is_taken_as_the_loops():
    now = [5 * MS]
    stamps = KernelStamps(clock_ns=lambda: now[0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        protocol = FakeStun(sock)
        stamps.watch([protocol])
        # nothing was received on the socket: the kernel has no stamp, the read's time is kept
        protocol.datagram_received(rtp(1), ("127.0.0.1", 9))
    assert stamps.take_stamp(77, 1) == (5 * MS, False)
    assert stamps.take_stamp(77, 1) is None and stamps.loop_stamped == 1


def _events_of_a_call(packets: list[ArrivedPacket], messages: list[DataMessage]
                      ) -> tuple[str, list[EndpointEvent]]:
    """An adapter whose peer's sockets are kernel-stamped is handed ``packets`` and
    ``messages`` as aiortc would, then closed: its ``arrival_stamps`` and events."""
    now = [3000 * MS]

    async def call() -> tuple[str, list[EndpointEvent]]:
        adapter = WebRtcEndpoint({"url": "http://127.0.0.1:9",
                                  "ice_host_addresses": ["127.0.0.1"]},
                                 EndpointContext(session_id="listed", clock_ns=lambda: now[0]))
        peer = Peer(adapter.settings, CallerLine(clock_ns=lambda: now[0]),
                    enqueue=lambda item: None, clock_ns=lambda: now[0])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            peer.stamps.watch([FakeStun(sock)])
            adapter._peer = peer  # the call's own peer, as connect() makes it
            adapter._state = "open"
            stamps = adapter.arrival_stamps()
            for item in [*packets, *messages]:
                adapter._enqueue(item)
            events = []
            async for event in adapter.events():
                events.append(event)
                if len(events) == len(packets) + len(messages):
                    now[0] += 10 * MS
                    await adapter.close()
        return stamps, events

    return asyncio.run(call())


def test_the_closed_event_lists_the_loop_stamped_events_and_only_those():
    tone = (8000 * np.sin(np.arange(RATE_HZ) * 2 * np.pi * 220 / RATE_HZ)).astype(np.int16)
    payloads = encode_all(tone)[:4]
    # packets 0 and 2 kernel-stamped; 1 read without a stamp, 3 whose stamp was forgotten
    packets = [ArrivedPacket((1000 + 20 * index) * MS, index, index * 960, payload,
                             kernel_stamped=index % 2 == 0)
               for index, payload in enumerate(payloads)]
    messages = [DataMessage(1070 * MS, '{"label": "rtvi-ai", "type": "bot-transcription", '
                                       '"data": {"text": "Hello"}}')]
    stamps, events = _events_of_a_call(packets, messages)
    assert stamps == "kernel_stream"
    audio = [e.received_ns for e in events if e.type == "audio_delta"]
    assert audio == [p.arrival_ns for p in packets]  # every packet delivered, as stamped
    closed = events[-1]
    assert closed.type == "closed"
    listed = sorted(closed.received_ns - before
                    for before, late in closed.data[LOOP_STAMPED_ATTRIBUTE])
    assert all(late == -1 for _, late in closed.data[LOOP_STAMPED_ATTRIBUTE])
    # the two loop-stamped packets, the data-channel message, and the closing events' stamp
    assert listed == [1020 * MS, 1060 * MS, 1070 * MS, 3010 * MS]


def test_past_its_bound_the_list_is_given_up_and_every_arrival_is_charged():
    listed = LoopStamped()
    for stamp in range(MAX_LOOP_STAMPED):
        listed.note(stamp)
    assert len(listed.record(MAX_LOOP_STAMPED)[LOOP_STAMPED_ATTRIBUTE]) == MAX_LOOP_STAMPED
    listed.note(MAX_LOOP_STAMPED)
    # no list at all: the measurement then charges the loop's lag to every arrival
    assert listed.record(MAX_LOOP_STAMPED + 1) == {}


def test_the_measurement_charges_the_listed_audio_and_not_the_kernel_stamped():
    """The ``closed`` list as the adapter writes it, read back by the measurement: only the
    listed packet of a response is charged the loop's lag."""
    from voicelab.metrics._measurement import timed_arrivals
    from voicelab.recording import ATTRIBUTES, EventType, ProductClosed, Recording

    recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="r",
                          clock_ns=lambda: 0)

    def record(kind: EventType, at_ms: int, attributes: object = None, **more: object) -> None:
        recording.record(kind, attributes, source="product" if kind.value.startswith(
            "product") else "evaluator", direction="internal", at_ns=at_ms * MS, **more)

    record(EventType.CONNECTED, 0, ATTRIBUTES[EventType.CONNECTED](
        expects_response="turn-000", arrival_stamps="kernel_stream"))
    samples = np.zeros(480, dtype="<i2").tobytes()
    for at_ms in (100, 120, 140):
        record(EventType.PRODUCT_AUDIO, at_ms, turn_id="turn-000", audio=samples)
    listed = LoopStamped()
    listed.note(120 * MS)  # the packet read without a kernel stamp
    record(EventType.PRODUCT_CLOSED, 500, ProductClosed.reported(
        {"reason": "closed by the evaluator", **listed.record(500 * MS)}))
    assert timed_arrivals(recording) == {"turn-000": [120 * MS]}
