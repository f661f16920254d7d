"""The SIP double's wire code as pure functions: SIP messages, stream framing, SDP, RTP and
telephone-event payloads, digest verification, INFO keys; each bounded against hostile input."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from voicelab.audio import PcmAudio
from voicelab.doubles.sip import _auth
from voicelab.doubles.sip._codec import decoder, encode, speech_start, timestamp_step
from voicelab.doubles.sip._keys import KeyReader
from voicelab.doubles.sip._media import FRAME_BYTES, RateLimit
from voicelab.doubles.sip._rtp import (
    RtpPacket,
    build_key_event,
    build_rtp,
    is_rtcp,
    parse_key_event,
    parse_rtp,
    sender_report,
)
from voicelab.doubles.sip._sdp import SdpError, answer, parse_offer
from voicelab.doubles.sip._sip import (
    SipError,
    dialog_request,
    framed,
    parse_message,
    response,
)

INVITE = (b"INVITE sip:agent@127.0.0.1:5070 SIP/2.0\r\n"
          b"v: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bKabc\r\n"
          b"Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKdef\r\n"
          b"f: <sip:caller@127.0.0.1>;tag=1\r\nt: <sip:agent@127.0.0.1>\r\ni: call-1\r\n"
          b"CSeq: 7 INVITE\r\nm: <sip:caller@127.0.0.1:5061>\r\n"
          b"Subject: folded\r\n  on two lines\r\nl: 4\r\n\r\nbodyEXTRA")


def test_a_request_reads_compact_and_folded_headers_and_its_declared_body() -> None:
    message = parse_message(INVITE)
    assert (message.method, message.uri, message.call_id) == ("INVITE", "sip:agent@127.0.0.1:5070",
                                                              "call-1")
    assert message.cseq == (7, "INVITE") and message.branch == "z9hG4bKabc"
    assert len(message.values("via")) == 2 and message.header("subject") == "folded on two lines"
    assert message.body == b"body"


def test_a_response_copies_every_via_and_tags_the_to() -> None:
    text = response(parse_message(INVITE), 486, to_tag="xyz").decode()
    assert text.startswith("SIP/2.0 486 Busy Here\r\n")
    assert text.count("Via: ") == 2 and "To: <sip:agent@127.0.0.1>;tag=xyz" in text
    assert "CSeq: 7 INVITE" in text and text.endswith("Content-Length: 0\r\n\r\n")


def test_a_request_in_the_dialog_swaps_from_and_to_and_targets_the_contact() -> None:
    text = dialog_request(parse_message(INVITE), method="BYE", cseq=1, to_tag="xyz",
                          transport="UDP", local=("127.0.0.1", 5070), extra=[]).decode()
    assert text.startswith("BYE sip:caller@127.0.0.1:5061 SIP/2.0\r\n")
    assert "From: <sip:agent@127.0.0.1>;tag=xyz" in text
    assert "To: <sip:caller@127.0.0.1>;tag=1" in text and ";branch=z9hG4bK" in text


@pytest.mark.parametrize(("data", "reason"), [
    (b"x" * 70_000, "message of 70000 bytes"),
    (b"INVITE sip:a SIP/2.0\r\n" + b"X: y\r\n" * 101 + b"\r\n", "more than 100 header lines"),
    (b"INVITE sip:a SIP/2.0\r\nX: " + b"y" * 9000 + b"\r\n\r\n", "a line over"),
    (b"HELLO\r\n\r\n", "not a SIP/2.0"),
    (b"INVITE sip:a SIP/2.0\r\nno colon\r\n\r\n", "without a name"),
    (b"INVITE sip:a SIP/2.0\r\nContent-Length: 99\r\n\r\nshort", "larger than the body"),
    (b"INVITE sip:a SIP/2.0\r\nX: \xff\r\n\r\n", "not UTF-8"),
    (b"INVITE sip:a SIP/2.0", "no blank line"),
])
def test_hostile_messages_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(SipError, match=reason):
        parse_message(data)


def test_a_stream_frames_by_content_length_within_the_limit() -> None:
    message = b"OPTIONS sip:a SIP/2.0\r\nl: 3\r\n\r\nabc"
    assert framed(b"\r\n\r\n" + message + b"NEXT") == (message, 4 + len(message))
    assert framed(message[:-1]) is None  # the body is still coming
    with pytest.raises(SipError, match="without Content-Length"):
        framed(b"OPTIONS sip:a SIP/2.0\r\n\r\n")
    with pytest.raises(SipError, match="at most"):
        framed(b"OPTIONS sip:a SIP/2.0\r\nContent-Length: 999999\r\n\r\n")
    with pytest.raises(SipError, match="no end of the header fields"):
        framed(b"X" * 70_000)


OFFER = (b"v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n"
         b"m=audio 4000 RTP/AVP 9 8 0 101\r\nc=IN IP4 127.0.0.2\r\na=rtpmap:9 G722/8000\r\n"
         b"a=rtpmap:101 telephone-event/8000\r\na=sendonly\r\nm=video 5000 RTP/AVP 96\r\n")


def test_the_offer_gives_the_media_address_codec_and_telephone_event() -> None:
    offer = parse_offer(OFFER)
    assert (offer.address, offer.port, offer.direction) == ("127.0.0.2", 4000, "sendonly")
    assert offer.codec() == (8, "PCMA") and offer.telephone_event == 101
    text = answer(offer, address="127.0.0.1", port=6000, payload_type=8, codec="PCMA").decode()
    assert "m=audio 6000 RTP/AVP 8 101\r\n" in text and "a=fmtp:101 0-16" in text
    assert offer.rtcp == ("127.0.0.2", 4001)  # RTP's port + 1 when no a=rtcp
    assert parse_offer(OFFER.replace(b"a=sendonly", b"a=rtcp:4711 IN IP4 127.0.0.2")).rtcp == \
        ("127.0.0.2", 4711)
    assert "a=rtcp:6001" in answer(offer, address="127.0.0.1", port=6000, payload_type=8,
                                   codec="PCMA", rtcp_port=6001).decode()
    padded = answer(offer, address="127.0.0.1", port=6000, payload_type=8, codec="PCMA",
                    padding_bytes=100_000)
    assert len(padded) > 100_000


@pytest.mark.parametrize(("body", "reason"), [
    (b"v=0\r\n" + b"a=x\r\n" * 300, "more than 256 lines"),
    (b"a" * 20_000, "16384"),
    (b"v=0\r\nc=IN IP4 1.2.3.4\r\n", "without an audio stream"),
    (b"v=0\r\nm=audio 4000 RTP/AVP 0\r\n", "without a connection address"),
    (b"c=IN IP6 ::1\r\nm=audio 4000 RTP/AVP 0\r\n", "IN IP4"),
    (b"c=IN IP4 1.2.3.4\r\nm=audio 4000 RTP/SAVP 0\r\n", "only RTP/AVP"),
    (b"c=IN IP4 1.2.3.4\r\nm=audio 70000 RTP/AVP 0\r\n", "port out of range"),
    (b"c=IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP " + b"0 " * 40 + b"\r\n", "at most 32"),
])
def test_hostile_offers_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(SdpError, match=reason):
        parse_offer(body)


def test_rtp_round_trips_and_malformed_packets_are_none() -> None:
    packet = RtpPacket(0, True, 65535, 2**32 - 1, 1234, b"\xff" * 160)
    assert parse_rtp(build_rtp(packet)) == packet
    header = build_rtp(packet)[:12]
    assert parse_rtp(header[:11]) is None  # too short
    assert parse_rtp(b"\x40" + header[1:]) is None  # version 1
    assert parse_rtp(b"\x8f" + header[1:]) is None  # 15 CSRCs announced, none there
    assert parse_rtp(b"\x90" + header[1:] + b"\x00\x00\xff\xff") is None  # extension too long
    assert parse_rtp(b"\xa0" + header[1:] + b"ab\x09") is None  # padding past the payload
    assert parse_rtp(header + b"x" * 1501) is None  # payload over the limit
    extended = b"\x90" + header[1:] + b"\xbe\xde\x00\x01" + b"abcd" + b"payload"
    assert parse_rtp(extended).payload == b"payload"


def test_telephone_events_and_info_bodies_give_keys() -> None:
    event = parse_key_event(build_key_event("#", end=True, duration=800))
    assert (event.key, event.end, event.duration) == ("#", True, 800)
    assert parse_key_event(struct.pack("!BBH", 16, 0, 0)) is None  # not a key
    assert parse_key_event(b"\x01\x02") is None
    assert KeyReader.info_key("application/dtmf-relay", b"Signal=*\r\nDuration=250\r\n") == "*"
    assert KeyReader.info_key("application/dtmf", b" 9 ") == "9"
    for kind, body, reason in [("text/plain", b"1", "carries no key"),
                               ("application/dtmf", b"12", "not one key"),
                               ("application/dtmf-relay", b"Signal=1\nDuration=x", "Duration"),
                               ("application/dtmf", b"1" * 2000, "over 1024")]:
        with pytest.raises(ValueError, match=reason):
            KeyReader.info_key(kind, body)


def test_digest_known_answers_rfc2617_and_rfc7616() -> None:
    md5 = {"username": "Mufasa", "realm": "testrealm@host.com", "qop": "auth",
           "nonce": "dcd98b7102dd2f0e8b11d0f600bfb0c093", "uri": "/dir/index.html",
           "nc": "00000001", "cnonce": "0a4f113b"}
    assert _auth.expected_response(md5, method="GET", password="Circle Of Life",
                                   algorithm="MD5") == "6629fae49393a05397450978507c4ef1"
    sha = {"username": "Mufasa", "realm": "http-auth@example.org", "qop": "auth",
           "nonce": "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", "uri": "/dir/index.html",
           "nc": "00000001", "cnonce": "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"}
    assert _auth.expected_response(sha, method="GET", password="Circle of Life",
                                   algorithm="SHA-256") == \
        "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"


def test_digest_verification_refuses_what_it_did_not_issue() -> None:
    nonce = _auth.new_nonce()
    given = {"username": "u", "realm": "r", "nonce": nonce, "uri": "sip:a", "qop": "auth",
             "nc": "00000001", "cnonce": "c"}
    good = _auth.expected_response(given, method="INVITE", password="p", algorithm="MD5")
    header = ("Digest " + ", ".join(f'{k}="{v}"' for k, v in given.items())
              + f', response="{good}"')
    check = dict(method="INVITE", username="u", password="p", realm="r", algorithm="MD5")
    assert _auth.verify(header, nonces={nonce}, **check) is None
    assert _auth.verify(header, nonces=set(), **check) == "a nonce the double never issued"
    assert _auth.verify(header.replace(good, "0" * 32), nonces={nonce}, **check) == \
        "wrong response hash"
    assert _auth.verify("Basic dTpw", nonces={nonce}, **check) is not None
    assert _auth.parameters("Digest " + "a=b, " * 30) is None  # over the parameter count
    assert _auth.parameters("Digest " + "x" * 5000) is None


def test_frames_are_20_ms_and_the_rate_limit_counts_what_it_drops() -> None:
    frames = encode(PcmAudio(np.zeros(8000 * 21 // 1000, np.int16), 8000), "PCMA")
    assert [len(f) for f in frames] == [FRAME_BYTES, FRAME_BYTES]  # 21 ms: padded
    assert frames[1][-1:] == b"\xd5"  # A-law silence
    limit = RateLimit(3)
    assert [limit.allow(10**9 + i) for i in range(5)] == [True, True, True, False, False]
    assert limit.allow(3 * 10**9) and limit.dropped == 2


OPUS_OFFER = (b"v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 4000 RTP/AVP 111 0 101 102\r\n"
              b"a=rtpmap:111 opus/48000/2\r\na=fmtp:111 useinbandfec=1\r\n"
              b"a=rtpmap:101 telephone-event/8000\r\na=rtpmap:102 telephone-event/48000\r\n")


def test_the_double_answers_opus_with_telephone_event_on_its_clock() -> None:
    offer = parse_offer(OPUS_OFFER)
    assert offer.codec() == (111, "OPUS")
    assert offer.telephone_event == 102 and offer.telephone_event_for("OPUS") == (102, 48000)
    assert offer.telephone_event_for("PCMU") == (101, 8000)
    text = answer(offer, address="127.0.0.1", port=6000, payload_type=111, codec="OPUS").decode()
    assert "m=audio 6000 RTP/AVP 111 102\r\n" in text
    assert "a=rtpmap:111 opus/48000/2\r\n" in text and "telephone-event/48000" in text
    g711_first = parse_offer(OPUS_OFFER.replace(b"111 0 101", b"0 111 101"))
    assert (g711_first.codec(), g711_first.telephone_event) == ((0, "PCMU"), 101)


def test_the_doubles_opus_frames_decode_and_garbage_is_refused() -> None:
    t = np.arange(8000) / 8000
    tone = PcmAudio((8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16), 8000)
    frames = encode(tone, "OPUS")
    assert len(frames) == 50 and timestamp_step("OPUS") == 960
    decode = decoder("OPUS")
    heard = np.concatenate([decode(frame) for frame in frames])
    assert heard.size == 8000 and 5000 < np.abs(heard[800:]).max() < 11000
    start = speech_start(frames, "OPUS")
    assert start is not None and start[0] == 0  # audible in the first frame, after look-ahead
    with pytest.raises(ValueError):
        decode(b"\x03\xff\xff\xff")


def test_a_sender_report_is_a_compound_packet_with_a_cname() -> None:
    data = sender_report(ssrc=7, rtp_timestamp=1600, packets=10, octets=1600)
    assert len(data) % 4 == 0 and is_rtcp(data) and not is_rtcp(b"\x80\x00" + data[2:])
    first, kind, length, ssrc = struct.unpack_from("!BBHI", data)
    assert (first, kind, length, ssrc) == (0x80, 200, 6, 7)
    assert struct.unpack_from("!III", data, 16) == (1600, 10, 1600)
    sdes_first, sdes_kind, sdes_length = struct.unpack_from("!BBH", data, 28)
    assert (sdes_first, sdes_kind) == (0x81, 202) and 28 + 4 * (sdes_length + 1) == len(data)
