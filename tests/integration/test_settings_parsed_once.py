"""A run parses ``endpoint.settings`` once, however many trials it has: at validation, into the
adapter's settings model, which every trial's adapter is then built with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import voicelab
from voicelab.doubles.product import FakeEndpointSettings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "run-workload-neutral-voice.yaml"


def test_a_run_of_two_trials_parses_the_fake_products_settings_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    validated: list[object] = []
    original = FakeEndpointSettings.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BaseModel], data: object, **kwargs: Any) -> BaseModel:
        validated.append(data)
        return original(cls, data, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(FakeEndpointSettings, "model_validate", classmethod(counting))
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=2, artifacts_dir=tmp_path))
    assert len(outcome.report.trials) == 2
    assert len(validated) == 1
