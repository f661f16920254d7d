"""``turn_taking`` is voicelab's one name for who ends the user's turn; ``turn_detection``, its
older spelling in endpoint settings, is still read (and warned about) for one release."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelab.config import load_run
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
LISTENING = ["pace_audio=true"]


def _validated(*overrides: str):
    from voicelab._validate import validate_run

    return validate_run(load_run(EXAMPLE, overrides=[*LISTENING, *overrides]))


def test_the_older_spelling_is_kept_under_the_one_name_and_warned_about():
    old = load_run(EXAMPLE, overrides=["endpoint.settings.turn_detection=server_vad"])
    assert old.run.endpoint.settings["turn_taking"] == "server_vad"
    assert "turn_detection" not in old.run.endpoint.settings
    # the bundle's recorded config says the one name
    recorded = old.resolved_documents()["settings"]["endpoint"]["settings"]
    assert recorded == {**recorded, "turn_taking": "server_vad"}
    assert "turn_detection" not in recorded
    plan = _validated("endpoint.settings.turn_detection=server_vad")
    assert plan.turn_taking == "server_vad"
    [warning] = [w for w in plan.summary.warnings if "turn_detection" in w]
    assert warning.startswith(f"{EXAMPLE}: endpoint.settings.turn_detection:")
    assert "write turn_taking" in warning


def test_the_one_name_decides_the_turn_taking_without_a_warning():
    plan = _validated("endpoint.settings.turn_taking=server_vad")
    assert plan.turn_taking == "server_vad"
    assert not [w for w in plan.summary.warnings if "turn_detection" in w]


def test_both_spellings_that_differ_are_refused_naming_the_file_and_key():
    with pytest.raises(ConfigError) as refused:
        load_run(EXAMPLE, overrides=["endpoint.settings.turn_taking=client",
                                     "endpoint.settings.turn_detection=server_vad"])
    assert refused.value.key == "endpoint.settings"
    assert "both given and differ" in refused.value.one_line()
    assert "run-workload-neutral-voice.yaml" in refused.value.one_line()


def test_both_spellings_that_agree_are_one_setting():
    loaded = load_run(EXAMPLE, overrides=["endpoint.settings.turn_taking=server_vad",
                                          "endpoint.settings.turn_detection=server_vad"])
    assert loaded.run.endpoint.settings["turn_taking"] == "server_vad"


def test_a_configuration_keeps_its_suite_hash_whichever_spelling_it_uses():
    old = load_run(EXAMPLE, overrides=["endpoint.settings.turn_detection=server_vad"])
    new = load_run(EXAMPLE, overrides=["endpoint.settings.turn_taking=server_vad"])
    client = load_run(EXAMPLE, overrides=["endpoint.settings.turn_taking=client"])
    assert old.suite_hash() == new.suite_hash() != client.suite_hash()


def test_the_websocket_adapter_reads_the_one_name():
    from voicelab.endpoints import load_endpoint_class

    websocket = load_endpoint_class("websocket")
    plan_settings = {"uri": "ws://127.0.0.1:9/", "turn_taking": "server_vad"}
    websocket.check_settings(plan_settings)  # not an unknown setting
    with pytest.raises(ConfigError) as refused:
        websocket.check_settings({"uri": "ws://127.0.0.1:9/",
                                          "turn_taking": "server_vad",
                                          "turn_detection": "client"})
    assert "differ" in refused.value.message


def test_an_adapter_without_the_setting_names_the_key_as_written():
    with pytest.raises(ConfigError) as refused:
        _validated("endpoint.adapter=pipecat", "endpoint.settings={uri: 'ws://127.0.0.1:9/'}",
                   "endpoint.settings.turn_detection=client")
    assert refused.value.key == "endpoint.settings.turn_detection"
