"""The environment file: the acoustic surroundings mixed into the user's audio.

Background noise and voices, timed transient sounds, noise probes, a speakerphone's echo and
the telephone line; every audio file it names is listed by ``asset_paths`` so validation can
decode each once. Paths are kept as written; the loader resolves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import NonNegativeFloat, StrictModel
from ._channel import ChannelConfig

Volume = Annotated[float, Field(ge=0, le=4)]


class TransientEvent(StrictModel):
    type: Path = Field(description="the audio file of the event (the seed calls it 'type')")
    volume: Volume = 0.5
    trigger_mode: Literal["on_turn", "scheduled", "random"] = "on_turn"
    on_turn_number: Annotated[int, Field(gt=0)] | None = None
    at_seconds: NonNegativeFloat | None = None
    probability: Annotated[float, Field(ge=0, le=1)] = 0.5

    @model_validator(mode="after")
    def _trigger_is_complete(self) -> TransientEvent:
        if self.trigger_mode == "on_turn" and self.on_turn_number is None:
            raise ValueError("trigger_mode 'on_turn' needs 'on_turn_number'")
        if self.trigger_mode == "scheduled" and self.at_seconds is None:
            raise ValueError("trigger_mode 'scheduled' needs 'at_seconds'")
        return self


class NoiseProbe(StrictModel):
    """A sound played into the user's line while the product speaks (the product should keep
    talking): ``after_seconds`` after the onset of the product's ``on_reply``-th reply."""

    sound: Path = Field(description="the audio file (e.g. datasets/environments/door-close.wav)")
    volume: Volume = 0.5
    #: the product's replies are counted from 1 in the order heard (the opening is reply 1)
    on_reply: Annotated[int, Field(gt=0)] = 1
    after_seconds: NonNegativeFloat = 1.0


class RoomImpulseResponse(StrictModel):
    """A seeded room impulse response: a direct path, then exponentially decaying noise."""

    #: time for the reverberant tail to decay by 60 dB
    rt60_ms: Annotated[float, Field(gt=0, le=3000)] = 300.0
    #: the speakerphone's band: the echo path is low-passed at this frequency
    lowpass_hz: Annotated[float, Field(gt=100, lt=12000)] = 3400.0
    #: the tail's noise; absent: derived from the trial's seed
    seed: int | None = None


class EchoConfig(StrictModel):
    """A speakerphone: the product's audio as the user heard it leaks back into the user's
    line, ``delay_ms`` later, through a room impulse response, ``echo_return_loss_db`` down."""

    delay_ms: Annotated[float, Field(ge=0, le=2000)] = 40.0
    echo_return_loss_db: Annotated[float, Field(ge=0, le=80)] = 20.0
    rir: RoomImpulseResponse = Field(default_factory=RoomImpulseResponse)


class EnvironmentConfig(StrictModel):
    name: str = ""
    impact: Annotated[float, Field(ge=0, le=1)] = 1.0
    base_noise: Path | None = None
    base_noise_volume: Volume = 0.2
    background_voices: Path | None = None
    background_voices_volume: Volume = 0.15
    transient_events: list[TransientEvent] = Field(default_factory=list)
    #: the telephony line between the user and the product (codec, loss, jitter, concealment),
    #: per direction; absent: a clean line (see ``voicelab.config.ChannelConfig``)
    channel: ChannelConfig | None = None
    #: selectivity probes: sounds timed into the product's speech (docs/probes.md)
    noise_probes: list[NoiseProbe] = Field(default_factory=list)
    #: the product's own voice leaking back into the user's line (a speakerphone)
    echo: EchoConfig | None = None

    def asset_paths(self) -> list[tuple[str, Path]]:
        """(key path, file) for every audio asset the environment names."""
        assets: list[tuple[str, Path]] = []
        if self.base_noise is not None:
            assets.append(("base_noise", self.base_noise))
        if self.background_voices is not None:
            assets.append(("background_voices", self.background_voices))
        for index, event in enumerate(self.transient_events):
            assets.append((f"transient_events[{index}].type", event.type))
        for index, probe in enumerate(self.noise_probes):
            assets.append((f"noise_probes[{index}].sound", probe.sound))
        return assets


QUIET_ENVIRONMENT = EnvironmentConfig(name="quiet", impact=0.0)
