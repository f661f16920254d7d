"""Protocol v1 decoding: product messages in, normalized events out (no sockets)."""

from __future__ import annotations

import base64
import json
import logging

import numpy as np
import pytest

from voicelab.config import SecretScrubber
from voicelab.endpoints import EVENT_TYPES, parse_arguments
from voicelab.endpoints.websocket._wire import (
    WireV1Decoder,
    client_message_name,
    control_message,
    init_message,
)

NS = 123_456_789


def decode(message, scrubber: SecretScrubber | None = None):
    return WireV1Decoder(scrubber or SecretScrubber()).decode(NS, message)


def pcm(samples: int = 480) -> bytes:
    return np.arange(samples, dtype="<i2").tobytes()


def test_binary_frame_is_audio_delta_with_byte_count_raw():
    [event] = decode(pcm(240))
    assert event.type == "audio_delta"
    assert event.audio == pcm(240)
    assert event.received_ns == NS
    assert event.raw == {"binary": True, "byte_count": 480}


def test_odd_length_binary_frame_is_invalid_audio_error():
    [event] = decode(b"\x01\x02\x03")
    assert event.type == "error"
    assert event.data["code"] == "invalid_audio"
    assert event.audio is None
    assert event.raw == {"binary": True, "byte_count": 3}


def test_base64_delta_decodes_and_raw_omits_the_payload():
    message = {"type": "response.output_audio.delta", "response_id": "r1",
               "delta": base64.b64encode(pcm(100)).decode()}
    [event] = decode(json.dumps(message))
    assert event.type == "audio_delta"
    assert event.audio == pcm(100)
    assert event.raw == {"type": "response.output_audio.delta", "response_id": "r1",
                         "delta": {"omitted": "base64 pcm", "byte_count": 200}}


@pytest.mark.parametrize("delta", ["!!not base64!!", base64.b64encode(b"abc").decode()])
def test_bad_base64_delta_is_invalid_audio(delta):
    [event] = decode(json.dumps({"type": "response.output_audio.delta", "delta": delta}))
    assert event.type == "error"
    assert event.data["code"] == "invalid_audio"


def test_transcripts_and_input_transcripts():
    [assistant] = decode(json.dumps({"type": "response.output_audio_transcript.done",
                                     "transcript": "Your plan is recorded."}))
    [heard] = decode(json.dumps({"type": "conversation.item.input_audio_transcription.completed",
                                 "transcript": "record my plan"}))
    assert (assistant.type, assistant.text) == ("transcript_final", "Your plan is recorded.")
    assert (heard.type, heard.text) == ("input_transcript", "record my plan")


def test_tool_call_arguments_are_parsed_and_kept_as_json():
    [call] = decode(json.dumps({"type": "response.function_call_arguments.done", "call_id": "c1",
                                "name": "save_reminder", "arguments": '{"time": "16:00"}'}))
    [result] = decode(json.dumps({"type": "tool.result", "call_id": "c1",
                                  "output": {"status": "saved"}}))
    assert call.type == "tool_call"
    assert call.data == {"call_id": "c1", "name": "save_reminder",
                         "arguments": {"time": "16:00"}, "arguments_json": '{"time": "16:00"}'}
    assert result.data == {"call_id": "c1", "output": {"status": "saved"}}


def test_unparseable_tool_arguments_stay_a_string():
    assert parse_arguments("{oops") == ("{oops", "{oops")
    assert parse_arguments({"a": 1}) == ({"a": 1}, None)


def test_response_done_completed_and_cancelled():
    completed = decode(json.dumps({"type": "response.done",
                                   "response": {"id": "r1", "status": "completed"}}))
    cancelled = decode(json.dumps({"type": "response.done", "response": {"status": "cancelled"}}))
    assert [e.type for e in completed] == ["turn_complete"]
    assert completed[0].data == {"status": "completed", "response_id": "r1"}
    assert [e.type for e in cancelled] == ["interruption", "turn_complete"]
    assert cancelled[1].data["status"] == "cancelled"
    assert cancelled[0].raw is cancelled[1].raw


def test_conversation_completed_and_product_error():
    [done] = decode(json.dumps({"type": "conversation.completed"}))
    [error] = decode(json.dumps({"type": "error",
                                 "error": {"code": "rate_limited", "message": "slow down"}}))
    assert done.type == "conversation_complete"
    assert error.type == "error"
    assert error.text == "slow down"
    assert error.data == {"code": "rate_limited", "message": "slow down", "origin": "product"}


def test_unknown_type_becomes_raw_event_and_debug_log(caplog):
    with caplog.at_level(logging.DEBUG, logger="voicelab.endpoints.websocket._wire"):
        [event] = decode(json.dumps({"type": "session.updated", "session": {"voice": "x"}}))
    assert event.type == "raw"
    assert event.raw == {"type": "session.updated", "session": {"voice": "x"}}
    assert "session.updated" in caplog.text


@pytest.mark.parametrize(("message", "code"), [("{not json", "malformed_json"),
                                                ("[1, 2]", "malformed_message"),
                                                ('"text"', "malformed_message")])
def test_malformed_messages_become_errors(message, code):
    [event] = decode(message)
    assert event.type == "error"
    assert event.data["code"] == code
    assert event.data["origin"] == "adapter"


def test_every_configured_secret_is_scrubbed_from_raw_and_text():
    scrubber = SecretScrubber(["tok-SECRET-123"])
    events = decode(json.dumps({"type": "response.output_audio_transcript.done",
                                "transcript": "your token is tok-SECRET-123",
                                "meta": {"echo": "Bearer tok-SECRET-123"}}), scrubber)
    malformed = decode("{tok-SECRET-123", scrubber)
    dumped = json.dumps([e.raw for e in events + malformed]) + events[0].text
    assert "tok-SECRET-123" not in dumped
    assert "***" in events[0].text


def test_every_decoded_event_type_is_in_the_protocol_vocabulary():
    messages = [pcm(10), "{x", json.dumps({"type": "response.done"}),
                json.dumps({"type": "whatever"}), json.dumps({"type": "conversation.completed"})]
    types = {event.type for message in messages for event in decode(message)}
    assert types <= set(EVENT_TYPES)


def test_client_messages_and_their_recorded_names():
    init = json.loads(init_message({"session_id": "s1", "context": {"topic": "t"}}))
    assert init == {"type": "evaluator.init", "request": {"session_id": "s1",
                                                          "context": {"topic": "t"}}}
    assert json.loads(control_message("response.cancel")) == {"type": "response.cancel"}
    assert client_message_name(b"\x00\x00") == "binary_audio"
    assert client_message_name(control_message("input_audio_buffer.commit")) == \
        "input_audio_buffer.commit"
    assert client_message_name("nope") == "malformed_json"
