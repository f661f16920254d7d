"""The pure parts of ``adapter: webrtc``: RTVI messages, the RTP stream's bookkeeping, the
rate guard, Opus's constant delays, the paced line, settings, the ICE address hook, the
arrival tap and the missing-extra message."""

from __future__ import annotations

import asyncio
import json
import sys

import numpy as np
import pytest

from voicelab.audio import tone_speech
from voicelab.errors import ConfigError, MissingDependencyError

pytest.importorskip("aiortc")

from voicelab.endpoints import abilities_of  # noqa: E402
from voicelab.endpoints._silence_gate import QUIET_HANGOVER_NS  # noqa: E402
from voicelab.endpoints.webrtc import WebRtcEndpoint, WebRtcSettings, gathering_on  # noqa: E402
from voicelab.endpoints.webrtc._line import FRAME_NS, CallerLine  # noqa: E402
from voicelab.endpoints.webrtc._opus import (  # noqa: E402
    DECODER_DELAY_MS,
    ENCODER_LOOKAHEAD_MS,
    OpusLineDecoder,
    OpusLineEncoder,
)
from voicelab.endpoints.webrtc._rtp import (  # noqa: E402
    ArrivedPacket,
    InboundAudio,
    RateGuard,
    tap_arrivals,
)
from voicelab.endpoints.webrtc._rtvi import client_ready, decode_message  # noqa: E402

MS = 1_000_000


def rtvi(kind: str, **data: object) -> str:
    return json.dumps({"label": "rtvi-ai", "type": kind, "data": data})


def test_rtvi_transcriptions_become_normalized_events():
    [bot] = decode_message(5, rtvi("bot-transcription", text="Hello there."))
    assert (bot.type, bot.text, bot.received_ns) == ("transcript_final", "Hello there.", 5)
    [user] = decode_message(6, rtvi("user-transcription", text="a table", final=True))
    assert (user.type, user.text) == ("input_transcript", "a table")
    [interim] = decode_message(7, rtvi("user-transcription", text="a ta", final=False))
    assert interim.type == "raw" and interim.data == {"rtvi": "user-transcription"}
    [speaking] = decode_message(8, rtvi("bot-started-speaking"))
    assert speaking.type == "raw" and speaking.data["rtvi"] == "bot-started-speaking"


@pytest.mark.parametrize("message", [b"\xff\x00garbage", "not json", "[1, 2]", '"text"',
                                     json.dumps({"label": "other", "type": "x"}),
                                     json.dumps({"label": "rtvi-ai", "type": 5, "data": []})])
def test_anything_else_on_the_data_channel_is_kept_raw(message):
    [event] = decode_message(1, message)
    assert event.type == "raw"


def test_client_ready_is_an_rtvi_message():
    parsed = json.loads(client_ready())
    assert parsed["label"] == "rtvi-ai" and parsed["type"] == "client-ready"
    assert parsed["data"]["version"]


def packets(count: int, *, start_seq: int = 0, every_ns: int = 20 * MS,
            payload: bytes | None = None) -> list[ArrivedPacket]:
    encoder = OpusLineEncoder()
    speech = tone_speech("one two three four five six", seed=1).samples
    coded = encoder.push(np.resize(speech, count * 480))
    return [ArrivedPacket(i * every_ns, (start_seq + i) % 65536, i * 960,
                          payload if payload is not None else coded[i])
            for i in range(min(count, len(coded)))]


def test_the_stream_counts_lost_late_and_duplicate_packets_across_the_wrap():
    stream = InboundAudio()
    sent = packets(12, start_seq=65530)
    order = sent[:3] + sent[5:8] + [sent[6], sent[4]] + sent[8:]  # 3, 4 lost or late
    delivered = [stream.push(p) for p in order]
    assert stream.lost == 2 and stream.late == 2  # the duplicate of 6, then 4 arriving late
    assert delivered[6] is None and delivered[7] is None
    assert stream.packets == len(order) and stream.facts()["lost"] == 2


def test_a_perfectly_paced_stream_has_no_jitter_and_a_late_packet_some():
    paced = InboundAudio()
    for packet in packets(20):
        paced.push(packet)
    assert paced.facts()["jitter_ms"] == 0.0
    shaky = InboundAudio()
    for index, packet in enumerate(packets(20)):
        late = 15 * MS if index % 2 else 0
        shaky.push(ArrivedPacket(packet.arrival_ns + late, packet.sequence, packet.timestamp,
                                 packet.payload))
    assert shaky.facts()["jitter_ms"] > 3.0


