"""The SIP wire modules: messages, URIs, SDP, digest, RTP and telephone-event packets."""

import struct

import pytest

from voicelab.endpoints.sip._digest import (
    Challenge,
    DigestError,
    authorization,
    best_challenge,
    digest_response,
    parse_challenge,
)
from voicelab.endpoints.sip._message import (
    MAX_HEADERS,
    MAX_MESSAGE_BYTES,
    MessageError,
    SipMessage,
    StreamFramer,
    parse_message,
    via_params,
)
from voicelab.endpoints.sip._rtp import (
    ReceiveStats,
    TelephoneEvent,
    event_code,
    is_rtcp,
    pack_event,
    pack_rtp,
    parse_event,
    parse_rtcp,
    parse_rtp,
)
from voicelab.endpoints.sip._sdp import (
    SdpError,
    build_sdp,
    choose_audio,
    offer_events,
    offer_formats,
    parse_sdp,
    reflect_direction,
)
from voicelab.endpoints.sip._uri import UriError, parse_name_addr, parse_uri

INVITE = (b"INVITE sip:agent@127.0.0.1:5070 SIP/2.0\r\n"
          b"v: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bKabc;rport\r\n"
          b"f: <sip:caller@127.0.0.1>;tag=1\r\n"
          b"t: <sip:agent@127.0.0.1:5070>\r\n"
          b"i: call-1\r\n"
          b"CSeq: 1 INVITE\r\n"
          b"Subject: a folded\r\n  header\r\n"
          b"c: application/sdp\r\n"
          b"l: 4\r\n\r\nbodyEXTRA")


# --- messages -------------------------------------------------------------------------------

def test_compact_forms_are_expanded_and_folded_lines_joined():
    message = parse_message(INVITE)
    assert message.method == "INVITE" and message.request_uri == "sip:agent@127.0.0.1:5070"
    assert message.header("Call-ID") == "call-1"
    assert message.header("via") == "SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bKabc;rport"
    assert via_params(message.header("Via") or "")["branch"] == "z9hG4bKabc"
    assert message.header("Subject") == "a folded header"
    assert message.body == b"body"  # past Content-Length is not the body
    assert message.cseq() == (1, "INVITE")


def test_a_message_round_trips():
    message = SipMessage(status=180, reason="Ringing",
                         headers=[("Via", "SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b"),
                                  ("CSeq", "2 INVITE")], body=b"x")
    again = parse_message(message.to_bytes())
    assert (again.status, again.reason, again.body) == (180, "Ringing", b"x")
    assert again.headers_named("Via") == ["SIP/2.0/UDP a;branch=z9hG4bK1", "SIP/2.0/UDP b"]
    assert again.header("Content-Length") == "1"


@pytest.mark.parametrize(("data", "kind"), [
    (b"SIP/2.0 200 OK\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", "too_many_headers"),
    (b"SIP/2.0 200 OK\r\nX: " + b"y" * MAX_MESSAGE_BYTES + b"\r\n\r\n", "oversized_message"),
    (b"HTTP/1.1 200 OK\r\n\r\n", "malformed"),
    (b"INVITE sip:a@b\r\n\r\n", "malformed"),
    (b"SIP/2.0 200 OK\r\nno colon here\r\n\r\n", "malformed"),
    (b"SIP/2.0 200 OK\r\nContent-Length: 99\r\n\r\nshort", "malformed"),
    (b"SIP/2.0 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed"),
    (b"", "malformed"),
    (b"\xff\xfe\x00garbage", "malformed"),
])
def test_hostile_messages_are_named_errors(data, kind):
    with pytest.raises(MessageError) as raised:
        parse_message(data)
    assert raised.value.kind == kind


def test_bad_cseq_is_a_message_error():
    with pytest.raises(MessageError):
        parse_message(b"SIP/2.0 200 OK\r\nCSeq: x\r\n\r\n").cseq()


def test_the_tcp_framer_splits_by_content_length_across_reads():
    framer = StreamFramer()
    two = INVITE.replace(b"bodyEXTRA", b"body") * 2
    assert framer.feed(b"\r\n" + two[:50]) == []
    messages = framer.feed(two[50:])
    assert [m.body for m in messages] == [b"body", b"body"]


def test_the_tcp_framer_bounds_a_head_and_a_body():
    with pytest.raises(MessageError) as raised:
        StreamFramer().feed(b"SIP/2.0 200 OK\r\n" + b"X: y\r\n" * 20000)
    assert raised.value.kind == "oversized_message"
    with pytest.raises(MessageError) as raised:
        StreamFramer().feed(b"SIP/2.0 200 OK\r\nl: 900000\r\n\r\n")
    assert raised.value.kind == "oversized_message"


