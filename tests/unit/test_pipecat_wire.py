"""pipecat's protobuf frames: the schema, the bytes, every frame's mapping to normalized events,
bad input as events (never an exception), and the resampling at the edge."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2

from voicelab.audio import PcmAudio
from voicelab.config import SecretScrubber
from voicelab.endpoints.pipecat import _proto as proto
from voicelab.endpoints.pipecat._wire import (
    FRAME_KINDS,
    InboundAudio,
    OutboundAudio,
    PipecatDecoder,
    decode_frame,
    encode_frame,
    message_frame,
)

PROTO_FILE = Path(proto.__file__).with_name(proto.PROTO_FILE_NAME)


def decoder(**options) -> PipecatDecoder:
    return PipecatDecoder(SecretScrubber(options.pop("secrets", ())), sample_rate_hz=16_000,
                          **options)


def tone(frequency_hz: float, *, rate_hz: int, seconds: float, amplitude: float = 8000.0
         ) -> np.ndarray:
    t = np.arange(int(round(rate_hz * seconds))) / rate_hz
    return np.round(amplitude * np.sin(2 * np.pi * frequency_hz * t)).astype(np.int16)


def level_db(samples: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(samples.astype(np.float64) ** 2)))


# --- the schema and the bytes -----------------------------------------------------------------

def test_the_declared_schema_is_exactly_the_proto_file():
    """The message classes come from a declaration in Python; protoc's reading of the .proto must
    give the identical descriptor (names, numbers, types, the oneof, proto3 optional)."""
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools (protoc) not installed")
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "frames.pb"
        status = protoc.main(["protoc", f"--proto_path={PROTO_FILE.parent}",
                              f"--descriptor_set_out={out}", str(PROTO_FILE)])
        assert status == 0
        compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    assert compiled == proto.file_descriptor()


#: each frame kind, its fields and its bytes worked out by hand from the schema:
#: envelope tag (field << 3 | 2), length, then the inner message's tags and values
HAND_ENCODED = [
    ("text", {"id": 1, "name": "n", "text": "hi"}, "0a09" "0801" "12016e" "1a026869"),
    ("audio", {"audio": b"\x01\x00", "sample_rate": 16000, "num_channels": 1},
     "1209" "1a020100" "20807d" "2801"),
    ("audio", {"audio": b"", "pts": 0}, "1202" "3000"),  # an explicit optional zero is sent
    ("transcription", {"text": "ok", "user_id": "u", "timestamp": "t"},
     "1a0a" "1a026f6b" "220175" "2a0174"),
    ("message", {"data": "{}"}, "2204" "0a027b7d"),
    ("interruption", {}, "2a00"),
]


@pytest.mark.parametrize(("kind", "fields", "wire"), HAND_ENCODED)
def test_frames_encode_to_the_bytes_the_schema_defines(kind, fields, wire):
    assert encode_frame(kind, **fields).hex() == wire
    assert decode_frame(bytes.fromhex(wire)).kind == kind


ROUND_TRIP = {
    "text": {"id": 7, "name": "TextFrame#7", "text": "Grüße, café"},
    "audio": {"id": 2**63 + 5, "name": "OutputAudioRawFrame#1", "audio": b"\x10\x00\xf0\xff",
              "sample_rate": 16000, "num_channels": 1, "pts": 123456789},
    "transcription": {"id": 9, "name": "TranscriptionFrame#9", "text": "book a table",
                      "user_id": "caller", "timestamp": "2026-01-01T00:00:00.000+00:00"},
    "message": {"data": '{"label": "rtvi-ai", "type": "bot-ready"}'},
    "interruption": {"id": 3, "name": "InterruptionFrame#3"},
}


def test_every_frame_kind_round_trips():
    assert set(ROUND_TRIP) == set(FRAME_KINDS)
    for kind, fields in ROUND_TRIP.items():
        decoded = decode_frame(encode_frame(kind, **fields))
        assert decoded.kind == kind
        assert decoded.fields == fields


def test_an_unknown_kind_cannot_be_encoded():
    with pytest.raises(ValueError, match="unknown frame kind 'video'"):
        encode_frame("video")


# --- product frames -> normalized events ------------------------------------------------------

def test_text_transcription_and_message_frames_map_to_their_events():
    events = decoder().decode(5, encode_frame("text", id=2, name="TextFrame#2", text="Hi there."))
    assert [(e.type, e.text, e.received_ns) for e in events] == [("transcript_final", "Hi there.",
                                                                   5)]
    assert events[0].raw == {"type": "text", "id": 2, "name": "TextFrame#2", "text": "Hi there."}

    events = decoder().decode(6, encode_frame("transcription", text="book a table",
                                              user_id="caller", timestamp="t0"))
    assert [(e.type, e.text) for e in events] == [("input_transcript", "book a table")]
    assert events[0].raw == {"type": "transcription", "text": "book a table", "user_id": "caller",
                             "timestamp": "t0"}

    events = decoder().decode(7, message_frame({"label": "rtvi-ai", "type": "bot-ready",
                                                "data": {"version": "1.0"}}))
    assert [e.type for e in events] == ["raw"]
    assert events[0].raw == {"type": "message", "json": True, "data": {
        "label": "rtvi-ai", "type": "bot-ready", "data": {"version": "1.0"}}}

    events = decoder().decode(8, message_frame("not json {"))
    assert events[0].type == "raw"
    assert events[0].raw == {"type": "message", "data": "not json {", "json": False}


def test_an_interruption_delivers_the_held_audio_then_flushes_the_listener():
    codec = decoder()
    held = codec.decode(10, encode_frame("audio", audio=tone(440, rate_hz=16_000,
                                                              seconds=0.02).tobytes(),
                                         sample_rate=16_000, num_channels=1))
    assert sum(len(e.audio or b"") for e in held) < 960 * 2  # soxr holds part of the frame back
    events = codec.decode(30, encode_frame("interruption", id=4))
    assert [e.type for e in events][-1] == "interruption"
    assert events[-1].data == {"status": "cancelled", "flush": True}
    delivered = sum(len(e.audio or b"") for e in held + events[:-1])
    assert delivered == 480 * 2  # the whole 20 ms at 24 kHz, stamped with its frame
    assert all(e.received_ns == 10 for e in events[:-1])
    assert not codec.holds_audio


def test_bad_bytes_and_unknown_frames_become_events_never_exceptions(caplog):
    codec = decoder()
    events = codec.decode(1, b"\xff\xff\xff")
    assert [e.type for e in events] == ["error"]
    assert events[0].data["code"] == "malformed_frame" and events[0].data["origin"] == "adapter"
    assert events[0].raw == {"type": "malformed", "byte_count": 3}
    assert codec.decode(2, b"\x0a\x03\x1a\x01\xff")[0].data["code"] == "malformed_frame"  # UTF-8

    with caplog.at_level(logging.DEBUG, logger="voicelab.endpoints.pipecat._wire"):
        events = codec.decode(3, bytes.fromhex("3a020801"))  # a frame field 7 this schema lacks
    assert [e.type for e in events] == ["raw"]
    assert events[0].raw == {"type": "unknown", "field_numbers": [7], "byte_count": 4}
    assert "unknown kind (fields [7])" in caplog.text

    assert codec.decode(4, b"")[0].raw == {"type": "unknown", "field_numbers": [],
                                           "byte_count": 0}
    assert codec.decode(5, '{"type": "hello"}')[0].raw == {"type": "text_message",
                                                           "text": '{"type": "hello"}'}
    odd = codec.decode(6, encode_frame("audio", audio=b"\x01\x02\x03", sample_rate=16000))
    assert [e.type for e in odd] == ["error"] and odd[0].data["code"] == "invalid_audio"
    assert odd[0].raw["audio"] == {"omitted": "pcm", "byte_count": 3}
    assert codec.decode(7, encode_frame("audio", sample_rate=16000))[0].type == "raw"


def test_raw_records_are_scrubbed_and_audio_is_elided():
    codec = decoder(secrets=["sk-live-12345678"])
    events = codec.decode(1, encode_frame("text", text="your key is sk-live-12345678"))
    assert "sk-live-12345678" not in str(events[0].raw) + str(events[0].text)
    audio = codec.decode(2, encode_frame("audio", audio=b"\x00\x01" * 8000, sample_rate=16000,
                                         num_channels=1, id=3, name="OutputAudioRawFrame#3"))
    assert audio[0].raw == {"type": "audio", "id": 3, "name": "OutputAudioRawFrame#3",
                            "audio": {"omitted": "pcm", "byte_count": 16000},
                            "sample_rate": 16000, "num_channels": 1}


def test_stereo_is_averaged_and_an_unset_rate_is_the_configured_one():
    stereo = np.stack([np.full(1600, 1000, np.int16), np.full(1600, 3000, np.int16)], axis=1)
    codec = decoder()
    events = codec.decode(1, encode_frame("audio", audio=stereo.tobytes(), num_channels=2))
    events += codec.flush_audio()
    pcm = np.frombuffer(b"".join(e.audio or b"" for e in events), dtype="<i2")
    assert pcm.shape[0] == 2400  # 100 ms of 16 kHz (the unset rate) at 24 kHz
    np.testing.assert_allclose(pcm[200:-200], 2000, atol=2)  # the mean, away from the edges


# --- resampling -------------------------------------------------------------------------------

FRAME_SIZES = [7, 160, 320, 640, 1023]


@pytest.mark.parametrize("frame_samples", FRAME_SIZES)
def test_the_bot_audio_keeps_a_tones_level_and_length_whatever_its_framing(frame_samples):
    """16 kHz -> 24 kHz: a 1 kHz tone keeps its level (0.5 dB; measured 0.00 dB) and its
    duration within a sample, and the samples do not depend on the frame size (soxr's float
    stream is chunk-invariant; we round it ourselves)."""
    signal = tone(1000, rate_hz=16_000, seconds=1.0)
    codec = decoder()
    events = []
    for start in range(0, signal.shape[0], frame_samples):
        chunk = signal[start:start + frame_samples]
        events += codec.decode(start, encode_frame("audio", audio=chunk.tobytes(),
                                                   sample_rate=16_000, num_channels=1))
    events += codec.flush_audio()
    out = np.frombuffer(b"".join(e.audio or b"" for e in events), dtype="<i2")
    assert abs(out.shape[0] - 24_000) <= 1
    assert abs(level_db(out[2400:-2400]) - level_db(signal[1600:-1600])) <= 0.5
    reference = _one_call_inbound(signal)
    np.testing.assert_array_equal(out, reference)


def _one_call_inbound(signal: np.ndarray) -> np.ndarray:
    inbound = InboundAudio()
    pieces = inbound.push(PcmAudio(signal, 16_000), 0, None) + inbound.flush()
    return np.frombuffer(b"".join(pcm for _, pcm, _ in pieces), dtype="<i2")


@pytest.mark.parametrize("chunk_ms", [10, 20, 100, 333])
def test_the_callers_audio_keeps_a_tones_level_and_length_whatever_its_chunking(chunk_ms):
    """24 kHz -> 16 kHz, the caller's line in the runner's chunks: same tolerances."""
    signal = tone(1000, rate_hz=24_000, seconds=1.0)
    outbound = OutboundAudio(sample_rate_hz=16_000)
    frames = [frame for chunk in PcmAudio(signal, 24_000).chunks(chunk_ms)
              for frame in outbound.frames(chunk)] + outbound.flush()
    decoded = [decode_frame(frame) for frame in frames]
    assert {(f.kind, f.fields["sample_rate"], f.fields["num_channels"]) for f in decoded} == \
        {("audio", 16_000, 1)}
    out = np.frombuffer(b"".join(f.fields["audio"] for f in decoded), dtype="<i2")
    assert abs(out.shape[0] - 16_000) <= 1
    assert abs(level_db(out[1600:-1600]) - level_db(signal[2400:-2400])) <= 0.5
    whole = OutboundAudio(sample_rate_hz=16_000)
    reference = [decode_frame(f).fields["audio"] for f in
                 whole.frames(PcmAudio(signal, 24_000)) + whole.flush()]
    assert out.tobytes() == b"".join(reference)


def test_each_piece_of_bot_audio_carries_the_arrival_of_its_own_frame():
    """soxr releases blocks that straddle frames; pieces are cut at frame boundaries (40 ms of
    16 kHz = 960 canonical samples) and stamped with the frame that held their first sample."""
    signal = tone(300, rate_hz=16_000, seconds=0.4)
    codec = decoder()
    events = []
    for index in range(10):
        frame = signal[index * 640:(index + 1) * 640]
        events += codec.decode(1000 * index, encode_frame("audio", audio=frame.tobytes(),
                                                          sample_rate=16_000, num_channels=1))
    events += codec.flush_audio()
    position = 0
    for event in events:
        frame_index = position // 960
        assert event.received_ns == 1000 * frame_index
        samples = len(event.audio or b"") // 2
        assert (position + samples - 1) // 960 == frame_index  # never crosses a boundary
        position += samples
    assert position == 9600
    assert codec.quiet_ns == 80_000_000  # two 40 ms frames without audio end the stream


def test_stamps_never_go_backwards():
    codec = decoder()
    first = codec.decode(100, encode_frame("audio", audio=tone(300, rate_hz=16_000,
                                                                seconds=0.02).tobytes(),
                                           sample_rate=16_000, num_channels=1))
    text = codec.decode(150, encode_frame("text", text="hi"))
    tail = codec.flush_audio()  # audio that arrived at 100, delivered after the text at 150
    stamps = [e.received_ns for e in first + text + tail]
    assert tail and stamps == sorted(stamps) and tail[0].received_ns == 150


def test_a_change_of_rate_starts_a_new_stream():
    codec = decoder()
    events = codec.decode(1, encode_frame("audio", audio=tone(300, rate_hz=16_000,
                                                               seconds=0.1).tobytes(),
                                          sample_rate=16_000, num_channels=1))
    events += codec.decode(2, encode_frame("audio", audio=tone(300, rate_hz=8_000,
                                                                seconds=0.1).tobytes(),
                                           sample_rate=8_000, num_channels=1))
    events += codec.flush_audio()
    assert abs(sum(len(e.audio or b"") for e in events) // 2 - 4800) <= 2  # 2 x 100 ms
