"""A custom adapter loaded by dotted path from examples/ and driven over a real socket."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

from voicelab.audio import PcmAudio, tone_speech
from voicelab.endpoints import (
    EndpointContext,
    check_capabilities,
    declared_capabilities,
    load_endpoint_class,
)
from voicelab.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ADAPTER = "custom_adapter.EchoDialectAdapter"


def test_custom_adapter_loads_validates_and_holds_a_conversation():
    adapter_class = load_endpoint_class(ADAPTER, search_dirs=[EXAMPLES])
    assert declared_capabilities(adapter_class)["interruption"] is False
    adapter_class.check_settings({"uri": "ws://127.0.0.1:1/"})
    with pytest.raises(ValueError):
        adapter_class.check_settings({"uri": "http://nope"})
    module = sys.modules[adapter_class.__module__]
    user_turns = [tone_speech("Hello there.", seed=1), tone_speech("Goodbye now.", seed=2)]

    async def scenario():
        server = await module.serve_echo_product(turns_before_goodbye=2)
        port = server.sockets[0].getsockname()[1]
        context = EndpointContext(session_id="custom-1", data={"topic": "echo"})
        adapter = adapter_class({"uri": f"ws://127.0.0.1:{port}/"}, context)
        await adapter.connect()
        events = adapter.events()
        seen = []
        for audio in user_turns:
            await adapter.send_audio(audio)
            await adapter.commit_turn()
            while True:
                seen.append(await asyncio.wait_for(anext(events), 5))
                if seen[-1].type == "turn_complete":
                    break
        seen.append(await asyncio.wait_for(anext(events), 5))  # the product's goodbye
        await adapter.close()
        server.close()
        await server.wait_closed()
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), 15))
    kinds = [e.type for e in seen if e.type != "audio_delta"]
    assert kinds == ["input_transcript", "transcript_final", "turn_complete",
                     "input_transcript", "transcript_final", "turn_complete",
                     "conversation_complete"]
    echoed = [PcmAudio.from_bytes(e.audio) for e in seen if e.type == "audio_delta"]
    np.testing.assert_array_equal(echoed[0].samples, user_turns[0].samples // 2)
    texts = [e.text for e in seen if e.type == "transcript_final"]
    assert texts == [f"I heard {a.duration_seconds:.1f} seconds of audio." for a in user_turns]


def test_a_dotted_path_that_is_not_an_adapter_is_a_config_error():
    with pytest.raises(ConfigError) as not_a_class:
        load_endpoint_class("custom_adapter.serve_echo_product", search_dirs=[EXAMPLES])
    assert "not a class" in str(not_a_class.value)
    with pytest.raises(ConfigError) as missing:
        load_endpoint_class("custom_adapter.NoSuchAdapter", search_dirs=[EXAMPLES])
    assert "NoSuchAdapter" in str(missing.value)


def test_capability_check_applies_to_custom_adapters():
    adapter_class = load_endpoint_class(ADAPTER, search_dirs=[EXAMPLES])
    check_capabilities(adapter_class, ["streaming_input"], adapter_name=ADAPTER, source="s.yaml")
    with pytest.raises(ConfigError):
        check_capabilities(adapter_class, ["interruption"], adapter_name=ADAPTER,
                           source="s.yaml")


def test_the_runner_drives_the_custom_adapter_by_dotted_path(tmp_path):
    """validate and run load ``custom_adapter.EchoDialectAdapter`` from beside the run file."""
    import json
    import shutil

    import voicelab

    for name in [*EXAMPLES.glob("*workload-neutral-voice.yaml"), EXAMPLES / "custom_adapter.py"]:
        shutil.copy(name, tmp_path / name.name)

    module = sys.modules[load_endpoint_class(ADAPTER, search_dirs=[EXAMPLES]).__module__]

    async def scenario():
        server = await module.serve_echo_product(turns_before_goodbye=1)
        port = server.sockets[0].getsockname()[1]
        try:
            loaded = voicelab.load_run(tmp_path / "run-workload-neutral-voice.yaml", overrides=[
                "endpoint.adapter=custom_adapter.EchoDialectAdapter",
                f"endpoint.settings={{uri: 'ws://127.0.0.1:{port}/'}}",
                "scenario.conversation.first_speaker=user", "scenario.expected_topics=[heard]",
                "scenario.eval_spec.outcome_spec={}", "script.turns.0.keywords=[]"])
            return await voicelab.arun(loaded, voicelab.RunOptions(
                trials=1,
                artifacts_dir=tmp_path / "artifacts"))
        finally:
            server.close()
            await server.wait_closed()

    outcome = asyncio.run(asyncio.wait_for(scenario(), 30))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    assert report.exit_reason == "endpoint_completion" and report.passed
    metrics = json.loads((outcome.bundle_path / "trial-001" / "voice-metrics.json").read_text())
    # the product echoed the user's speech at half volume
    assert metrics["turns"][0]["output_audio_seconds"] == pytest.approx(
        metrics["turns"][0]["input"]["duration_seconds"], abs=0.01)