# --- URIs -----------------------------------------------------------------------------------

def test_uris_parse_with_ports_and_transport():
    uri = parse_uri("sip:agent@127.0.0.1:5070;transport=TCP")
    assert (uri.user, uri.host, uri.port, uri.transport) == ("agent", "127.0.0.1", 5070, "tcp")
    assert str(uri) == "sip:agent@127.0.0.1:5070;transport=TCP"
    plain = parse_uri("sip:pbx.example.org")
    assert (plain.user, plain.port, plain.effective_port) == (None, None, 5060)
    assert parse_uri("sip:a@[::1]:5062").host == "[::1]"


@pytest.mark.parametrize("text", ["http://x", "sip:", "sip:a@b:99999", "sip:a@b:x",
                                  "sip:a b@c", "sip:a@ho st", "sip:" + "a" * 2000,
                                  "sip:a@b;bad param=1"])
def test_bad_uris_are_refused(text):
    with pytest.raises(UriError):
        parse_uri(text)


def test_name_addr_tags():
    assert parse_name_addr('"Agent" <sip:a@b;lr>;tag=xy').tag == "xy"
    assert parse_name_addr('"Agent" <sip:a@b;lr>;tag=xy').uri == "sip:a@b;lr"
    assert parse_name_addr("sip:a@b;tag=z").tag == "z"
    with pytest.raises(UriError):
        parse_name_addr("<sip:a@b")


# --- SDP ------------------------------------------------------------------------------------

def test_an_offer_is_answered_and_negotiated():
    offer = build_sdp(address="127.0.0.1", port=4000, rtcp_port=4001,
                      formats=offer_formats(("pcmu", "pcma")),
                      telephone_events=offer_events(("pcmu", "pcma")), session_id=7)
    assert b"m=audio 4000 RTP/AVP 0 8 101\r\n" in offer and b"a=rtcp:4001" in offer
    answer = (b"v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.2\r\nt=0 0\r\n"
              b"m=video 0 RTP/AVP 96\r\nm=audio 5000 RTP/AVP 8 96\r\n"
              b"a=rtpmap:96 telephone-event/8000\r\na=sendonly\r\n")
    choice = choose_audio(parse_sdp(answer), ("pcmu", "pcma"))
    assert (choice.codec, choice.payload_type, choice.telephone_event) == ("pcma", 8, 96)
    assert (choice.address, choice.port, choice.direction) == ("127.0.0.2", 5000, "sendonly")
    assert reflect_direction(choice.direction) == "recvonly"


def test_opus_is_offered_as_a_dynamic_type_at_48000_2_with_its_own_event_clock():
    offer = build_sdp(address="127.0.0.1", port=4000, rtcp_port=None,
                      formats=offer_formats(("opus", "pcmu")),
                      telephone_events=offer_events(("opus", "pcmu")), session_id=7)
    assert b"m=audio 4000 RTP/AVP 111 0 101 102\r\n" in offer
    assert b"a=rtpmap:111 opus/48000/2\r\n" in offer
    assert b"a=fmtp:111 useinbandfec=1;maxplaybackrate=24000;stereo=0;sprop-stereo=0\r\n" \
        in offer
    assert b"a=rtpmap:102 telephone-event/48000\r\n" in offer
    media = parse_sdp(offer).audio()
    assert media is not None and media.fmtp[111].startswith("useinbandfec=1")
    # the answer's first codec we offered wins; telephone-event on the codec's clock
    answer = (b"v=0\r\nc=IN IP4 127.0.0.2\r\nm=audio 5000 RTP/AVP 96 0 101 97\r\n"
              b"a=rtpmap:96 OPUS/48000/2\r\na=rtpmap:101 telephone-event/8000\r\n"
              b"a=rtpmap:97 telephone-event/48000\r\n")
    choice = choose_audio(parse_sdp(answer), ("pcmu", "opus"))
    assert (choice.codec, choice.payload_type) == ("opus", 96)
    assert (choice.telephone_event, choice.event_clock_hz) == (97, 48000)
    g711 = choose_audio(parse_sdp(answer.replace(b" 96 0 ", b" 0 96 ")), ("pcmu", "opus"))
    assert (g711.codec, g711.telephone_event, g711.event_clock_hz) == ("pcmu", 101, 8000)


def test_opus_at_another_clock_is_not_opus():
    sdp = (b"v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 5000 RTP/AVP 96\r\n"
           b"a=rtpmap:96 opus/16000\r\n")
    with pytest.raises(SdpError):
        choose_audio(parse_sdp(sdp), ("opus",))


