"""Configuration models: every YAML in the seed validates unchanged; typos and bad values fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from voicelab.config import (
    CAPABILITY_NAMES,
    AzureEvaluator,
    CustomJudge,
    EndpointConfig,
    EnvironmentConfig,
    OutcomeProbeConfig,
    PersonaConfig,
    Providers,
    QualityEvaluation,
    RunConfig,
    ScenarioConfig,
    ScriptConfig,
    ScriptTurn,
    TransientEvent,
)

SEED = Path(__file__).parents[1] / "fixtures" / "seed"

#: (model, seed fixture) for every configuration YAML shown in the seed document.
SEED_DOCUMENTS = [
    (RunConfig, "run-workload-neutral-voice.yaml"),
    (ScenarioConfig, "scenario-workload-neutral-voice.yaml"),
    (PersonaConfig, "persona-workload-neutral-voice.yaml"),
    (ScriptConfig, "script-workload-neutral-voice.yaml"),
    (EnvironmentConfig, "environment-seed.yaml"),
    (RunConfig, "run-custom-adapter.yaml"),
    (ScenarioConfig, "scenario-outcome-spec.yaml"),
    (RunConfig, "run-quality-evaluation.yaml"),
]


def seed_yaml(name: str) -> Any:
    return yaml.safe_load((SEED / name).read_text(encoding="utf-8"))


def error_types(error: ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    return [(tuple(e["loc"]), e["type"]) for e in error.errors()]


@pytest.mark.parametrize(("model", "name"), SEED_DOCUMENTS, ids=[n for _, n in SEED_DOCUMENTS])
def test_every_seed_document_validates_and_keeps_every_value(model: type[BaseModel],
                                                             name: str) -> None:
    written = seed_yaml(name)
    parsed = model.model_validate(written)
    # dumping only what the file set must give the file back: nothing dropped or rewritten
    # (ints compare equal to the floats some fields hold; paths dump as the text written)
    assert parsed.model_dump(mode="json", exclude_unset=True) == written


def test_seed_scenario_fields_and_defaults() -> None:
    scenario = ScenarioConfig.model_validate(seed_yaml("scenario-workload-neutral-voice.yaml"))
    assert scenario.id == "workload-neutral-voice-exchange"
    assert scenario.expected_topics == ["plan recorded", "reminder saved"]
    assert scenario.conversation.max_turns == 4
    assert scenario.conversation.required_capabilities == ["streaming_input", "streaming_output"]
    assert scenario.conversation.first_speaker == "product"  # the default
    assert scenario.eval_spec.expected_exit == "endpoint_completion"
    assert scenario.eval_spec.limits.max_turns == 4
    assert scenario.eval_spec.limits.max_time_seconds == 30
    assert scenario.eval_spec.outcome_spec == {}


def test_seed_outcome_spec_values_are_kept_with_their_yaml_types() -> None:
    scenario = ScenarioConfig.model_validate(seed_yaml("scenario-outcome-spec.yaml"))
    # "16:00" is quoted in the seed; the model must not coerce it (unquoted YAML 1.1 reads 960)
    assert scenario.eval_spec.outcome_spec == {"reminder_created": True, "reminder_time": "16:00"}
    assert scenario.eval_spec.expected_exit == "endpoint_completion"


def test_first_speaker_is_product_or_user() -> None:
    user_first = ScenarioConfig.model_validate(
        {"id": "s", "conversation": {"first_speaker": "user"}})
    assert user_first.conversation.first_speaker == "user"
    with pytest.raises(ValidationError) as caught:
        ScenarioConfig.model_validate({"id": "s", "conversation": {"first_speaker": "agent"}})
    assert error_types(caught.value)[0][0] == ("conversation", "first_speaker")


@pytest.mark.parametrize("capability", CAPABILITY_NAMES)
def test_every_capability_name_is_accepted(capability: str) -> None:
    scenario = ScenarioConfig.model_validate(
        {"id": "s", "conversation": {"required_capabilities": [capability]}})
    assert scenario.conversation.required_capabilities == [capability]


@pytest.mark.parametrize("document", [
    {"id": "s", "conversation": {"required_capabilities": ["telepathy"]}},
    {"id": "s", "conversation": {"max_turns": 0}},
    {"id": "s", "eval_spec": {"limits": {"max_time_seconds": -1}}},
    {"id": "s", "eval_spec": {"expected_exit": "whenever"}},
    {"id": ""},
    {"description": "no id"},
])
def test_invalid_scenarios_are_rejected(document: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ScenarioConfig.model_validate(document)


def test_seed_persona_fields() -> None:
    persona = PersonaConfig.model_validate(seed_yaml("persona-workload-neutral-voice.yaml"))
    assert persona.name == "Jordan"
    assert persona.is_concise
    assert persona.session_behavior.conclude_quickly is True
    assert persona.session_behavior.decline_extras is True


def test_seed_script_turn_and_optional_audio_and_barge_in() -> None:
    script = ScriptConfig.model_validate(seed_yaml("script-workload-neutral-voice.yaml"))
    assert script.persona_voice == "en-US-AvaNeural"
    assert script.post_script_completion_wait_seconds == 0
    turn = script.turns[0]
    assert (turn.trigger, turn.keywords) == ("planning prompt", ["daily plan", "reminder"])
    assert turn.audio_path is None and turn.interrupt_after_seconds is None

    recorded = ScriptTurn.model_validate({"audio_path": "audio/hello.wav",
                                          "interrupt_after_seconds": 1.5})
    assert recorded.audio_path == Path("audio/hello.wav")
    assert recorded.interrupt_after_seconds == 1.5


@pytest.mark.parametrize("turn", [
    {"trigger": "hello"},                                 # nothing to say
    {"response": "   "},                                  # blank text, no audio
    {"response": "hi", "interrupt_after_seconds": -0.1},  # negative barge-in time
    {"response": "hi", "keywords": "reminder"},           # keywords must be a list
])
def test_invalid_script_turns_are_rejected(turn: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ScriptTurn.model_validate(turn)


def test_seed_environment_fields() -> None:
    environment = EnvironmentConfig.model_validate(seed_yaml("environment-seed.yaml"))
    assert environment.impact == 0.7
    assert environment.base_noise == Path("audio/office-hum.wav")
    assert environment.background_voices_volume == 0.15
    (event,) = environment.transient_events
    assert (event.type, event.trigger_mode, event.on_turn_number) == (
        Path("audio/door-close.wav"), "on_turn", 2)
    assert [key for key, _ in environment.asset_paths()] == [
        "base_noise", "background_voices", "transient_events[0].type"]


def test_transient_event_trigger_modes() -> None:
    scheduled = TransientEvent.model_validate(
        {"type": "a.wav", "trigger_mode": "scheduled", "at_seconds": 2.5})
    assert scheduled.at_seconds == 2.5
    seeded = TransientEvent.model_validate(
        {"type": "a.wav", "trigger_mode": "random", "probability": 0.25})
    assert seeded.probability == 0.25


@pytest.mark.parametrize("event", [
    {"type": "a.wav", "trigger_mode": "on_turn"},                   # which turn?
    {"type": "a.wav", "trigger_mode": "scheduled"},                 # when?
    {"type": "a.wav", "trigger_mode": "random", "probability": 1.5},
    {"type": "a.wav", "trigger_mode": "sometimes"},
    {"type": "a.wav", "on_turn_number": 0},
    {"type": "a.wav", "on_turn_number": 1, "volume": -0.1},
    {"trigger_mode": "random"},                                     # no sound
])
def test_invalid_transient_events_are_rejected(event: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TransientEvent.model_validate(event)


@pytest.mark.parametrize("impact", [-0.1, 1.01])
def test_environment_impact_is_a_fraction(impact: float) -> None:
    with pytest.raises(ValidationError):
        EnvironmentConfig.model_validate({"impact": impact})


def test_endpoint_names_a_builtin_or_a_dotted_path_with_open_settings() -> None:
    custom = RunConfig.model_validate(seed_yaml("run-custom-adapter.yaml")).endpoint
    assert custom.adapter == "my_voice_eval.adapters.ExistingVoiceServiceAdapter"
    # settings are the adapter's business: kept as written (interpolation is the loader's job)
    assert custom.settings == {
        "uri": "${VOICE_AGENT_URL}", "access_token": "${VOICE_AGENT_ACCESS_TOKEN}",
        "connect_timeout_seconds": 10, "receive_timeout_seconds": 45,
        "max_message_bytes": 4194304}
    assert EndpointConfig.model_validate({}).adapter == "fake"
    with pytest.raises(ValidationError):
        EndpointConfig.model_validate({"adapter": ""})


def test_outcome_probe_is_optional_and_needs_a_dotted_path() -> None:
    seed_run = RunConfig.model_validate(seed_yaml("run-workload-neutral-voice.yaml"))
    assert seed_run.outcome_probe is None
    probe = OutcomeProbeConfig.model_validate(
        {"probe": "my_voice_eval.probes.ReminderOutcomeProbe", "settings": {"base_url": "x"}})
    assert probe.settings == {"base_url": "x"}
    with pytest.raises(ValidationError):
        OutcomeProbeConfig.model_validate({"settings": {}})


def test_seed_providers_and_quality_evaluation_shape() -> None:
    run = RunConfig.model_validate(seed_yaml("run-quality-evaluation.yaml"))
    azure = run.providers.azure_openai
    assert azure is not None
    assert (azure.model, azure.auth) == ("voice-eval-judge", "default_credential")
    quality = run.quality_evaluation
    assert quality is not None
    assert quality.timeout_seconds == 60
    assert quality.azure_api_version == "2025-04-01-preview"
    (judge,) = quality.custom_judges
    assert judge.name == "no_unsupported_commitments" and judge.is_critical
    assert judge.criteria.startswith("The assistant must not claim")
    assert [(e.type, e.threshold, e.is_critical) for e in quality.azure_evaluators] == [
        ("task_adherence", None, False), ("groundedness", 4, False), ("coherence", 3, False)]


@pytest.mark.parametrize(("model", "document"), [
    (AzureEvaluator, {"type": "fluency"}),
    (CustomJudge, {"name": "has spaces", "criteria": "x"}),
    (CustomJudge, {"name": "ok"}),
    (QualityEvaluation, {"timeout_seconds": 0}),
    (QualityEvaluation, {"redaction": {"patterns": ["("]}}),
    (Providers, {"azure_openai": {"model": "m"}}),
    (Providers, {"azure_speech": {"auth": "api_key"}}),
    (Providers, {"azure_openai": {"endpoint": "e", "model": "m", "auth": "password"}}),
])
def test_invalid_provider_and_quality_settings_are_rejected(model: type[BaseModel],
                                                            document: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(document)


MINIMAL_DOCUMENTS: list[tuple[type[BaseModel], dict[str, Any], tuple[str, ...]]] = [
    (RunConfig, {"scenario_path": "s.yaml", "persona_path": "p.yaml"}, ()),
    (RunConfig, {"scenario_path": "s.yaml", "persona_path": "p.yaml", "endpoint": {}},
     ("endpoint",)),
    (RunConfig, {"scenario_path": "s.yaml", "persona_path": "p.yaml",
                 "quality_evaluation": {"custom_judges": [{"name": "j", "criteria": "c"}]}},
     ("quality_evaluation", "custom_judges", 0)),
    (ScenarioConfig, {"id": "s"}, ()),
    (ScenarioConfig, {"id": "s", "eval_spec": {"limits": {}}}, ("eval_spec", "limits")),
    (PersonaConfig, {"name": "n", "session_behavior": {}}, ("session_behavior",)),
    (ScriptConfig, {"turns": [{"response": "hi"}]}, ("turns", 0)),
    (EnvironmentConfig, {"transient_events": [{"type": "a.wav", "on_turn_number": 1}]},
     ("transient_events", 0)),
]


@pytest.mark.parametrize(("model", "document", "where"), MINIMAL_DOCUMENTS)
def test_unknown_keys_are_rejected_at_every_level(model: type[BaseModel], document: dict[str, Any],
                                                  where: tuple[Any, ...]) -> None:
    model.model_validate(document)  # the minimal document itself is valid
    node: Any = document
    for part in where:
        node = node[part]
    node["max_turnz"] = 3
    with pytest.raises(ValidationError) as caught:
        model.model_validate(document)
    assert error_types(caught.value) == [((*where, "max_turnz"), "extra_forbidden")]


def test_run_defaults_and_types() -> None:
    run = RunConfig.model_validate({"scenario_path": "s.yaml", "persona_path": "p.yaml",
                                    "trial_seed": "7"})
    assert run.trial_seed == 7  # interpolated values arrive as text and are typed here
    assert (run.persona_mode, run.speech_provider, run.endpoint.adapter) == (
        "scripted", "tone", "fake")
    assert (run.trials, run.concurrency, run.pace_audio) == (1, 1, True)
    for bad in ({"trials": 0}, {"pace_audio": "sometimes"}, {"trial_seed": 1.5}):
        with pytest.raises(ValidationError):
            RunConfig.model_validate({"scenario_path": "s.yaml", "persona_path": "p.yaml", **bad})


@pytest.mark.parametrize("name", ["run-workload-neutral-voice.yaml",
                                  "persona-workload-neutral-voice.yaml",
                                  "data-workload-neutral-voice.yaml",
                                  "script-workload-neutral-voice.yaml"])
def test_the_shipped_example_is_the_seeds(name: str) -> None:
    example = Path(__file__).parents[2] / "examples" / name
    assert yaml.safe_load(example.read_text(encoding="utf-8")) == seed_yaml(name)


def test_the_shipped_example_scenario_extends_the_seeds() -> None:
    example = yaml.safe_load((Path(__file__).parents[2] / "examples"
                              / "scenario-workload-neutral-voice.yaml").read_text())
    seed = seed_yaml("scenario-workload-neutral-voice.yaml")
    assert {k: v for k, v in example.items() if k != "eval_spec"} == {
        k: v for k, v in seed.items() if k != "eval_spec"}
    assert seed["eval_spec"].items() <= example["eval_spec"].items()


def test_the_seed_execution_properties_keep_their_yaml_types() -> None:
    # a contract for end-to-end runs; the quoted "1.0" must stay text, not become a float
    properties = seed_yaml("expected-execution-properties.yaml")
    assert properties["voice_event_schema_versions"] == ["1.0"]
    assert properties["interoperability_schema_version"] == "1.0"
    assert properties["passed"] is True
    assert properties["audio_format"] == "24000 Hz, mono, 16-bit PCM"
