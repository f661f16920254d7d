"""The runner end to end with the Realtime protocol on both sides: a product built on the
Realtime API (adapter: realtime) and a speech-to-speech simulated user (persona_mode: realtime),
each against a local server that follows the Realtime event reference."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import voicelab
from voicelab.doubles.realtime import RealtimeServer, RealtimeServerConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
KEY = "rt-key-SECRET-0042"


def test_a_realtime_product_through_the_runner(tmp_path, monkeypatch):
    monkeypatch.setenv("RT_API_KEY", KEY)
    product = RealtimeServerConfig(
        api_key=KEY, input_transcript="please record the plan and save the reminder",
        lines=["Hi! Tell me your daily plan and the reminder to save.",
               "Your daily plan is recorded and the reminder is saved for 16:00."],
        tool_calls={2: {"name": "save_reminder", "arguments": {"time": "16:00"}}})

    async def scenario():
        async with RealtimeServer(product) as server:
            loaded = voicelab.load_run(EXAMPLE, overrides=[
                "endpoint.adapter=realtime",
                f"endpoint.settings={{dialect: openai, uri: '{server.url}', "
                "api_key: '${RT_API_KEY}', opening_response: true, "
                "tool_outputs: {save_reminder: {status: saved}}}",
                "scenario.eval_spec.outcome_spec={}",
                "scenario.eval_spec.expected_exit=script_exhaustion"])
            outcome = await voicelab.arun(loaded, voicelab.RunOptions(
                trials=1,
                artifacts_dir=tmp_path))
            return outcome, server.connections

    outcome, connections = asyncio.run(asyncio.wait_for(scenario(), 60))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    assert report.exit_reason == "script_exhaustion" and outcome.exit_code == 0
    [connection] = connections
    update = connection.events_of("session.update")[0]
    assert update["session"].get("turn_detection", "absent") in (None, "absent") or \
        update["session"]["audio"]["input"]["turn_detection"] is None
    assert connection.events_of("input_audio_buffer.append")
    assert connection.events_of("input_audio_buffer.commit")
    trial = outcome.bundle_path / "trial-001"
    tools = json.loads((trial / "tool-calls.json").read_text())["tool_calls"]
    assert [t["name"] for t in tools] == ["save_reminder"]
    transcript = json.loads((trial / "transcript.json").read_text())["turns"]
    user = next(t for t in transcript if t["role"] == "user")
    assert user["heard_as"] == "please record the plan and save the reminder"
    assert KEY not in (trial / "raw-endpoint-events.json").read_text()


def test_a_realtime_persona_talks_to_the_fake_product(tmp_path, monkeypatch):
    monkeypatch.setenv("VL_KEY", KEY)
    persona = RealtimeServerConfig(
        api_key=KEY, lines=["Please record my daily plan and save the reminder."],
        end_call_on_last_line=True)

    async def scenario():
        async with RealtimeServer(persona) as server:
            loaded = voicelab.load_run(EXAMPLE, overrides=[
                "persona_mode=realtime", "script_path=null",
                f"providers={{voice_live: {{endpoint: '{server.http_endpoint}', "
                "api_key: '${VL_KEY}'}}"])
            return await voicelab.arun(loaded, voicelab.RunOptions(
                trials=1,
                artifacts_dir=tmp_path))

    outcome = asyncio.run(asyncio.wait_for(scenario(), 60))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    assert report.exit_reason == "endpoint_completion" and report.passed
    trial = outcome.bundle_path / "trial-001"
    session = json.loads((trial / "persona-session.json").read_text())
    assert KEY not in json.dumps(session)
    transcript = json.loads((trial / "transcript.json").read_text())["turns"]
    user = next(t for t in transcript if t["role"] == "user")
    assert user["source"] == "realtime"
    assert user["text"] == "Please record my daily plan and save the reminder."