def test_dynamic_payload_types_map_by_rtpmap():
    sdp = (b"v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 5000 RTP/AVP 97\r\n"
           b"a=rtpmap:97 PCMU/8000\r\n")
    assert choose_audio(parse_sdp(sdp), ("pcmu",)).payload_type == 97


@pytest.mark.parametrize(("sdp", "hostile"), [
    (b"v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio 5000 RTP/AVP 18\r\n", False),  # no codec in common
    (b"v=0\r\nm=audio 5000 RTP/AVP 0\r\n", False),  # no address
    (b"v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio 0 RTP/AVP 0\r\n", False),  # rejected stream
    (b"v=0\r\nnot sdp\r\n", False),
    (b"v=0\r\n" + b"a=x\r\n" * 300, True),
    (b"v=0\r\n" + b"m=audio 1 RTP/AVP 0\r\n" * 65, True),
    (b"v=0\r\n" + b"a=" + b"x" * 17000 + b"\r\n", True),
])
def test_unusable_sdps_are_refused(sdp, hostile):
    with pytest.raises(SdpError) as raised:
        choose_audio(parse_sdp(sdp), ("pcmu", "pcma"))
    assert raised.value.hostile is hostile


# --- digest ---------------------------------------------------------------------------------

def test_rfc_2617_example():
    challenge = Challenge(realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093",
                          qop=("auth",), opaque="5ccc069c403ebaf9f0171e9517f40e41")
    assert digest_response(challenge, username="Mufasa", password="Circle Of Life",
                           method="GET", uri="/dir/index.html",
                           cnonce="0a4f113b") == "6629fae49393a05397450978507c4ef1"


