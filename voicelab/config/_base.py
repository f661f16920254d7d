"""The base of every configuration model and the small types they share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]


class StrictModel(BaseModel):
    """Unknown keys are errors (a typo must not be ignored)."""

    # open-ended fields (endpoint settings, outcome_spec) may hold YAML ``!!binary`` values:
    # base64 writes any bytes to JSON, where the default (UTF-8) fails on most of them
    model_config = ConfigDict(extra="forbid", validate_default=True, ser_json_bytes="base64")
