"""The SIP adapter's own parts: its settings, and how the product's RTP becomes audio (loss
concealed as silence, late packets dropped) — the call itself is tested in
tests/integration/test_sip_*.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, alaw_encode, mulaw_encode
from voicelab.endpoints import abilities_of, load_endpoint_class
from voicelab.endpoints.sip import SipEndpoint, SipSettings
from voicelab.endpoints.sip._arrivals import MAX_CONCEALED_PACKETS
from voicelab.endpoints.sip._arrivals import Arrivals as _Arrivals
from voicelab.endpoints.sip._codecs import (
    MAX_OPUS_PACKET_MS,
    MAX_OPUS_PAYLOAD_BYTES,
    OpusEncoder,
    conversion_delay_ms,
    rtp_samples_per_frame,
)
from voicelab.endpoints.sip._types import RtpPacket
from voicelab.errors import ConfigError, MissingDependencyError

FRAME = 160  # G.711 bytes in 20 ms


def packet(sequence: int, payload: bytes, *, payload_type: int = 0) -> RtpPacket:
    return RtpPacket(received_ns=sequence * 20_000_000, sequence=sequence & 0xFFFF,
                     timestamp=sequence * FRAME, payload_type=payload_type, marker=False,
                     ssrc=1234, payload=payload)


def tone_frame(index: int) -> bytes:
    t = (np.arange(FRAME) + index * FRAME) / 8000
    return mulaw_encode((8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16))


def test_the_adapter_is_a_listening_phone_wire_with_keys() -> None:
    adapter = load_endpoint_class("sip")
    abilities = abilities_of(adapter)
    assert adapter is SipEndpoint
    assert abilities.sends_dtmf and abilities.wire_codec == "mulaw"
    assert abilities.turn_taking({"uri": "sip:agent@127.0.0.1"}) == "server_vad"
    assert abilities.conversion_delay_ms["to_user"] > 0


@pytest.mark.parametrize("settings, key", [
    ({"uri": "http://agent"}, "uri"),
    ({"uri": "sip:agent@127.0.0.1:99999"}, "uri"),
    ({"uri": "sip:agent@host", "local_address": "localhost"}, "local_address"),
    ({"uri": "sip:agent@host", "codecs": ["g729"]}, "codecs"),
    ({"uri": "sip:agent@host", "codecs": ["pcmu", "pcmu"]}, "codecs"),
    ({"uri": "sip:agent@host", "transport": "sctp"}, "transport"),
    ({"uri": "sip:agent@host", "dtmf": "inband"}, "dtmf"),
    ({"uri": "sip:agent@host", "headers": {"Via": "x"}}, "headers"),
    ({"uri": "sip:agent@host", "headers": {"X-Test": "a\r\nInjected: 1"}}, "headers"),
    ({"uri": "sip:agent@host", "headers": {"Bad Name": "1"}}, "headers"),
    ({"uri": "sip:agent@host", "username": "caller"}, ""),
    ({"uri": "sip:agent@host", "ringing": True}, "ringing"),
])
def test_bad_settings_are_one_line_naming_the_key(settings: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SipEndpoint.check_settings(settings)
    assert "\n" not in str(caught.value)
    assert f"endpoint.settings{'.' + key if key else ''}" in str(caught.value)


def test_the_password_never_appears_in_a_settings_error() -> None:
    with pytest.raises(ConfigError) as caught:
        SipEndpoint.check_settings({"uri": "sip:agent@host", "password": "hunter2-secret"})
    assert "hunter2-secret" not in str(caught.value)


def test_good_settings_parse_with_their_defaults() -> None:
    settings = SipSettings(uri="sip:agent@[::1]:5070;transport=tcp", transport="tcp",
                           username="caller", password="pw", headers={"X-Test-Id": "42"})
    assert settings.codecs == ["pcmu", "pcma"] and settings.dtmf == "rfc4733"
    assert settings.chunk_ms == 20.0


def test_arrivals_in_order_give_the_whole_stream() -> None:
    arrivals = _Arrivals()
    pcm = b"".join(arrivals.decode(packet(n, tone_frame(n))) or b"" for n in range(10))
    assert len(pcm) == 10 * FRAME * 3 * 2  # three canonical samples a byte, two bytes each
    assert arrivals.concealed_packets == arrivals.late_packets == 0


def test_a_lost_packet_is_concealed_as_silence_of_its_length() -> None:
    arrivals = _Arrivals()
    first = arrivals.decode(packet(0, tone_frame(0)))
    after_gap = arrivals.decode(packet(3, tone_frame(3)))  # 1 and 2 were lost
    assert first is not None and after_gap is not None
    assert len(after_gap) == 3 * len(first)
    samples = np.frombuffer(after_gap, dtype=np.int16)
    per_packet = FRAME * CANONICAL_SAMPLE_RATE_HZ // 8000
    # the two lost packets are silent (past the filter's tail of the previous packet)
    assert np.abs(samples[200:2 * per_packet]).max() < 200
    assert arrivals.concealed_packets == 2


def test_late_and_duplicate_packets_are_dropped_and_counted() -> None:
    arrivals = _Arrivals()
    for n in (0, 1, 2):
        arrivals.decode(packet(n, tone_frame(n)))
    assert arrivals.decode(packet(1, tone_frame(1))) is None
    assert arrivals.decode(packet(2, tone_frame(2))) is None
    assert arrivals.late_packets == 2


def test_a_long_gap_is_a_new_talk_spurt_not_concealed() -> None:
    arrivals = _Arrivals()
    arrivals.decode(packet(0, tone_frame(0)))
    resumed = arrivals.decode(packet(MAX_CONCEALED_PACKETS + 5, tone_frame(1)))
    assert resumed is not None and len(resumed) == FRAME * 3 * 2
    assert arrivals.concealed_packets == 0


def test_sequence_numbers_wrap() -> None:
    arrivals = _Arrivals()
    arrivals.decode(packet(0xFFFF, tone_frame(0)))
    assert arrivals.decode(packet(0x10000, tone_frame(1))) is not None  # sequence 0
    assert arrivals.late_packets == 0 and arrivals.concealed_packets == 0


def test_a_payload_type_it_does_not_decode_gives_nothing() -> None:
    assert _Arrivals().decode(packet(0, b"\x00" * 4, payload_type=101)) is None


def test_a_codec_change_starts_a_new_decoder() -> None:
    arrivals = _Arrivals()
    arrivals.decode(packet(0, tone_frame(0)))
    t = np.arange(FRAME) / 8000
    tone = alaw_encode((8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16))
    alaw = arrivals.decode(packet(500, tone, payload_type=8))
    assert alaw is not None  # decoded as A-law: a tone of its loudness, not mu-law noise
    peak = np.abs(np.frombuffer(alaw, dtype=np.int16)[100:]).max()
    assert 6000 < peak < 9000


def test_silence_between_replies_is_counted_not_delivered() -> None:
    """A phone streams silence between its replies: past a short hangover it is withheld, so
    one late packet cannot delay every later reply on the listener's clock."""
    arrivals = _Arrivals()
    silence = b"\xff" * FRAME
    assert arrivals.decode(packet(0, silence)) is None  # before any speech
    assert arrivals.decode(packet(1, tone_frame(1))) is not None
    pause = [arrivals.decode(packet(n, silence)) for n in range(2, 60)]  # 1.16 s of silence
    delivered = sum(chunk is not None for chunk in pause)
    # the pause inside a reply still plays, 600 ms of it (from the last audible packet: the
    # first silent one still carries the line filter's tail of the tone)
    assert delivered in (600 // 20, 600 // 20 + 1)
    assert arrivals.silence_withheld == 1 + len(pause) - delivered
    assert arrivals.decode(packet(60, tone_frame(60))) is not None


# --- Opus (RFC 7587) ------------------------------------------------------------------------

OPUS_TYPE = 111


def opus_packets(count: int) -> list[bytes]:
    """``count`` 20 ms packets of a 440 Hz tone, coded by the adapter's own encoder."""
    t = np.arange(count * 480) / CANONICAL_SAMPLE_RATE_HZ
    tone = (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
    return OpusEncoder().push(tone)


def opus_arrivals() -> _Arrivals:
    arrivals = _Arrivals()
    arrivals.use("opus", OPUS_TYPE)
    return arrivals


def test_opus_packets_decode_to_their_duration_at_24_khz() -> None:
    arrivals = opus_arrivals()
    chunks = [arrivals.decode(packet(n, p, payload_type=OPUS_TYPE))
              for n, p in enumerate(opus_packets(10))]
    pcm = np.frombuffer(b"".join(chunk or b"" for chunk in chunks), dtype=np.int16)
    assert pcm.size == 10 * 480  # 20 ms a packet at 24 kHz: no resampler
    assert 6000 < np.abs(pcm[2000:]).max() < 10000  # the tone, at its loudness
    assert arrivals.undecodable_packets == 0


def test_garbage_opus_payloads_are_counted_never_raised() -> None:
    arrivals = opus_arrivals()
    rng = np.random.default_rng(7)
    hostile = [b"", b"\xff" * (MAX_OPUS_PAYLOAD_BYTES + 1), b"\x03\xff\xff\xff",
               *(rng.integers(0, 256, size=int(rng.integers(1, 300)), dtype=np.uint8).tobytes()
                 for _ in range(200))]
    for n, payload in enumerate(hostile):
        chunk = arrivals.decode(packet(n, payload, payload_type=OPUS_TYPE))
        if chunk is not None:  # random bytes may be a valid packet: bounded by what it says
            assert len(chunk) <= 2 * CANONICAL_SAMPLE_RATE_HZ * MAX_OPUS_PACKET_MS // 1000
    assert arrivals.undecodable_packets >= 3  # empty, oversized, and a code-3 packet of no frames


def test_a_lost_opus_packet_is_concealed_as_silence_of_the_last_packets_length() -> None:
    arrivals = opus_arrivals()
    packets = opus_packets(4)
    first = arrivals.decode(packet(0, packets[0], payload_type=OPUS_TYPE))
    after_gap = arrivals.decode(packet(3, packets[3], payload_type=OPUS_TYPE))
    assert first is not None and after_gap is not None
    assert len(after_gap) == 3 * len(first) and arrivals.concealed_packets == 2
    assert not np.frombuffer(after_gap, dtype=np.int16)[:2 * 480].any()


def test_the_opus_line_is_coded_once_at_24_khz_with_a_48_khz_rtp_clock() -> None:
    assert rtp_samples_per_frame("opus") == 960 and rtp_samples_per_frame("pcmu") == 160
    assert conversion_delay_ms("opus") == {"to_product": 6.5, "to_user": 0.0}
    assert OpusEncoder()._encoder.lookahead == 156  # 6.5 ms at 24 kHz, as declared
    encoder = OpusEncoder()
    assert encoder.push(np.zeros(300, dtype=np.int16)) == []  # under one 20 ms frame
    assert len(encoder.push(np.zeros(700, dtype=np.int16))) == 2


def test_opus_without_its_package_is_a_configuration_error_naming_the_key(monkeypatch) -> None:
    SipEndpoint.check_settings({"uri": "sip:agent@host", "codecs": ["opus", "pcmu"]})
    monkeypatch.setitem(sys.modules, "opuslib_next", None)
    SipEndpoint.check_settings({"uri": "sip:agent@host"})  # G.711 alone needs nothing
    with pytest.raises(MissingDependencyError) as raised:
        SipEndpoint.check_settings({"uri": "sip:agent@host", "codecs": ["pcmu", "opus"]})
    assert raised.value.key == "endpoint.settings.codecs"
    assert "pip install 'voicelab[telephony]'" in raised.value.message


def test_libopus_is_not_loaded_by_the_command_line_or_the_adapter_until_a_call_needs_it() -> None:
    code = ("import sys, voicelab.cli, voicelab.endpoints.sip, voicelab.doubles.sip; "
            "print('opuslib_next' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, timeout=60)
    assert shown.stdout.strip() == "False"