def test_garbage_payloads_are_counted_never_raised():
    stream = InboundAudio()
    assert stream.push(ArrivedPacket(0, 1, 0, b"\x00" * 5000)) is None
    assert stream.push(ArrivedPacket(1, 2, 960, b"")) is None
    assert stream.undecodable == 2


def test_silence_is_delivered_inside_a_reply_and_not_long_after_it():
    encoder = OpusLineEncoder()
    speech = encoder.push(tone_speech("hello", seed=1).samples[:4800])  # 200 ms, audible
    silence = encoder.push(np.zeros(480 * 60, dtype=np.int16))  # 1.2 s
    stream = InboundAudio()
    delivered = [stream.push(ArrivedPacket(i * 20 * MS, i, i * 960, payload)) is not None
                 for i, payload in enumerate(speech + silence)]
    hangover = QUIET_HANGOVER_NS // (20 * MS)
    first = delivered.index(True)  # silence before any reply is not delivered either
    assert first <= 3 and all(delivered[first:len(speech) + hangover - 2])
    assert not any(delivered[len(speech) + hangover + 2:])
    assert stream.quiet > 0


def test_withheld_silence_is_never_halved_to_the_canonical_rate(monkeypatch):
    encoder = OpusLineEncoder()
    speech = encoder.push(tone_speech("hello", seed=1).samples[:4800])
    silence = encoder.push(np.zeros(480 * 60, dtype=np.int16))
    stream = InboundAudio()
    halved: list[int] = []
    original = OpusLineDecoder.halve
    monkeypatch.setattr(OpusLineDecoder, "halve",
                        lambda self, wide: halved.append(wide.size) or original(self, wide))
    delivered = sum(stream.push(ArrivedPacket(i * 20 * MS, i, i * 960, payload)) is not None
                    for i, payload in enumerate(speech + silence))
    assert stream.quiet > 0 and len(halved) == delivered


def test_the_rate_guard_refuses_past_its_rate_in_a_window():
    guard = RateGuard(3)
    admitted = [guard.admit(n * MS) for n in range(5)]
    assert admitted == [True, True, True, False, False] and guard.exceeded == 1
    assert guard.admit(1_001 * MS)  # a new window


def test_opus_delays_are_the_declared_constants():
    encoder, decoder = OpusLineEncoder(), OpusLineDecoder()
    line = np.zeros(24_000, dtype=np.int16)
    line[12_000:] = (8000 * np.sin(np.arange(12_000) * 2 * np.pi * 440 / 24_000)).astype(np.int16)
    out = np.concatenate([decoder.push(p) for p in encoder.push(line)])
    onset_ms = np.flatnonzero(np.abs(out.astype(np.int32)) > 300)[0] / 24
    assert onset_ms - 500 == pytest.approx(ENCODER_LOOKAHEAD_MS + DECODER_DELAY_MS, abs=0.5)


def test_the_line_paces_packets_in_order_with_rtp_time_and_fills_pauses_with_silence():
    async def scenario() -> tuple[list[int], int, int]:
        line = CallerLine(clock_ns=lambda: int(asyncio.get_running_loop().time() * 1e9))
        line.queue_audio(tone_speech("one two", seed=2).samples[:480 * 5])  # 5 packets
        units = [(await line.next_packet())[1] for _ in range(5)]
        _, after_pause = await line.next_packet()  # nothing queued: silence
        line.stop()
        return units, after_pause, line.silence_sent

    units, after_pause, silence = asyncio.run(scenario())
    assert units == [0, 960, 1920, 2880, 3840]
    assert after_pause > units[-1] and silence == 1
    assert FRAME_NS == 20 * MS