@pytest.mark.parametrize(("algorithm", "expected"), [
    ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
    ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
])
def test_rfc_7616_examples(algorithm, expected):
    header = ('Digest realm="http-auth@example.org", qop="auth, auth-int", '
              f'algorithm={algorithm}, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", '
              'opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"')
    challenge = parse_challenge(header)
    assert digest_response(challenge, username="Mufasa", password="Circle of Life",
                           method="GET", uri="/dir/index.html",
                           cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ") == expected
    value = authorization(challenge, username="Mufasa", password="Circle of Life",
                          method="GET", uri="/dir/index.html", new_cnonce=lambda: "c")
    assert "qop=auth" in value and 'opaque="FQhe' in value and "Circle" not in value


def test_the_strongest_challenge_is_answered_and_garbage_refused():
    values = ['Digest realm="r", nonce="n"', 'Digest realm="r", nonce="n", algorithm=SHA-256',
              'Digest realm="r", nonce="n", algorithm=SHA-512-256', 'Basic realm="r"',
              'Digest realm="r", nonce="n", algorithm=FOO']
    assert best_challenge(values).algorithm == "SHA-512-256"
    with pytest.raises(DigestError):
        best_challenge(['Basic realm="x"', 'Digest realm="unterminated'])
    # no qop: the RFC 2069 form
    plain = Challenge(realm="r", nonce="n")
    assert len(digest_response(plain, username="u", password="p", method="INVITE",
                               uri="sip:a@b", cnonce="c")) == 32


# --- RTP ------------------------------------------------------------------------------------

def test_rtp_round_trip_and_hostile_packets():
    packet = pack_rtp(payload_type=0, sequence=65535, timestamp=2**32 - 1, ssrc=7,
                      payload=b"\xff" * 160, marker=True)
    header = parse_rtp(packet)
    assert header is not None
    assert (header.sequence, header.timestamp, header.marker, header.payload_type) == (
        65535, 2**32 - 1, True, 0)
    assert len(header.payload) == 160
    assert parse_rtp(b"\x80\x00") is None
    assert parse_rtp(b"\x40" + packet[1:]) is None  # version 1
    assert parse_rtp(bytes([0xA0]) + packet[1:12] + b"\x00\x00\x05") is None  # padding > size
    assert parse_rtp(bytes([0x90]) + packet[1:12] + b"\x00\x00\xff\xff") is None  # extension
    assert parse_rtp(bytes([0x8F]) + packet[1:12]) is None  # 15 CSRCs missing
    padded = parse_rtp(bytes([0xA0]) + packet[1:] + b"\x00\x02")
    assert padded is not None and len(padded.payload) == 160


def test_telephone_events_pack_and_map():
    event = TelephoneEvent(event=event_code("#"), end=True, volume=10, duration=800)
    assert parse_event(pack_event(event)) == event
    assert event.digit == "#"
    assert [event_code(d) for d in "09*#AD"] == [0, 9, 10, 11, 12, 15]
    with pytest.raises(ValueError):
        event_code("E")
    assert parse_event(b"\x01") is None


def _packet(sequence, timestamp=0, ssrc=1):
    header = parse_rtp(pack_rtp(payload_type=0, sequence=sequence, timestamp=timestamp,
                                ssrc=ssrc, payload=b"x"))
    assert header is not None
    return header


def test_loss_duplicates_late_across_the_sequence_wrap():
    stats = ReceiveStats()
    order = [65533, 65534, 0, 0, 65535, 3]  # 65535 late, 0 duplicated, 1 and 2 lost
    accepted = [stats.accept(_packet(s), 0) for s in order]
    assert accepted == [True, True, True, False, True, True]
    assert (stats.packets, stats.duplicates, stats.late, stats.lost) == (5, 1, 1, 2)


def test_jitter_follows_rfc_3550():
    # packets every 20 ms of timestamps, arriving alternately 0 and 4 ms late: |D| = 32 units
    stats = ReceiveStats()
    expected = 0.0
    for n in range(50):
        stats.accept(_packet(n, timestamp=160 * n), 20_000_000 * n + (4_000_000 if n % 2 else 0))
        if n:
            expected += (32 - expected) / 16
    assert stats.jitter == pytest.approx(expected)
    assert stats.jitter_ms == pytest.approx(expected / 8)


def test_a_new_ssrc_starts_a_new_count():
    stats = ReceiveStats()
    for s in (10, 12):
        stats.accept(_packet(s), 0)
    for s in (500, 501):
        stats.accept(_packet(s, ssrc=2), 0)
    assert (stats.packets, stats.lost) == (4, 1)


def test_rtcp_reports_parse_within_bounds():
    block = struct.pack("!IIIIII", 9, (64 << 24) | 3, 1000, 80, 0, 0)
    sr = struct.pack("!BBHI", 0x81, 200, 12, 5) + struct.pack("!IIIII", 1, 2, 3, 4, 5) + block
    reports = parse_rtcp(sr + struct.pack("!BBHI", 0x81, 202, 1, 5))
    assert reports[0]["type"] == "sr" and reports[0]["packets_sent"] == 4
    assert reports[0]["blocks"] == [{"ssrc": 9, "fraction_lost": 0.25, "cumulative_lost": 3,
                                     "highest_sequence": 1000, "jitter_ms": 10.0}]
    assert reports[1] == {"type": 202}
    assert is_rtcp(sr) and not is_rtcp(pack_rtp(payload_type=0, sequence=1, timestamp=1,
                                                ssrc=1, payload=b""))
    assert parse_rtcp(sr[:20]) == []
    assert parse_rtcp(b"\xff" * 3) == []


def test_our_rtcp_reports_parse_back():
    from voicelab.endpoints.sip._rtcp import RtcpReporter, SenderState, ntp_time

    stats = ReceiveStats()
    for s in (1, 2, 4, 5):  # 3 lost
        stats.accept(_packet(s, timestamp=160 * s, ssrc=77), 20_000_000 * s)
    reporter = RtcpReporter("voicelab@127.0.0.1")
    msw, lsw = ntp_time(1_000.5)
    reporter.sender_report_received(((msw & 0xFFFF) << 16) | (lsw >> 16), 0)
    sr = reporter.build(ssrc=9, stats=stats, now_ns=500_000_000, unix_seconds=1_001.0,
                        sender=SenderState(ssrc=9, packets=10, octets=1600, rtp_timestamp=42))
    reports = parse_rtcp(sr)
    assert [r["type"] for r in reports] == ["sr", 202]
    assert (reports[0]["ssrc"], reports[0]["packets_sent"], reports[0]["rtp_timestamp"]) == (
        9, 10, 42)
    block = reports[0]["blocks"][0]
    assert (block["ssrc"], block["cumulative_lost"], block["highest_sequence"]) == (77, 1, 5)
    assert block["fraction_lost"] == pytest.approx(51 / 256)  # 1 of 5 expected
    lsr, dlsr = struct.unpack_from("!II", sr, 8 + 20 + 16)
    assert lsr == ((msw & 0xFFFF) << 16) | (lsw >> 16) and dlsr == 65536 // 2
    rr = parse_rtcp(reporter.build(ssrc=9, stats=stats, now_ns=0, unix_seconds=0,
                                   sender=None))
    assert rr[0]["type"] == "rr" and rr[0]["blocks"][0]["fraction_lost"] == 0.0
    assert len(sr) % 4 == 0
