"""Whole runs through ``voice-evaluator run`` with ``adapter: sip`` against the SIP product
double launched per run: a healthy agent passes with figures that agree with the double's own
send stamps, and a call that fails is exit 4 with every artifact gathered so far."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_twilio_runs import Call

from voicelab.audio import G711_SAMPLE_RATE_HZ, SILENCE_THRESHOLD, mulaw_decode
from voicelab.doubles.sip import SipDouble

MS = 1_000_000
#: the SIP adapter's own conversion delay each way (the shared G.711 line filter)
CONVERSION_MS = 3.625
AGENT = {"mode": "agent", "greeting": "Hello, this is the Acme agent.",
         "reply_text": "Thank you. That is noted.", "hang_up_after_replies": 1,
         "ring_ms": 20}


def write_call(folder: Path, *, double: dict[str, Any] | None, script: list[dict[str, Any]],
               settings: dict[str, Any] | None = None,
               eval_spec: dict[str, Any] | None = None,
               environment: dict[str, Any] | None = None) -> Path:
    """A run calling the SIP double launched for it, or (``double`` None) ``settings.uri``."""
    files: dict[str, Any] = {
        "scenario.yaml": {
            "id": "sip-call", "description": "a caller and an agent on the phone",
            "conversation": {"first_speaker": "product"},
            "eval_spec": {"expected_exit": "endpoint_completion",
                          "limits": {"max_turns": 4, "max_time_seconds": 40},
                          **(eval_spec or {})}},
        "persona.yaml": {"name": "Jordan", "communication_style": "friendly"},
        "script.yaml": {"turns": script},
        "run.yaml": {
            "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
            "script_path": "script.yaml", "persona_mode": "scripted",
            "speech_provider": "tone", "pace_audio": True, "trial_seed": 7,
            # the product's timings are judged here, not the test machine's load
            "measurement": {"max_loop_lag_p99_ms": 1000, "max_loop_lag_max_ms": 1000,
                            "max_first_audio_error_ms": 1000},
            "endpoint": {
                "adapter": "sip",
                "settings": {"uri": "sip:agent@127.0.0.1:{port}", **(settings or {})}}},
    }
    if double is not None:
        files["run.yaml"]["endpoint"]["launch"] = {
            "command": [sys.executable, "-m", "voicelab.doubles.sip", "--port", "{port}",
                        "--settings", json.dumps(double)],
            "ready_pattern": '"uri"', "ready_timeout_seconds": 30}
    if environment is not None:
        files["environment.yaml"] = environment
        files["run.yaml"]["environment_path"] = "environment.yaml"
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder / "run.yaml"


def speech_onset_ms(double: dict[str, Any], text: str) -> float:
    """Where the double's speech starts in its reply ``text`` (its first audible sample)."""
    frames = SipDouble(double).frames(text, "PCMU")
    samples = mulaw_decode(b"".join(frames)).samples.astype(np.int32)
    audible = np.flatnonzero(np.abs(samples) > SILENCE_THRESHOLD)
    return float(audible[0]) * 1000 / G711_SAMPLE_RATE_HZ


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Call:
    folder = tmp_path_factory.mktemp("sip-healthy")
    return Call(write_call(folder, double=AGENT,
                           script=[{"response": "A table for two tonight, please."}]),
                folder / "runs")


def test_a_healthy_phone_agent_passes(healthy: Call) -> None:
    assert healthy.exit_code == 0, healthy.output
    assert healthy.report["exit_reason"] == "endpoint_completion"  # the agent hung up (BYE)
    assert all(v["status"] == "passed" for v in healthy.report["verdicts"]), \
        healthy.report["verdicts"]


