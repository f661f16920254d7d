"""``turn_taking`` is voicelab's one name for who ends the user's turn; ``turn_detection``, its
older spelling in endpoint settings, is still read (and warned about) for one release."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelab.config import load_run
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_the_older_spelling_is_kept_under_the_one_name():
    old = load_run(EXAMPLE, overrides=["endpoint.settings.turn_detection=server_vad"])
    assert old.run.endpoint.settings["turn_taking"] == "server_vad"
    assert "turn_detection" not in old.run.endpoint.settings
    assert old.run.endpoint.old_turn_taking  # validate warns about it
    # the bundle's recorded config says the one name
    recorded = old.resolved_documents()["settings"]["endpoint"]["settings"]
    assert recorded["turn_taking"] == "server_vad" and "turn_detection" not in recorded
    new = load_run(EXAMPLE, overrides=["endpoint.settings.turn_taking=server_vad"])
    assert not new.run.endpoint.old_turn_taking


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
    from voicelab.endpoints import abilities_of, load_endpoint_class

    websocket = load_endpoint_class("websocket")
    plan_settings = {"uri": "ws://127.0.0.1:9/", "turn_taking": "server_vad"}
    abilities_of(websocket).check_settings(plan_settings)  # not an unknown setting
    with pytest.raises(ConfigError) as refused:
        abilities_of(websocket).check_settings({"uri": "ws://127.0.0.1:9/",
                                          "turn_taking": "server_vad",
                                          "turn_detection": "client"})
    assert "differ" in refused.value.message
