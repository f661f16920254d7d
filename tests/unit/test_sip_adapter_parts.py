"""The SIP adapter's own parts: its settings, and how the product's RTP becomes audio (loss
concealed as silence, late packets dropped) — the call itself is tested in
tests/integration/test_sip_*.py."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, alaw_encode, mulaw_encode
from voicelab.endpoints import abilities_of, load_endpoint_class
from voicelab.endpoints.sip import SipEndpoint, SipSettings
from voicelab.endpoints.sip._endpoint import MAX_CONCEALED_PACKETS, _Arrivals
from voicelab.endpoints.sip._types import RtpPacket
from voicelab.errors import ConfigError

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
    ({"uri": "sip:agent@host", "codecs": ["opus"]}, "codecs"),
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
