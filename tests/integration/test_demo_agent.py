"""The local demo agent over 127.0.0.1 with real speech: piper audio in, pocketsphinx, piper out."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import sys

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio
from voicelab.doubles.demo_agent import LocalAgent, LocalAgentEndpoint, LocalAgentProbe
from voicelab.doubles.demo_agent._rules import OPENING_TEXT, REPEAT_TEXT
from voicelab.endpoints import EndpointContext, EndpointEvent
from voicelab.endpoints.websocket import WebSocketEndpoint
from voicelab.speech import recognize
from voicelab.speech._piper import PiperSpeechProvider

SESSION = "planning-session-001"
DATA = {"session_id": SESSION,
        "context": {"topic": "daily planning",
                    "requested_reminder": "Submit the weekly summary at 16:00"}}
USER_LINE = "Please record my plan for today. Set a reminder at sixteen hundred."
CONFIRMATION = "I recorded your daily plan, and I saved the reminder for sixteen hundred."
# Speech steps include recognition and synthesis on a shared 2-core machine.
TIMEOUT = 30.0


@functools.lru_cache(maxsize=8)
def piper_audio(text: str) -> PcmAudio:
    return PiperSpeechProvider({}).synthesize_sync(text)


def context(**overrides) -> EndpointContext:
    return EndpointContext(session_id=SESSION, data=overrides.pop("data", DATA), **overrides)


async def until(events, *kinds: str, timeout: float = TIMEOUT) -> list[EndpointEvent]:
    """Events up to and including the first of ``kinds`` (or ``closed``)."""
    seen = []
    while True:
        event = await asyncio.wait_for(anext(events), timeout)
        seen.append(event)
        if event.type in kinds or event.type == "closed":
            return seen


def types(events: list[EndpointEvent]) -> list[str]:
    collapsed: list[str] = []
    for event in events:
        if not (event.type == "audio_delta" and collapsed and collapsed[-1] == "audio_delta"):
            collapsed.append(event.type)
    return collapsed


def audio_of(events: list[EndpointEvent]) -> PcmAudio:
    return PcmAudio.from_bytes(b"".join(e.audio for e in events if e.type == "audio_delta"))


def one(events: list[EndpointEvent], kind: str) -> EndpointEvent:
    matching = [event for event in events if event.type == kind]
    assert len(matching) == 1, types(events)
    return matching[0]


async def user_turn(endpoint, text: str, events, *kinds: str) -> list[EndpointEvent]:
    await endpoint.send_audio(piper_audio(text))
    await endpoint.commit_turn()
    return await until(events, *kinds)


def test_a_spoken_turn_records_the_plan_and_saves_the_reminder():
    async def scenario():
        endpoint = LocalAgentEndpoint({}, context())
        await asyncio.wait_for(endpoint.connect(), TIMEOUT)
        events = endpoint.events()
        try:
            opening = await until(events, "turn_complete")
            reply = await user_turn(endpoint, USER_LINE, events, "conversation_complete")
        finally:
            await endpoint.close()
        rest = [event async for event in events]
        outcome = await endpoint.outcome_probe().probe({"session_id": SESSION})
        return endpoint, opening, reply, rest, outcome

    endpoint, opening, reply, rest, outcome = asyncio.run(scenario())
    assert types(opening) == ["audio_delta", "transcript_final", "turn_complete"]
    assert one(opening, "transcript_final").text == OPENING_TEXT
    spoken_opening = audio_of(opening)
    assert spoken_opening.duration_seconds > 2.0
    assert "daily plan" in recognize(spoken_opening)  # the audio says what the transcript says

    assert types(reply) == ["input_transcript", "tool_call", "tool_result", "audio_delta",
                            "transcript_final", "turn_complete", "conversation_complete"]
    heard = one(reply, "input_transcript").text
    assert "plan" in heard.split() and "sixteen hundred" in heard
    call = one(reply, "tool_call").data
    assert call["name"] == "save_reminder"
    assert call["arguments"] == {"session_id": SESSION, "text": "Submit the weekly summary",
                                 "time": "16:00", "time_source": "speech",
                                 "time_heard": "sixteen hundred"}
    result = one(reply, "tool_result").data
    assert result["call_id"] == call["call_id"]
    assert result["output"]["status"] == "saved" and result["output"]["time"] == "16:00"
    assert one(reply, "transcript_final").text == CONFIRMATION
    assert one(reply, "turn_complete").data["status"] == "completed"
    assert "sixteen hundred" in recognize(audio_of(reply))
    assert [event.type for event in rest] == ["closed"]

    assert outcome is not None
    assert outcome["plan_recorded"] is True and outcome["reminder_created"] is True
    assert (outcome["reminder_time"], outcome["reminder_time_source"]) == ("16:00", "speech")
    assert outcome["heard_text"] == heard
    assert outcome["report_fields_complete"] is True
    record = endpoint.session_record
    assert record is not None and record.completed and record.violations == []
    client = [name for index, name in enumerate(record.client_messages)
              if not (name == "binary_audio" and record.client_messages[index - 1] == name)]
    assert client == ["evaluator.init", "binary_audio", "input_audio_buffer.commit",
                      "response.create"]


def test_off_topic_speech_gets_a_repeat_request_then_the_plan_completes():
    async def scenario():
        endpoint = LocalAgentEndpoint({}, context())
        await asyncio.wait_for(endpoint.connect(), TIMEOUT)
        events = endpoint.events()
        try:
            await until(events, "turn_complete")
            first = await user_turn(endpoint, "The weather is lovely this morning.", events,
                                    "turn_complete")
            probe = endpoint.outcome_probe()
            between = await probe.probe({"session_id": SESSION})
            second = await user_turn(endpoint, USER_LINE, events, "conversation_complete")
        finally:
            await endpoint.close()
        return first, between, second, await probe.probe({"session_id": SESSION})

    first, between, second, outcome = asyncio.run(scenario())
    assert types(first) == ["input_transcript", "audio_delta", "transcript_final",
                            "turn_complete"]
    assert one(first, "input_transcript").text == "the weather is lovely this morning"
    assert one(first, "transcript_final").text == REPEAT_TEXT
    assert between is not None
    assert (between["plan_recorded"], between["reminder_created"]) == (False, False)
    # nothing (no conversation_complete) arrived between the repeat request and the next turn
    assert types(second) == ["input_transcript", "tool_call", "tool_result", "audio_delta",
                             "transcript_final", "turn_complete", "conversation_complete"]
    assert outcome is not None and outcome["reminder_time"] == "16:00"
    assert outcome["heard_text"].startswith("the weather is lovely this morning | please")


def test_a_reminder_without_a_spoken_time_uses_the_requested_time():
    async def scenario():
        endpoint = LocalAgentEndpoint({}, context())
        await asyncio.wait_for(endpoint.connect(), TIMEOUT)
        events = endpoint.events()
        try:
            await until(events, "turn_complete")
            reply = await user_turn(endpoint, "Please record my plan for today. Set a reminder.",
                                    events, "conversation_complete")
        finally:
            await endpoint.close()
        return reply, await endpoint.outcome_probe().probe({"session_id": SESSION})

    reply, outcome = asyncio.run(scenario())
    arguments = one(reply, "tool_call").data["arguments"]
    assert (arguments["time"], arguments["time_source"], arguments["time_heard"]) == (
        "16:00", "request", None)
    assert one(reply, "transcript_final").text == CONFIRMATION
    assert outcome is not None and outcome["reminder_time_source"] == "request"


def test_response_cancel_stops_the_streaming_opening_promptly():
    async def scenario():
        endpoint = LocalAgentEndpoint({"audio_pacing": "realtime"}, context())
        await asyncio.wait_for(endpoint.connect(), TIMEOUT)
        events = endpoint.events()
        try:
            before = await until(events, "audio_delta")
            loop = asyncio.get_running_loop()
            cancelled_at = loop.time()
            await endpoint.interrupt()
            after = await until(events, "turn_complete", timeout=5.0)
            stop_seconds = loop.time() - cancelled_at
        finally:
            await endpoint.close()
        return before + after, stop_seconds

    received, stop_seconds = asyncio.run(scenario())
    assert types(received)[-2:] == ["interruption", "turn_complete"]
    assert received[-1].data["status"] == "cancelled"
    assert "transcript_final" not in types(received)
    # realtime pacing would take ~4 s for the whole opening; the cancel cuts it within frames
    assert stop_seconds < 1.0
    assert audio_of(received).duration_seconds < 1.5


@pytest.mark.parametrize(("messages", "code"), [
    ([b"\x00\x00"], "init_required"),
    ([{"type": "response.create"}], "init_required"),
    ([{"type": "evaluator.init"}], "malformed_init"),
    ([{"type": "evaluator.init", "request": {}}, {"type": "input_audio_buffer.commit"}],
     "empty_commit"),
    ([{"type": "evaluator.init", "request": {}}, {"type": "response.create"}],
     "create_without_commit"),
    ([{"type": "evaluator.init", "request": {}}, b"\x00\x00\x00"], "invalid_audio"),
    ([{"type": "evaluator.init", "request": {}}, {"type": "session.update"}],
     "unknown_message_type"),
    ([{"type": "evaluator.init", "request": {}}, {"type": "evaluator.init", "request": {}}],
     "duplicate_init"),
    (["{not json"], "malformed_json"),
])
def test_protocol_violations_get_an_error_and_a_close(messages, code):
    async def scenario():
        async with LocalAgent() as agent, connect(agent.uri) as ws:
            for message in messages:
                await ws.send(json.dumps(message) if isinstance(message, dict) else message)
            received = []
            with contextlib.suppress(ConnectionClosed):
                while True:
                    message = await asyncio.wait_for(ws.recv(), TIMEOUT)
                    if isinstance(message, str):
                        received.append(json.loads(message))
            return received, ws.close_code, agent.sessions[0].violations

    received, close_code, violations = asyncio.run(scenario())
    errors = [message for message in received if message["type"] == "error"]
    assert [error["error"]["code"] for error in errors] == [code]
    assert close_code == 1008
    assert violations == [code]


def test_the_standalone_server_prints_its_address_and_persists(tmp_path):
    database = tmp_path / "agent.sqlite3"

    async def scenario():
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "voicelab.doubles.demo_agent", "--port", "0",
            "--database-path", str(database), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 60.0)
            address = json.loads(line)
            endpoint = WebSocketEndpoint({"uri": address["uri"]}, context())
            await asyncio.wait_for(endpoint.connect(), TIMEOUT)
            events = endpoint.events()
            opening = await until(events, "turn_complete")
            await endpoint.close()
            outcome = await LocalAgentProbe({"database_path": address["database_path"]}).probe(
                {"session_id": SESSION})
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            returncode = await asyncio.wait_for(process.wait(), 15.0)
        return address, opening, outcome, returncode

    address, opening, outcome, returncode = asyncio.run(scenario())
    assert address["uri"] == f"ws://127.0.0.1:{address['port']}/"
    assert address["database_path"] == str(database)
    assert one(opening, "transcript_final").text == OPENING_TEXT
    assert outcome is not None and outcome["plan_recorded"] is False
    assert returncode == 0
    assert database.is_file()  # a named database outlives the server