def test_the_response_latency_is_the_agents_own(healthy: Call) -> None:
    """voicelab's response latency against the double's truth: its reply's first audible
    sample left at ``speech_start_ns``; the caller's speech ended when voicelab says
    (``user.speech_ended``), on the same monotonic clock."""
    answer = healthy.turn("turn-001")
    [sent] = [line for line in healthy.bot_lines("reply_sent") if line["reply"] == 1]
    ended = next(e for e in healthy.of("user.speech_ended") if e["turn_id"] == "turn-001")
    clock_start = healthy.events[0]["attributes"]["clock_start_ns"]
    # (the reply's speech starts a few packets into it: its first packets are silent)
    assert speech_onset_ms(AGENT, AGENT["reply_text"]) > 20
    assert sent["first_ns"] < sent["speech_start_ns"] < sent["last_ns"]
    truth_ms = (sent["speech_start_ns"] - clock_start - ended["monotonic_offset_ns"]) / MS \
        - CONVERSION_MS
    tolerance = 20.0 + float(answer["stamp_error_bound_ms"] or 0.0)  # one RTP packet
    assert answer["response_latency_ms"] == pytest.approx(truth_ms, abs=tolerance), \
        (answer["response_latency_ms"], truth_ms)


def test_the_call_is_kept_in_the_bundle(healthy: Call) -> None:
    [facts] = [e["raw"] for e in healthy.raw_events if e["raw"].get("sip_event") == "call_facts"]
    assert facts["sip"]["setup_ms"] > 0
    # the setup time is a metric of the trial (INVITE sent to 200 OK received)
    assert healthy.metrics["call_setup_ms"] == pytest.approx(facts["sip"]["setup_ms"], abs=0.01)
    methods = [m["start_line"].split()[0] for m in facts["sip"]["messages"]
               if m["direction"] == "sent"]
    assert methods[:2] == ["INVITE", "ACK"]
    received = facts["rtp"]["received"]
    assert received["packets"] > 100 and received["lost"] == 0
    [answered] = healthy.bot_lines("answered")
    assert answered["codec"] == "PCMU"


def test_a_busy_agent_is_exit_4_naming_the_status(tmp_path: Path) -> None:
    call = Call(write_call(tmp_path, double={**AGENT, "respond_with": 486},
                           script=[{"response": "Hello?"}]), tmp_path / "runs")
    assert call.exit_code == 4, call.output
    assert "486" in call.output and "busy" in call.output
    assert call.report["exit_reason"] == "error"
    assert "product.log" in call.report["files"]


def test_the_phone_ivr_example_presses_through_the_menu_to_the_agent(tmp_path: Path) -> None:
    """examples/run-phone-ivr.yaml as a user runs it: keys after the welcome prompt, a key
    barge-in into the billing prompt, then a question to the agent; the menu verdicts pass."""
    example = Path(__file__).parents[2] / "examples" / "run-phone-ivr.yaml"
    call = Call(example, tmp_path / "runs")
    assert call.exit_code == 0, call.output
    verdicts = {v["name"]: v["status"] for v in call.report["verdicts"]}
    assert verdicts["keys_accepted"] == verdicts["reached_agent"] == "passed", verdicts
    keys = [(line["digit"], line["method"]) for line in call.bot_lines("key_received")]
    assert keys == [("1", "rfc4733"), ("0", "rfc4733")]
    [stopped] = [line for line in call.bot_lines("prompt_stopped")
                 if line["why"] == "key_barge_in"]
    assert stopped["menu"] == "billing"
    barged = next(t for t in call.metrics["turns"] if t.get("key_barge_in"))
    # the prompt's stop as heard against the double's own stop: its last packet left at
    # last_ns; the key's stamp is voicelab's (the double received it within a packet)
    assert barged["key_stop_latency_ms"] is not None and barged["key_stop_latency_ms"] < 100


def test_a_flooding_far_end_is_exit_4_naming_it_with_the_bundle_kept(tmp_path: Path) -> None:
    call = Call(write_call(tmp_path, double={**AGENT, "rtp_flood": True},
                           script=[{"response": "Hello?"}]), tmp_path / "runs")
    assert call.exit_code == 4, call.output
    assert "flood" in call.output
    [facts] = [e["raw"] for e in call.raw_events if e["raw"].get("sip_event") == "call_facts"]
    assert facts["rtp"]["received"]["flood_dropped"] > 0
    assert {"voice-events.jsonl", "product.log"} <= set(call.report["files"])
