"""What the SIP double does (``--settings`` JSON of ``python -m voicelab.doubles.sip``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...endpoints import AdapterSettings
from .._voice import VoiceKind
from ._auth import Algorithm

#: where a key of a menu leads: another menu's name, or the agent
AGENT = "agent"


class Menu(BaseModel):
    """One IVR menu: its prompt, and which key leads where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: str
    keys: dict[str, str] = Field(default_factory=dict)


def _default_menus() -> dict[str, Menu]:
    return {
        "main": Menu(prompt="Welcome to Acme. For billing press 1. For support press 2.",
                     keys={"1": "billing", "2": "support"}),
        "billing": Menu(prompt="Billing. For your balance press 1. To speak to an agent "
                               "press 0.", keys={"1": "balance", "0": AGENT}),
        "balance": Menu(prompt="Your balance is forty two dollars. To speak to an agent "
                               "press 0.", keys={"0": AGENT}),
        "support": Menu(prompt="Support. To speak to an agent press 0.", keys={"0": AGENT}),
    }


class AuthSettings(BaseModel):
    """``require_auth``: challenge every INVITE with a digest (RFC 3261 22, RFC 8760)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str
    password: str
    realm: str = "voicelab"
    algorithm: Algorithm = "MD5"


class SipDoubleSettings(AdapterSettings):
    """An IVR front (``mode: ivr``: menus, keys, then the agent) or a speaking agent."""

    mode: Literal["ivr", "agent"] = "ivr"
    #: the IVR: menus by name, the first is where a call starts
    menus: dict[str, Menu] = Field(default_factory=_default_menus)
    invalid_key_text: str = "Sorry, that is not an option."
    #: from a key to the next prompt's first packet
    menu_latency_ms: Annotated[float, Field(ge=0, le=10_000)] = 100.0
    #: the agent: greets, then answers each caller utterance
    greeting: str = "Hello, this is the Acme agent. How can I help you today?"
    replies: list[str] = Field(default_factory=list)
    reply_text: str = "Thank you. That is noted."
    reply_latency_ms: Annotated[float, Field(ge=0, le=10_000)] = 200.0
    vad_silence_ms: Annotated[float, Field(gt=0, le=10_000)] = 500.0
    #: the caller's voice stops an agent reply (menu prompts stop for keys only)
    barge_in: bool = True
    barge_in_after_ms: Annotated[float, Field(gt=0, le=10_000)] = 150.0
    #: hang up (BYE) once this many agent replies have played (0: never)
    hang_up_after_replies: Annotated[int, Field(ge=0)] = 0
    voice: VoiceKind = "tone"
    voice_seed: int = 11
    #: ringing time before the answer
    ring_ms: Annotated[float, Field(ge=0, le=60_000)] = 100.0
    #: answer 183 with SDP first and start the prompt before the 200 (early media)
    early_media: bool = False
    #: an RTCP sender report this often (0: no RTCP)
    rtcp_interval_seconds: Annotated[float, Field(ge=0, le=60)] = 5.0
    # --- failing and hostile far ends (for tests of a client) ---------------------------------
    #: the final status to every INVITE (after 100 Trying)
    respond_with: Annotated[int, Field(ge=400, le=699)] | None = None
    never_answer: bool = False
    require_auth: AuthSettings | None = None
    no_media_after_answer: bool = False
    hang_up_after_seconds: Annotated[float, Field(gt=0, le=3600)] | None = None
    reinvite_after_seconds: Annotated[float, Field(gt=0, le=3600)] | None = None
    #: the re-INVITE after ``reinvite_after_seconds`` changes the call's codec to this one
    #: (offered alone, sendrecv) instead of holding the call
    reinvite_codec: Literal["PCMU", "PCMA", "OPUS"] | None = None
    #: ``rtp_flood_packets_per_second`` packets of silence beside the media
    rtp_flood: bool = False
    rtp_flood_packets_per_second: Annotated[int, Field(ge=100, le=100_000)] = 5000
    #: media sent from another port than the one the SDP answer names
    foreign_rtp: bool = False
    #: the SDP answer padded to ``huge_sdp_bytes`` over TCP; over UDP, to what one datagram
    #: holds (60 000 bytes)
    huge_sdp: bool = False
    huge_sdp_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 4 * 1024 * 1024
    #: ``storm_count`` RFC 4733 key events (a start and three end packets each)
    dtmf_storm: bool = False
    #: ``storm_count`` BYEs, after ``hang_up_after_seconds`` (0.5 s when unset)
    bye_storm: bool = False
    storm_count: Annotated[int, Field(ge=1, le=100_000)] = 2000
    # --- limits on what the caller sends (over them: counted, dropped, one violation line) ---
    max_rtp_packets_per_second: Annotated[int, Field(ge=50, le=100_000)] = 400
    max_calls: Annotated[int, Field(ge=1, le=10_000)] = 200
    max_violations_logged: Annotated[int, Field(ge=1, le=10_000)] = 50
    #: keep this much of the caller's decoded audio (8 kHz) per call, for tests comparing
    #: what the double heard with what was sent (0: none)
    record_caller_seconds: Annotated[float, Field(ge=0, le=600)] = 0.0

    @model_validator(mode="after")
    def _menus_lead_somewhere(self) -> SipDoubleSettings:
        if self.mode == "ivr" and not self.menus:
            raise ValueError("mode ivr needs at least one menu")
        for name, menu in self.menus.items():
            for key, target in menu.keys.items():
                if key not in KEYS:
                    raise ValueError(f"menus.{name}.keys: {key!r} is not a key (0-9 * # A-D)")
                if target != AGENT and target not in self.menus:
                    raise ValueError(f"menus.{name}.keys.{key}: no menu {target!r}")
        return self

    def spoken_texts(self) -> list[str]:
        """Everything the double may say (a piper voice prepares them before serving)."""
        return [*(m.prompt for m in self.menus.values()), self.invalid_key_text, self.greeting,
                *self.replies, self.reply_text]


#: RFC 4733 events 0-15 as keys
KEYS = "0123456789*#ABCD"
