"""A busy evaluator falls behind its WebRTC socket: the product's packets keep their arrival
stamps but reach the conversation late, in bursts. The simulated user must hear them all and
judge a reply over only on audio that has really come (the cause of ``no_response`` at 20
concurrent calls: a greeting delivered after the listener had already heard silence in its
place was never heard). And an aiortc/aioice that is not the tested one stamps in the loop,
saying so."""

from __future__ import annotations

import asyncio
import socket
import time

import numpy as np
import pytest
from _webrtc_fakes import FakeStun, rtp

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ
from voicelab.recording import Recording
from voicelab.runner._heard_speech import HeardSpeech

pytest.importorskip("aiortc")

from voicelab.endpoints.webrtc._kernel_stamps import (  # noqa: E402
    MAX_PENDING_AGE_NS,
    KernelStamps,
    ice_protocols,
    versions_tested,
)
from voicelab.endpoints.webrtc._rtp import ArrivedPacket, tap_arrivals  # noqa: E402

MS = 1_000_000
RATE = CANONICAL_SAMPLE_RATE_HZ
PACKET = RATE // 50  # 20 ms
#: the greeting: 600 ms of tone from 200 ms into the call, in 20 ms packets
GREETING_AT_MS, GREETING_MS = 200, 600
#: the consumer is stalled until then: every greeting packet waits behind it
DELIVERED_AT_MS = 1200
HANGOVER_MS = 300.0


