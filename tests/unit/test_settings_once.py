"""``endpoint.settings`` are parsed once, at validation, into the adapter's settings model: the
adapter's hooks, its construction by the runner and the cost estimate all read that one parse.
An adapter without a settings model keeps receiving the mapping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from voicelab._validate import validate_run
from voicelab.config import load_run
from voicelab.endpoints import EndpointContext, EndpointEvent, abilities_of, load_endpoint_class
from voicelab.endpoints.realtime._endpoint import RealtimeEndpoint
from voicelab.endpoints.realtime._settings import RealtimeSettings
from voicelab.errors import ConfigError
from voicelab.execution import RunContext, TrialJob
from voicelab.execution._protocol import trial_plan
from voicelab.runner import estimate_from_config
from voicelab.runner._trial import (
    DEFAULT_CHUNK_MS,
    _built_endpoint,
    _endpoint_settings,
    line_chunk_ms,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
REALTIME = ["endpoint.adapter=realtime", "endpoint.settings.uri=ws://127.0.0.1:9/",
            "endpoint.settings.model=gpt-test-realtime",
            # the example's product speaks first: the opening hook is asked too
            "endpoint.settings.opening_response=true"]


def _count_validations(monkeypatch: pytest.MonkeyPatch, model: type[BaseModel]) -> list[object]:
    """Every validation of ``model`` from a mapping, appended to the returned list."""
    validated: list[object] = []
    original = model.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BaseModel], data: object, **kwargs: Any) -> BaseModel:
        validated.append(data)
        return original(cls, data, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(model, "model_validate", classmethod(counting))
    return validated


def test_a_trial_parses_the_settings_once(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    validated = _count_validations(monkeypatch, RealtimeSettings)
    plan = validate_run(load_run(EXAMPLE, overrides=REALTIME))
    context = RunContext(key="r", loaded=plan.loaded, run_id="r", bundle=tmp_path,
                         speech_cache_dir=tmp_path)
    trial = trial_plan(plan, context, TrialJob(index=1, seed=42), speech=None)
    endpoint = asyncio.run(_built_endpoint(trial, _endpoint_settings(trial),
                                           EndpointContext(session_id="s"), None))
    estimate = estimate_from_config(plan.loaded, trials=1, pricing=None,
                                    endpoint_settings=plan.endpoint_settings)
    assert len(validated) == 1
    assert isinstance(endpoint, RealtimeEndpoint)
    assert isinstance(plan.endpoint_settings, RealtimeSettings)
    # the estimate priced the model the parsed settings name
    assert ("product", "openai", "gpt-test-realtime") in {
        (item.component, item.provider, item.model) for item in estimate.unpriced}


class RecordedSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str
    turn_taking: Literal["client", "server_vad"] = "client"


class _Adapter:
    """A plug-in adapter: the protocol's methods, and hooks that keep what they were given."""

    capabilities: ClassVar[dict[str, bool]] = {"streaming_input": True, "streaming_output": True}
    given: ClassVar[list[tuple[str, object]]]

    def __init__(self, settings: object, context: EndpointContext):
        self.given.append(("built", settings))

    @classmethod
    def check_settings(cls, settings: object) -> None:
        cls.given.append(("check_settings", settings))

    @classmethod
    def turn_taking(cls, settings: object) -> str:
        cls.given.append(("turn_taking", settings))
        return "client"

    @classmethod
    def product_can_speak_first(cls, settings: object) -> bool:
        cls.given.append(("product_can_speak_first", settings))
        return True

    async def connect(self) -> None: ...

    async def send_audio(self, audio: object) -> None: ...

    async def commit_turn(self) -> None: ...

    async def events(self) -> AsyncIterator[EndpointEvent]:
        return
        yield

    async def interrupt(self) -> None: ...

    async def close(self) -> None: ...


class ModelAdapter(_Adapter):
    settings_model = RecordedSettings
    given: ClassVar[list[tuple[str, object]]] = []


class MappingAdapter(_Adapter):
    given: ClassVar[list[tuple[str, object]]] = []


def _plan(adapter: type, *overrides: str) -> Any:
    return validate_run(load_run(EXAMPLE, overrides=[
        f"endpoint.adapter={__name__}.{adapter.__name__}",
        "endpoint.settings.uri=ws://127.0.0.1:9/", *overrides]))


