"""Twilio Media Streams on the wire (no sockets): the messages voicelab sends as Twilio, the
decoder for the product's, the 8 kHz mu-law framing, the stand-in playback clock and the
adapter's settings."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from voicelab.audio import mulaw_decode, mulaw_encode
from voicelab.config import SecretScrubber
from voicelab.endpoints import EndpointContext, EndpointEvent, abilities_of, load_endpoint_class
from voicelab.endpoints._g711_line import (
    FRAME_BYTES,
    LINE_LATENCY_MS,
    LineDecoder,
    LineEncoder,
)
from voicelab.endpoints.twilio import TwilioEndpoint, TwilioSettings
from voicelab.endpoints.twilio._playback import ArrivalPlayback
from voicelab.endpoints.twilio._wire import (
    CallerStream,
    ProductClear,
    ProductDecoder,
    ProductMark,
    ProductMedia,
    StreamIdentity,
    check_digits,
    custom_parameters,
    generated_sid,
)
from voicelab.errors import ConfigError

NS = 123_456_789
IDENTITY = StreamIdentity(account_sid="AC" + "a" * 32, call_sid="CA" + "b" * 32,
                          stream_sid="MZ" + "c" * 32)
SID = IDENTITY.stream_sid


def stream(parameters: dict[str, str] | None = None) -> CallerStream:
    return CallerStream(IDENTITY, parameters=parameters or {})


def decode(message: object, scrubber: SecretScrubber | None = None):
    text = message if isinstance(message, str | bytes) else json.dumps(message)
    return ProductDecoder(scrubber or SecretScrubber(), stream_sid=SID).decode(NS, text)


# --- what voicelab sends ------------------------------------------------------------------------

def test_connected_then_start_as_twilio_documents_them():
    caller = stream({"session_id": "s-1"})
    assert json.loads(caller.connected()) == {"event": "connected", "protocol": "Call",
                                              "version": "1.0.0"}
    assert json.loads(caller.start()) == {
        "event": "start", "sequenceNumber": "1", "streamSid": SID,
        "start": {"accountSid": IDENTITY.account_sid, "streamSid": SID,
                  "callSid": IDENTITY.call_sid, "tracks": ["inbound"],
                  "customParameters": {"session_id": "s-1"},
                  "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000,
                                  "channels": 1}}}


def test_media_dtmf_mark_and_stop_are_numbered_in_the_order_built():
    caller = stream()
    caller.start()
    first = json.loads(caller.media(b"\xff" * FRAME_BYTES))
    second = json.loads(caller.media(bytes(range(160))))
    digit = json.loads(caller.dtmf("#"))
    echo = json.loads(caller.mark("reply-1"))
    stop = json.loads(caller.stop())
    assert first == {"event": "media", "sequenceNumber": "2", "streamSid": SID,
                     "media": {"track": "inbound", "chunk": "1", "timestamp": "0",
                               "payload": base64.b64encode(b"\xff" * 160).decode()}}
    # chunks count media messages only; the timestamp is the chunk's place on the line
    assert second["media"]["chunk"] == "2" and second["media"]["timestamp"] == "20"
    assert base64.b64decode(second["media"]["payload"]) == bytes(range(160))
    assert digit == {"event": "dtmf", "sequenceNumber": "4", "streamSid": SID,
                     "dtmf": {"track": "inbound_track", "digit": "#"}}
    assert echo == {"event": "mark", "sequenceNumber": "5", "streamSid": SID,
                    "mark": {"name": "reply-1"}}
    assert stop == {"event": "stop", "sequenceNumber": "6", "streamSid": SID,
                    "stop": {"accountSid": IDENTITY.account_sid, "callSid": IDENTITY.call_sid}}


def test_custom_parameters_are_strings_and_the_setting_wins():
    data = {"session_id": "s-1", "context": {"topic": "plans", "tags": ["a", "b"]},
            "priority": 2, "vip": True, "note": None, "caller": "from data"}
    parameters = custom_parameters(data, {"caller": "+15550100", "region": "eu"})
    assert parameters == {"session_id": "s-1", "context": '{"topic":"plans","tags":["a","b"]}',
                          "priority": "2", "vip": "true", "note": "null",
                          "caller": "+15550100", "region": "eu"}
    assert json.loads(parameters["context"]) == data["context"]  # JSON, readable back


def test_generated_sids_have_twilio_form_and_depend_only_on_their_parts():
    sid = generated_sid("CA", "session-1", 1, "call")
    assert re.fullmatch(r"CA[0-9a-f]{32}", sid)
    assert sid == generated_sid("CA", "session-1", 1, "call")
    assert sid != generated_sid("CA", "session-1", 2, "call")


def test_dtmf_keys():
    assert check_digits("0123456789*#") == "0123456789*#"
    for wrong in ("", "12a", "1 2", "w"):
        with pytest.raises(ValueError):
            check_digits(wrong)


# --- what the product sends --------------------------------------------------------------------

def test_media_mark_and_clear_are_decoded():
    payload = bytes(range(200))
    media = decode({"event": "media", "streamSid": SID,
                    "media": {"payload": base64.b64encode(payload).decode()}})
    assert isinstance(media, ProductMedia) and media.payload == payload
    assert media.raw == {"event": "media", "streamSid": SID,
                         "media": {"payload": {"omitted": "base64 mu-law", "byte_count": 200}}}
    mark = decode({"event": "mark", "streamSid": SID, "mark": {"name": "reply-1"}})
    assert isinstance(mark, ProductMark) and mark.name == "reply-1"
    assert isinstance(decode({"event": "clear", "streamSid": SID}), ProductClear)


@pytest.mark.parametrize("message, code", [
    ({"event": "media", "streamSid": "MZother", "media": {"payload": "/w=="}}, "wrong_stream_sid"),
    ({"event": "clear"}, "wrong_stream_sid"),
    ({"event": "mark", "streamSid": SID, "mark": {}}, "malformed_message"),
    ({"event": "media", "streamSid": SID, "media": {"payload": "not base64!"}}, "invalid_audio"),
    ("{not json", "malformed_json"),
    ("[1, 2]", "malformed_message"),
    (b"\x00\x01", "malformed_message"),
])
def test_messages_twilio_would_not_accept_are_adapter_errors(message, code):
    event = decode(message)
    assert isinstance(event, EndpointEvent) and event.type == "error"
    assert event.data["code"] == code and event.data["origin"] == "adapter"


def test_other_messages_are_kept_as_raw_events_and_secrets_scrubbed():
    event = decode({"event": "custom", "token": "s3cret-value"},
                   SecretScrubber(["s3cret-value"]))
    assert isinstance(event, EndpointEvent) and event.type == "raw"
    assert "s3cret-value" not in json.dumps(event.raw)
    empty = decode({"event": "media", "streamSid": SID, "media": {"payload": ""}})
    assert isinstance(empty, EndpointEvent) and empty.type == "raw"


# --- the line's audio ------------------------------------------------------------------------------

def tone(seconds: float, *, hz: float = 440.0, rate: int = 24_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (8000 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def test_the_encoder_gives_whole_20_ms_frames_whatever_the_chunking():
    signal = tone(1.0)
    whole = LineEncoder().push(signal)
    assert len(whole) == 50 and {len(f) for f in whole} == {FRAME_BYTES}
    encoder = LineEncoder()
    rng = np.random.default_rng(5)
    pieces, start = [], 0
    while start < signal.size:
        size = int(rng.integers(1, 1500))
        pieces += encoder.push(signal[start:start + size])
        start += size
    assert pieces == whole  # remainders carried across calls, same filter state


def test_encoder_then_decoder_returns_the_band_limited_signal_with_a_fixed_delay():
    signal = tone(0.5, hz=1000.0)
    codes = b"".join(LineEncoder().push(signal))
    decoder = LineDecoder()
    out = np.concatenate([decoder.push(codes[i:i + 160]) for i in range(0, len(codes), 160)])
    assert out.size == signal.size  # three samples a byte, nothing held back in count
    delay = round(2 * LINE_LATENCY_MS * 24)  # 87 samples each way at 24 kHz
    assert delay == 174
    settled = slice(400, signal.size - delay)  # past both filters' start-up
    error = out[settled.start + delay:settled.stop + delay].astype(float) - signal[settled]
    # mu-law's quantization (about 2 % of the amplitude at this level) and the filters' ripple
    np.testing.assert_allclose(np.sqrt(np.mean(error ** 2)) / 8000, 0.0, atol=0.03)


def test_a_reset_decoder_drops_what_its_filter_held():
    codes = mulaw_encode(tone(0.1, rate=8000))
    decoder = LineDecoder()
    decoder.push(codes)
    decoder.reset()
    silence = decoder.push(mulaw_encode(np.zeros(160, dtype=np.int16)))
    assert np.abs(silence.astype(int)).max() <= 8  # mu-law's smallest steps, no tail


def test_decoded_product_audio_is_the_same_tone_at_24_khz():
    codes = mulaw_encode(tone(0.2, hz=300.0, rate=8000))
    assert mulaw_decode(codes).samples.size == 1600
    out = LineDecoder().push(codes)
    reference = tone(0.2, hz=300.0)  # the tone the 8 kHz samples are of, at 24 kHz
    delay = round(LINE_LATENCY_MS * 24)
    # mu-law's step at this level is about 2 % of the amplitude; the interpolation adds little
    np.testing.assert_allclose(out[600 + delay:4000 + delay], reference[600:4000],
                               atol=0.03 * 8000)


# --- the stand-in playback clock ----------------------------------------------------------------

def test_arrival_playback_plays_in_order_never_faster_than_real_time():
    playback = ArrivalPlayback(lambda: 0)
    playback.hear(24_000, at_ns=1_000_000_000)  # 1 s of audio at t = 1 s
    playback.hear(12_000, at_ns=1_200_000_000)  # queued behind it
    assert playback.played_at_ns(24_000) == 2_000_000_000
    assert playback.played_at_ns(36_000) == 2_500_000_000
    assert playback.played_at_ns(36_001) is None  # not arrived
    playback.hear(2_400, at_ns=9_000_000_000)  # after a gap: plays on arrival
    assert playback.played_at_ns(38_400) == 9_100_000_000


def test_a_clear_makes_the_unplayed_audio_count_as_played_then():
    playback = ArrivalPlayback(lambda: 0)
    playback.hear(48_000, at_ns=0)  # 2 s in a burst
    playback.clear(500_000_000)
    assert playback.played_at_ns(6_000) == 250_000_000  # heard before the clear
    assert playback.played_at_ns(48_000) == 500_000_000  # dropped at the clear
    playback.hear(2_400, at_ns=600_000_000)
    assert playback.played_at_ns(50_400) == 700_000_000


# --- settings ------------------------------------------------------------------------------------

def test_the_adapter_is_registered_listens_and_declares_the_clear():
    adapter = load_endpoint_class("twilio")
    assert adapter is TwilioEndpoint
    assert adapter.turn_taking({"uri": "ws://x"}) == "server_vad"
    assert {k for k, v in adapter.capabilities.items() if v} == {
        "streaming_input", "streaming_output", "interruption"}


def test_sids_are_generated_per_trial_unless_configured():
    settings = TwilioSettings(uri="ws://127.0.0.1:1/")
    first = settings.identity(EndpointContext(session_id="run-t001", trial_index=1))
    second = settings.identity(EndpointContext(session_id="run-t002", trial_index=2))
    assert first.call_sid != second.call_sid and first.stream_sid != second.stream_sid
    assert first.account_sid == second.account_sid
    assert re.fullmatch(r"MZ[0-9a-f]{32}", first.stream_sid)
    fixed = TwilioSettings(uri="ws://x", stream_sid="MZ" + "0" * 32).identity(
        EndpointContext(session_id="s"))
    assert fixed.stream_sid == "MZ" + "0" * 32


@pytest.mark.parametrize("settings, key", [
    ({"uri": "http://127.0.0.1/"}, "uri"),
    ({"uri": "ws://x", "stream_sid": "MZ123"}, "stream_sid"),
    ({"uri": "ws://x", "call_sid": "MZ" + "0" * 32}, "call_sid"),
    ({"uri": "ws://x", "streamSid": "MZ" + "0" * 32}, "streamSid"),
    ({"uri": "ws://x", "receive_timeout_seconds": 0}, "receive_timeout_seconds"),
    ({}, "uri"),
])
def test_bad_settings_are_one_line_errors_naming_the_key(settings, key):
    with pytest.raises(ConfigError) as caught:
        abilities_of(TwilioEndpoint).check_settings(settings)
    assert caught.value.key == f"endpoint.settings.{key}"
    assert "\n" not in str(caught.value)