def _greeting_packets() -> list[tuple[int, np.ndarray]]:
    """(arrival stamp ns, samples) of each packet of the greeting."""
    count = RATE * GREETING_MS // 1000
    tone = (6000 * np.sin(np.arange(count) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    return [((GREETING_AT_MS + 20 * index) * MS, tone[index * PACKET:(index + 1) * PACKET])
            for index in range(count // PACKET)]


def _listen_through_a_stall(*, backlog_known: bool) -> tuple[HeardSpeech, bool, bool]:
    """The listener ticks every 20 ms for 1.6 s; the greeting's packets all arrive on time but
    are delivered at 1.2 s. Returns the ear, whether a reply was heard before the delivery
    and whether it was judged over before it."""
    now = [0]
    recording = Recording(session_id="s", trace_id="t" * 32, root_span_id="r",
                          clock_ns=lambda: now[0])
    heard = HeardSpeech(recording, hangover_ms=HANGOVER_MS)
    packets = _greeting_packets()
    waiting = [stamp for stamp, _ in packets]
    if backlog_known:  # the adapter says which arrived packets it still holds
        heard.backlog = lambda: next((s for s in waiting if s <= now[0]), None)
    heard_before = over_before = False
    for tick_ms in range(0, 1620, 20):
        now[0] = tick_ms * MS
        if tick_ms == DELIVERED_AT_MS:  # the stalled consumer catches up: a burst
            for stamp, samples in packets:
                recording.record_product_audio(stamp, "turn-000", samples.tobytes(), None)
            waiting.clear()
        heard.listen_until(recording.listener_now_ns())
        if tick_ms < DELIVERED_AT_MS:
            heard_before |= heard.spoke_after(0)
            over_before |= heard.reply_over(0)
            if backlog_known and tick_ms >= GREETING_AT_MS:  # no silence counted past it
                assert heard.heard_until_ns == GREETING_AT_MS * MS
    return heard, heard_before, over_before


def test_a_greeting_delivered_late_in_a_burst_is_heard_and_then_judged_over():
    heard, heard_before, over_before = _listen_through_a_stall(backlog_known=True)
    assert not heard_before and not over_before  # nothing judged on audio still on its way
    onset = heard.first_onset_ns(0)
    assert onset is not None and abs(onset - GREETING_AT_MS * MS) <= 20 * MS  # at its arrival
    assert heard.reply_over(0)  # its end and the hangover after it, heard once delivered
    assert heard.speech_heard_ns(0) == pytest.approx(GREETING_MS * MS, abs=40 * MS)


def test_without_the_backlog_the_late_greeting_falls_into_silence_already_heard():
    """The mechanism the backlog answers: silence heard up to "now" covers where the late
    audio is placed, so it is skipped (a conversation then ends ``no_response``)."""
    heard, _, _ = _listen_through_a_stall(backlog_known=False)
    assert not heard.spoke_after(0)


def _watching(now: list[int]) -> tuple[KernelStamps, FakeStun]:
    """Kernel stamps on the trial clock ``now[0]``, watching one protocol whose socket is
    bound on 127.0.0.1 and never receives anything."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    protocol = FakeStun(sock)
    stamps = KernelStamps(clock_ns=lambda: now[0])
    stamps.watch([protocol])  # type: ignore[list-item]
    return stamps, protocol


def test_the_stamps_say_what_was_read_and_not_yet_tapped_and_forget_what_never_comes():
    """Datagrams read ahead of aiortc's task are the backlog's oldest end; one aiortc never
    hands on (SRTP refused it) is forgotten when a later one is tapped, or when it is older
    than :data:`MAX_PENDING_AGE_NS`."""
    now = [5 * MS]
    stamps, protocol = _watching(now)
    assert stamps.oldest_pending_ns() is None
    for sequence in (1, 2, 3):  # no datagram received on the socket: stamped when read
        now[0] += 20 * MS
        protocol.datagram_received(rtp(sequence), ("127.0.0.1", 9))
    assert stamps.read_stamped == 3 and stamps.oldest_pending_ns() == 25 * MS
    assert stamps.take(77, 2) == 45 * MS  # sequence 1 never reached the tap: forgotten
    assert stamps.oldest_pending_ns() == 65 * MS
    now[0] += MAX_PENDING_AGE_NS + MS
    assert stamps.oldest_pending_ns() is None  # sequence 3 never came: not waited for
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as product:
        product.sendto(rtp(4), protocol.sock.getsockname())  # in the socket, not yet read by the loop
        for _ in range(100):
            if stamps.oldest_pending_ns() is not None:
                break
            time.sleep(0.001)
        assert stamps.oldest_pending_ns() == 65 * MS  # it came after the last datagram read
        protocol.sock.recv(2048)
        assert stamps.oldest_pending_ns() is None
    protocol.sock.close()


def test_another_aiortc_version_stamps_in_the_loop_and_says_so(monkeypatch):
    import aiortc

    assert versions_tested()
    monkeypatch.setattr(aiortc, "__version__", "1.17.0")
    assert not versions_tested()
    assert ice_protocols(object()) == []  # type: ignore[arg-type]  # private names not read

    stamps = KernelStamps(clock_ns=lambda: 0)
    stamps.watch(ice_protocols(object()))  # type: ignore[arg-type]
    assert not stamps.kernel

    from aiortc.rtp import RtpPacket

    class Receiver:
        async def _handle_rtp_packet(self, packet: RtpPacket, arrival_time_ms: int) -> None:
            raise AssertionError("aiortc's jitter buffer is never fed")

    receiver = Receiver()
    arrived: list[ArrivedPacket] = []
    tap_arrivals(receiver, arrived.append, clock_ns=lambda: 777,  # type: ignore[arg-type]
                 kernel=stamps)
    packet = RtpPacket(payload_type=111, sequence_number=5, timestamp=960)
    asyncio.run(receiver._handle_rtp_packet(packet, arrival_time_ms=0))
    assert [p.arrival_ns for p in arrived] == [777]  # stamped when tapped
    assert stamps.loop_stamped == 1 and stamps.taken == 0


def test_another_aiortc_version_is_reported_as_loop_stamps_by_the_call(monkeypatch):
    import aiortc

    from voicelab.endpoints import EndpointContext
    from voicelab.endpoints.webrtc import WebRtcEndpoint
    from voicelab.endpoints.webrtc._line import CallerLine
    from voicelab.endpoints.webrtc._peer import Peer

    monkeypatch.setattr(aiortc, "__version__", "1.17.0")

    async def offered() -> tuple[str, object, str]:
        adapter = WebRtcEndpoint({"url": "http://127.0.0.1:9",
                                  "ice_host_addresses": ["127.0.0.1"]},
                                 EndpointContext(session_id="fallback"))
        peer = Peer(adapter.settings, CallerLine(clock_ns=lambda: 0), enqueue=lambda item: None,
                    clock_ns=lambda: 0)
        transceiver = peer.pc.addTransceiver("audio")
        await peer.pc.setLocalDescription(await peer.pc.createOffer())
        peer.stamps.watch(ice_protocols(transceiver.receiver))
        adapter._peer = peer  # the call's own peer, as connect() makes it
        facts = peer.facts()
        await peer.close()
        return adapter.arrival_stamps(), facts["arrival_stamps"], str(facts["loop_stamped_packets"])

    source, reported, _ = asyncio.run(offered())
    assert source == "loop" and reported == "loop"


def test_the_users_audio_is_stamped_when_it_left_not_when_a_busy_loop_handed_it_over():
    """The line's packet leaves in the sender's step, which a loop busy elsewhere runs late:
    the stamp ``send_audio`` reports is that departure (the sender's own clock reading as it
    sends), not the hand-over before the stall."""
    import time

    from voicelab.endpoints.webrtc._line import CallerLine
    from voicelab.endpoints.webrtc._opus import FRAME_SAMPLES

    async def scenario() -> tuple[int, int | None, list[tuple[bytes, int]]]:
        clock = time.perf_counter_ns
        line = CallerLine(clock_ns=clock)
        sent: list[tuple[bytes, int]] = []

        async def sender() -> None:  # aiortc's sender: takes a packet and sends it at once
            while True:
                payload, _ = await line.next_packet()
                sent.append((payload, clock()))

        task = asyncio.create_task(sender())
        await asyncio.sleep(0.1)  # the line idles: silence packets
        tone = (8000 * np.sin(np.arange(FRAME_SAMPLES) * 0.3)).astype(np.int16)
        handed_ns = clock()
        departure = line.queue_audio(tone)
        time.sleep(0.2)  # the loop is busy elsewhere before the sender's next step
        assert departure is not None
        stamp = await departure
        # the line is behind now (the stall): its audio goes out at once, not waited for
        assert line.queue_audio(tone) is None and line.stamped_at_handover == 1
        line.stop()
        task.cancel()
        return handed_ns, stamp, sent

    handed_ns, stamp, sent = asyncio.run(scenario())
    assert stamp is not None and stamp - handed_ns >= 200 * MS  # after the stall
    departures = [at for _, at in sent if at >= stamp]
    assert departures and departures[0] - stamp < 2 * MS  # the sender's own reading


def test_the_bot_double_encodes_every_line_it_may_say_before_its_first_call():
    """Encoding a reply mid-call blocked the double's loop as its first call began replying:
    every other call's reply then stalled right after its first packet."""
    from voicelab.doubles.webrtc import WebRtcBot

    async def started() -> set[str]:
        async with WebRtcBot({"greeting": "Hi.", "reply_text": "Sure.",
                              "replies": ["One.", "Two."]}) as bot:
            return set(bot._voices)

    assert asyncio.run(started()) == {"Hi.", "Sure.", "One.", "Two."}


def test_a_line_cancelled_as_its_packet_leaves_is_cancelled():
    """The runner cancels its line's task at hang-up; if the packet ``send_audio`` waits for
    leaves in the same step, the cancellation must still end the task (Python 3.11's
    ``wait_for`` returned the result instead, and the line's stop() waited forever)."""
    from voicelab.audio import PcmAudio
    from voicelab.endpoints import EndpointContext
    from voicelab.endpoints.webrtc import WebRtcEndpoint
    from voicelab.endpoints.webrtc._line import CallerLine
    from voicelab.endpoints.webrtc._opus import FRAME_SAMPLES

    async def scenario() -> bool:
        adapter = WebRtcEndpoint({"url": "http://127.0.0.1:9"},
                                 EndpointContext(session_id="cancelled"))
        line = CallerLine(clock_ns=time.perf_counter_ns)
        adapter._line, adapter._state = line, "open"  # as connect() leaves them
        tone = (8000 * np.sin(np.arange(FRAME_SAMPLES) * 0.3)).astype(np.int16)
        task = asyncio.create_task(adapter.send_audio(PcmAudio(tone)))
        await asyncio.sleep(0)  # it waits for its packet to leave
        await line.next_packet()  # the sender takes it...
        task.cancel()  # ...as the runner hangs up
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(scenario())


def test_a_deep_backlog_that_keeps_moving_is_never_forgotten():
    """Beside two busy processes the evaluator fell 12 s behind its sockets: datagrams read
    more than :data:`MAX_PENDING_AGE_NS` ago are still on their way while aiortc keeps handing
    the ones before them on."""
    now = [0]
    stamps, protocol = _watching(now)
    for sequence in range(1, 801):  # 16 s of packets read as they came
        now[0] = sequence * 20 * MS
        protocol.datagram_received(rtp(sequence), ("127.0.0.1", 9))
    for sequence in range(1, 200):  # aiortc hands them on 12 s behind, still going
        now[0] += MS
        assert stamps.take(77, sequence) == sequence * 20 * MS
    assert now[0] - stamps.oldest_pending_ns() > MAX_PENDING_AGE_NS  # type: ignore[operator]
    assert stamps.oldest_pending_ns() == 200 * 20 * MS
    protocol.sock.close()