def _built(plan: Any, tmp_path: Path) -> None:
    context = RunContext(key="r", loaded=plan.loaded, run_id="r", bundle=tmp_path,
                         speech_cache_dir=tmp_path)
    trial = trial_plan(plan, context, TrialJob(index=1, seed=42), speech=None)
    asyncio.run(_built_endpoint(trial, _endpoint_settings(trial), EndpointContext(session_id="s"),
                                None))


def test_every_hook_and_the_constructor_receive_the_one_parsed_model(tmp_path: Path) -> None:
    ModelAdapter.given.clear()
    plan = _plan(ModelAdapter)
    _built(plan, tmp_path)
    assert isinstance(plan.endpoint_settings, RecordedSettings)
    assert [name for name, _ in ModelAdapter.given] == [
        "check_settings", "turn_taking", "product_can_speak_first", "built"]
    assert all(settings is plan.endpoint_settings for _, settings in ModelAdapter.given)


def test_a_plug_in_without_a_settings_model_receives_the_mapping(tmp_path: Path) -> None:
    MappingAdapter.given.clear()
    plan = _plan(MappingAdapter, "endpoint.settings.colour=blue")  # no model: nothing refused
    _built(plan, tmp_path)
    assert abilities_of(MappingAdapter).settings_model is None
    assert plan.endpoint_settings == {"uri": "ws://127.0.0.1:9/", "colour": "blue"}
    kinds = {name: settings for name, settings in MappingAdapter.given}
    assert all(isinstance(settings, Mapping) for settings in kinds.values())
    assert kinds["built"] == {"uri": "ws://127.0.0.1:9/", "colour": "blue"}


def test_a_bad_setting_is_one_error_naming_the_run_file_and_key() -> None:
    with pytest.raises(ConfigError) as refused:
        _plan(ModelAdapter, "endpoint.settings.colour=blue")
    assert refused.value.key == "endpoint.settings.colour"
    assert "unknown setting" in refused.value.message
    assert refused.value.source == str(EXAMPLE)
    with pytest.raises(ConfigError) as wrong:
        _plan(ModelAdapter, "endpoint.settings.turn_taking=telepathy")
    assert wrong.value.key == "endpoint.settings.turn_taking"


def test_the_older_spelling_is_read_into_the_model_and_named_as_written() -> None:
    plan = _plan(ModelAdapter, "endpoint.settings.turn_detection=server_vad", "pace_audio=true")
    assert isinstance(plan.endpoint_settings, RecordedSettings)
    assert plan.endpoint_settings.turn_taking == "server_vad"
    assert any("turn_detection" in warning for warning in plan.summary.warnings)
    with pytest.raises(ConfigError) as wrong:
        _plan(ModelAdapter, "endpoint.settings.turn_detection=telepathy")
    assert wrong.value.key == "endpoint.settings.turn_detection"


def test_a_mapping_reader_still_finds_the_older_spelling() -> None:
    MappingAdapter.given.clear()
    _plan(MappingAdapter, "endpoint.settings.turn_detection=server_vad", "pace_audio=true")
    asked = dict(MappingAdapter.given)["turn_taking"]
    assert isinstance(asked, Mapping)
    assert asked["turn_detection"] == asked["turn_taking"] == "server_vad"


class BrokenModelAdapter(MappingAdapter):
    settings_model = dict


def test_a_settings_model_that_is_no_pydantic_model_is_refused() -> None:
    assert abilities_of(BrokenModelAdapter).settings_model_problem is not None
    with pytest.raises(TypeError, match="pydantic"):
        abilities_of(BrokenModelAdapter).parse_settings({})
    with pytest.raises(ConfigError, match="pydantic") as refused:  # validate: exit 2
        load_endpoint_class(f"{__name__}.BrokenModelAdapter")
    assert refused.value.key == "endpoint.adapter"


class ChunkSettings(BaseModel):
    chunk_ms: float = 100.0


def test_the_live_line_is_chunked_as_the_parsed_settings_say() -> None:
    # an adapter that does not show its settings: the parsed model, else the mapping, says
    assert line_chunk_ms(object(), ChunkSettings(chunk_ms=20)) == 20
    assert line_chunk_ms(object(), {"chunk_ms": 40}) == 40
    assert line_chunk_ms(object(), RecordedSettings(uri="ws://x")) == DEFAULT_CHUNK_MS
