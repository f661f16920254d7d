"""``endpoint.settings`` of ``adapter: realtime``: which service (dialect, URI or endpoint and
model, credentials), the session sent with ``session.update``, and what the service may send.

They are parsed once, at ``validate`` (``RealtimeEndpoint.settings_model``), and read by the
endpoint and its class methods (turn taking, speaking first); the model and the target it names
are their own module, as the other adapters' settings are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .. import AdapterSettings, InboundLimits
from .._fields import JsonObject
from . import wire


class RealtimeSettings(AdapterSettings):
    dialect: Literal["openai", "azure_openai", "voice_live"] = "openai"
    uri: str | None = None
    endpoint: str | None = None
    model: str | None = None
    deployment: str | None = None
    api_version: str | None = None
    api_key: str | None = None
    auth: Literal["api_key", "default_credential"] = "api_key"
    session_format: Literal["ga", "beta"] | None = None
    session: JsonObject = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0
    tool_outputs: JsonObject = Field(default_factory=dict)
    opening_response: bool = False
    #: what the service may send (events other than audio: see :mod:`.._limits`)
    limits: InboundLimits = Field(default_factory=InboundLimits)

    @property
    def turn_detection(self) -> str:
        """The session's ``turn_detection`` as voicelab's turn-taking mode: ``server_vad`` when
        the service detects turns (``server_vad`` / ``semantic_vad``), else ``client``."""
        detection = self.session.get("turn_detection")
        if detection is None:
            audio = self.session.get("audio")
            inner = audio.get("input") if isinstance(audio, Mapping) else None
            detection = inner.get("turn_detection") if isinstance(inner, Mapping) else None
        return "server_vad" if isinstance(detection, Mapping) and detection.get("type") in (
            "server_vad", "semantic_vad") else "client"

    @model_validator(mode="after")
    def _target_is_complete(self) -> RealtimeSettings:
        if self.uri is not None:
            if not self.uri.startswith(("ws://", "wss://")):
                raise ValueError("uri must be a ws:// or wss:// URI")
            return self
        try:
            wire.realtime_url(self.dialect, endpoint=self.endpoint,
                              model=self.deployment or self.model, api_version=self.api_version)
        except ValueError as error:
            raise ValueError(f"{error} (or give a full 'uri')") from None
        return self

    def target(self) -> wire.RealtimeTarget:
        session_format = self.session_format or wire.default_session_format(
            self.dialect, api_version=self.api_version, uri=self.uri)
        url = self.uri or wire.realtime_url(self.dialect, endpoint=self.endpoint,
                                            model=self.deployment or self.model,
                                            api_version=self.api_version)
        return wire.RealtimeTarget(url=url, dialect=self.dialect, session_format=session_format,
                                   api_key=self.api_key, auth=self.auth,
                                   extra_headers=dict(self.headers),
                                   model=self.deployment or self.model)