def test_settings_add_the_flavours_path_and_refuse_what_cannot_work():
    def offer_url(**settings: object) -> str:
        return WebRtcSettings.model_validate({"url": "http://127.0.0.1:7860", **settings}
                                             ).offer_url

    assert offer_url() == "http://127.0.0.1:7860/api/offer"
    assert offer_url(signalling="fastrtc") == "http://127.0.0.1:7860/webrtc/offer"
    assert offer_url(signalling="whip") == "http://127.0.0.1:7860/whip"
    assert WebRtcSettings(url="https://bot.example/custom/offer").offer_url == \
        "https://bot.example/custom/offer"
    for bad in ({"url": "ws://bot"}, {"url": "http://bot", "ice_host_addresses": ["localhost"]},
                {"url": "http://bot", "signalling": "sip"}, {"url": "http://bot", "typo": 1}):
        with pytest.raises(ConfigError):
            abilities_of(WebRtcEndpoint).check_settings(bad)
    assert WebRtcEndpoint.turn_taking({}) == "server_vad"


def test_a_missing_aiortc_is_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiortc", None)
    with pytest.raises(MissingDependencyError) as caught:
        WebRtcEndpoint.check_settings({"url": "http://127.0.0.1:1"})
    assert "pip install 'voicelab[webrtc]'" in str(caught.value)


def test_gathering_on_chooses_the_host_addresses_only_inside_its_block():
    import aioice.ice

    with gathering_on(["127.0.0.1"]):
        assert aioice.ice.get_host_addresses(True, True) == ["127.0.0.1"]
        assert aioice.ice.get_host_addresses(False, True) == []
    assert "127.0.0.1" not in aioice.ice.get_host_addresses(True, False)


def test_the_arrival_tap_stamps_each_packet_and_feeds_no_jitter_buffer():
    from aiortc.rtp import RtpPacket

    class Receiver:
        fed: list[object] = []

        async def _handle_rtp_packet(self, packet: RtpPacket, arrival_time_ms: int) -> None:
            self.fed.append(packet)

    receiver = Receiver()
    arrived: list[ArrivedPacket] = []
    stamps = iter([111, 222])
    tap_arrivals(receiver, arrived.append, clock_ns=lambda: next(stamps))  # type: ignore[arg-type]
    for sequence in (7, 8):
        packet = RtpPacket(payload_type=111, sequence_number=sequence, timestamp=sequence * 960)
        packet.payload = b"\x01\x02"
        asyncio.run(receiver._handle_rtp_packet(packet, arrival_time_ms=0))
    assert [(p.arrival_ns, p.sequence, p.payload) for p in arrived] == \
        [(111, 7, b"\x01\x02"), (222, 8, b"\x01\x02")]
    assert Receiver.fed == []


@pytest.mark.parametrize("inner", [{"type": "renegotiate"}, "renegotiate"])
def test_pipecats_renegotiation_request_is_refused(inner):
    [event] = decode_message(3, json.dumps({"type": "signalling", "message": inner}))
    assert event.type == "error" and event.data["code"] == "renegotiation_refused"


def test_the_registered_adapter_listens_with_constant_conversion_delays():
    from voicelab.endpoints import ENDPOINTS, abilities_of

    webrtc = abilities_of(ENDPOINTS.resolve("webrtc"))
    assert webrtc.adapter_cls is WebRtcEndpoint and not webrtc.sends_dtmf
    assert webrtc.conversion_delay_ms == {"to_product": ENCODER_LOOKAHEAD_MS,
                                          "to_user": pytest.approx(DECODER_DELAY_MS, abs=1e-6)}
    assert webrtc.turn_taking({"url": "http://127.0.0.1:9"}) == "server_vad"
    assert webrtc.capabilities["input_transcripts"] and webrtc.capabilities["output_transcripts"]


def test_the_kernel_stamp_seam_is_pinned_to_the_tested_versions():
    import aioice.ice
    from aiortc import RTCPeerConnection

    from voicelab.endpoints.webrtc._kernel_stamps import ice_protocols, versions_tested

    assert versions_tested()  # a new aiortc/aioice: check the private names, then the pin

    async def gathered() -> list[object]:
        pc = RTCPeerConnection()
        transceiver = pc.addTransceiver("audio")
        with gathering_on(["127.0.0.1"]):
            await pc.setLocalDescription(await pc.createOffer())
        protocols = list(ice_protocols(transceiver.receiver))
        await pc.close()
        return protocols

    protocols = asyncio.run(gathered())
    assert protocols and all(isinstance(p, aioice.ice.StunProtocol) for p in protocols)


