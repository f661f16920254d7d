"""``providers:``: the model and speech services a run may call (personas, speech, judges).

Only what is written is validated here; clients are made in ``voicelab.providers``, which imports
each cloud SDK only when it is used.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import StrictModel


class AzureOpenAIProvider(StrictModel):
    endpoint: Annotated[str, Field(min_length=1)]
    model: Annotated[str, Field(min_length=1)]
    api_version: str = "2025-04-01-preview"
    auth: Literal["default_credential", "api_key"] = "default_credential"
    api_key: str | None = None
    temperature: float | None = None
    seed: int | None = None


class OpenAIProvider(StrictModel):
    base_url: str | None = None
    api_key: str | None = None
    model: Annotated[str, Field(min_length=1)]
    temperature: float | None = None
    seed: int | None = None


class AzureSpeechProvider(StrictModel):
    region: str | None = None
    endpoint: str | None = None
    auth: Literal["api_key", "default_credential"] = "api_key"
    api_key: str | None = None
    resource_id: str | None = None
    output_format: str = "raw-24khz-16bit-mono-pcm"

    @model_validator(mode="after")
    def _has_location(self) -> AzureSpeechProvider:
        if not self.region and not self.endpoint:
            raise ValueError("azure_speech needs 'region' or 'endpoint'")
        return self


class VoiceLiveProvider(StrictModel):
    endpoint: Annotated[str, Field(min_length=1)]
    model: str = "gpt-realtime"
    api_version: str = "2025-10-01"
    auth: Literal["api_key", "default_credential"] = "api_key"
    api_key: str | None = None
    voice: str | None = None
    instructions: str | None = None


class Providers(StrictModel):
    azure_openai: AzureOpenAIProvider | None = None
    openai: OpenAIProvider | None = None
    azure_speech: AzureSpeechProvider | None = None
    voice_live: VoiceLiveProvider | None = None