def test_an_rtp_datagram_is_keyed_by_its_clear_header_and_nothing_else_is():
    from voicelab.endpoints.webrtc._kernel_stamps import rtp_key

    header = bytes([0x80, 111]) + (4660).to_bytes(2, "big") + (960).to_bytes(4, "big") \
        + (0xDEADBEEF).to_bytes(4, "big")
    assert rtp_key(header + b"srtp payload") == (0xDEADBEEF, 4660)
    assert rtp_key(bytes([0x80, 200]) + header[2:]) is None  # RTCP sender report
    assert rtp_key(b"\x00\x01" + header[2:]) is None  # STUN
    assert rtp_key(b"\x16\xfe\xfd") is None  # DTLS, and too short


def test_a_datagram_read_late_keeps_the_kernels_receive_stamp():
    """A datagram that waited 80 ms in the socket before the loop read it is stamped when it
    arrived, not when it was read; the tap takes the stamp once, by its RTP key. (The kernel
    turns stamping on a little after it is asked when no socket had it on: datagrams before
    that carry the read's stamp, so the test first waits for a stamp older than its read.)"""
    import socket
    import time

    from voicelab.endpoints.webrtc._kernel_stamps import KernelStamps

    async def scenario() -> tuple[int, int, int | None, int | None, int]:
        loop = asyncio.get_running_loop()
        read: list[int] = []

        class Stun(asyncio.DatagramProtocol):
            transport: asyncio.DatagramTransport

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport  # type: ignore[assignment]

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                read.append(time.perf_counter_ns())

        transport, protocol = await loop.create_datagram_endpoint(
            Stun, local_addr=("127.0.0.1", 0))
        stamps = KernelStamps(clock_ns=time.perf_counter_ns)
        stamps.watch([protocol])
        address = transport.get_extra_info("sockname")

        def rtp(sequence: int) -> bytes:
            return bytes([0x80, 111]) + sequence.to_bytes(2, "big") + bytes(4) + \
                (77).to_bytes(4, "big") + b"x"

        async def waited(sender: socket.socket, sequence: int, seconds: float) -> int:
            """Send, keep the loop busy for ``seconds``, let it read; the send's stamp."""
            read.clear()
            sent_ns = time.perf_counter_ns()
            sender.sendto(rtp(sequence), address)
            time.sleep(seconds)
            while not read:
                await asyncio.sleep(0.001)
            return sent_ns

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for attempt in range(100):  # until the kernel stamps this socket's datagrams
                await waited(sender, attempt, 0.01)
                primed = stamps.take(77, attempt)
                if primed is not None and read[0] - primed > 5 * MS:
                    break
            sent_ns = await waited(sender, 1000, 0.08)
        transport.close()
        return sent_ns, read[0], stamps.take(77, 1000), stamps.take(77, 1000), stamps.watching

    sent_ns, read_ns, stamp, again, watching = asyncio.run(scenario())
    assert watching == 1 and stamp is not None and again is None
    assert read_ns - sent_ns >= 80 * MS
    assert abs(stamp - sent_ns) < 5 * MS  # loopback delivery plus the clocks' pairing


def test_settled_digital_silence_reuses_the_encoders_packet_and_speech_is_encoded_again():
    from voicelab.endpoints.webrtc._opus import FRAME_SAMPLES, SETTLED_ZERO_FRAMES

    encoder = OpusLineEncoder()
    rng = np.random.default_rng(5)  # loud in every frame: no zero frame inside it
    speech = (rng.standard_normal(FRAME_SAMPLES * 10) * 4000).astype(np.int16)
    zeros = np.zeros(FRAME_SAMPLES * (SETTLED_ZERO_FRAMES + 20), dtype=np.int16)
    first = encoder.push(speech)
    quiet = encoder.push(zeros)
    again = encoder.push(speech)
    assert len(first) == 10 and len(quiet) == SETTLED_ZERO_FRAMES + 20 and len(again) == 10
    assert encoder.frames_reused == 20
    assert len(set(quiet[SETTLED_ZERO_FRAMES - 1:])) == 1  # the settled packet, then reused
    decoder = OpusLineDecoder()
    decoded = [decoder.push(packet) for packet in first + quiet + again]
    assert all(pcm is not None for pcm in decoded)
    tail = np.concatenate([pcm for pcm in decoded[-8:] if pcm is not None])
    assert np.abs(tail.astype(np.int32)).max() > 1000  # the speech after it decodes as speech
