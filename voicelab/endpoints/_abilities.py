"""The optional abilities of an adapter, each declared once as a ``typing.Protocol`` and resolved
once per adapter class into :class:`AdapterAbilities`.

An adapter implements :class:`~voicelab.endpoints.ConversationEndpoint` and, beyond it, any of
the abilities below. Nothing asks an adapter by name at the call site: :func:`abilities_of`
checks the class against every Protocol when it is first resolved, and the runner and
``validate`` read the answer.

Two kinds of Protocol, checked two ways:

* what an *adapter object* does during a call (:class:`SendsDtmf`, :class:`HasOutcomeProbe`):
  ``issubclass(adapter_cls, Protocol)``;
* what the *adapter class* says before anything is built (classmethods and class attributes:
  :class:`DeclaresSettingsModel`, :class:`DeclaresTurnTaking`,
  :class:`ReportsProductCanSpeakFirst`, :class:`ChecksAdapterSettings`,
  :class:`DeclaresWireCodec`, :class:`DeclaresConversionDelay`, :class:`DeclaresCapabilities`):
  ``isinstance(adapter_cls, Protocol)``, the class object being what offers them.

Settings are parsed once. An adapter that declares its settings model
(:class:`DeclaresSettingsModel`) has ``endpoint.settings`` validated against it once, at
``validate`` (:meth:`AdapterAbilities.parse_settings`); its class hooks (``turn_taking``,
``product_can_speak_first``, ``check_settings``) and its constructor then receive that parsed
model. An adapter without one receives the settings mapping, as it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel

from ..config import with_old_spelling
from ._protocol import CAPABILITY_KEYS, TURN_TAKING_MODES
from ._settings import parse_settings

#: An adapter's ``endpoint.settings`` as its hooks and constructor receive them: the parsed
#: settings model when the adapter declares one (:class:`DeclaresSettingsModel`), else the
#: mapping of the run config.
EndpointSettings: TypeAlias = BaseModel | Mapping[str, object]

#: The directions of a conversion delay: toward the product, toward the simulated user.
CONVERSION_DIRECTIONS = ("to_product", "to_user")


@runtime_checkable
class SendsDtmf(Protocol):
    """Presses telephone keys: a script turn with ``dtmf`` needs it (``validate`` refuses a
    script that presses keys on an adapter without it)."""

    async def send_dtmf(self, digits: str) -> None:
        """Send ``digits`` (0-9, ``*``, ``#``) as key presses on the call."""


@runtime_checkable
class HasOutcomeProbe(Protocol):
    """Carries the product's own outcome probe, used when the run config names none."""

    def outcome_probe(self) -> Any:
        """An :class:`~voicelab.scoring.OutcomeProbe`, or None when there is none this time."""


@runtime_checkable
class ReportsArrivalStamps(Protocol):
    """Says, once connected, how the product's audio is stamped: ``kernel`` when each packet
    carries the moment the kernel received it (a loop busy elsewhere does not make those stamps
    late, so loop lag is not charged to them), ``kernel_stream`` when every product message
    carries the kernel's stamp except those the ``closed`` event lists (a WebSocket read from its
    TCP socket, :mod:`voicelab.endpoints._socket`; WebRTC, whose data-channel messages and
    packets read without a kernel stamp the loop stamps), else ``loop`` (stamped when the loop
    reads it)."""

    def arrival_stamps(self) -> str:
        """``kernel``, ``kernel_stream`` or ``loop``."""


@runtime_checkable
class ReportsReceiveBacklog(Protocol):
    """Says how far behind its socket its receive path is: an adapter whose packets wait
    between their arrival stamp and ``events()`` (a library's own task decrypting them, a
    decoder) while a busy loop catches up. The simulated user cannot have heard past the
    oldest of them: silence heard there would end a reply whose audio is still on its way."""

    def oldest_waiting_ns(self) -> int | None:
        """The arrival stamp (monotonic ns) of the oldest product packet that has arrived but
        not yet come out of ``events()``; None when none waits."""


@runtime_checkable
class ReportsDeparture(Protocol):
    """Says when the audio last handed to ``send_audio`` really left: an adapter that hands
    its audio to a library's own sending task, which a busy loop runs an iteration or more
    later. The live line stamps its frames (and the user's speech moments) with it."""

    def last_departure_ns(self) -> int | None:
        """The monotonic stamp (ns) when the first sample of the audio last handed to
        ``send_audio`` left, or None when not known (then it is taken as sent on return)."""


@runtime_checkable
class ReportsCallSetup(Protocol):
    """Says, once connected, how long the call took to set up on its wire (a SIP call: INVITE
    sent to 200 OK received), for ``voice-metrics.json``'s ``call_setup_ms``."""

    def call_setup_ms(self) -> float | None:
        """The setup time in ms (None: not known)."""


@runtime_checkable
class DeclaresSettingsModel(Protocol):
    """Its ``endpoint.settings`` model (a class attribute: a pydantic model class, best with
    ``extra="forbid"``). ``validate`` parses the settings into it once, naming a bad key
    (``endpoint.settings.<field>``, exit 2); the hooks below and the constructor then receive
    the parsed model instead of the mapping."""

    settings_model: type[BaseModel]


@runtime_checkable
class DeclaresTurnTaking(Protocol):
    """Says (a classmethod) how it takes turns with ``settings`` (its parsed settings model,
    or the mapping for an adapter without one): ``client`` (the default for an adapter without
    it) or ``server_vad``."""

    def turn_taking(self, settings: EndpointSettings) -> str: ...


@runtime_checkable
class ReportsProductCanSpeakFirst(Protocol):
    """Says (a classmethod) whether, with ``settings`` (parsed, as for ``turn_taking``), the
    product can open the conversation; ``validate`` refuses ``first_speaker: product`` when it
    cannot."""

    def product_can_speak_first(self, settings: EndpointSettings) -> bool: ...


@runtime_checkable
class ChecksAdapterSettings(Protocol):
    """Checks ``endpoint.settings`` (a classmethod) at ``validate``, without building anything:
    what its settings model cannot say (an optional package the settings need), or, for an
    adapter without a model, everything. Receives the settings as ``turn_taking`` does; raises
    :class:`~voicelab.errors.ConfigError`, ``ValueError`` or ``TypeError``."""

    def check_settings(self, settings: EndpointSettings) -> None: ...


@runtime_checkable
class DeclaresWireCodec(Protocol):
    """The telephony codec its wire itself carries (Twilio's ``mulaw``): an environment line
    with the same codec is not encoded a second time."""

    wire_codec: str


@runtime_checkable
class DeclaresConversionDelay(Protocol):
    """The constant delay its own audio conversion adds, in ms, per direction (``to_product``,
    ``to_user``): recorded at connect and left out of the product's reaction times."""

    conversion_delay_ms: Mapping[str, float]


@runtime_checkable
class DeclaresCapabilities(Protocol):
    """Its capabilities (a class attribute): a mapping of capability name to bool."""

    capabilities: Mapping[str, bool]


@runtime_checkable
class LineChunkSettings(Protocol):
    """Parsed settings that say how long each chunk of the live line is."""

    chunk_ms: float


@runtime_checkable
class ExposesSettings(Protocol):
    """An adapter object that shows its parsed settings (``settings``), so the runner hands it
    the live line in the chunks its settings model says (pipecat's 20 ms by default)."""

    @property
    def settings(self) -> object: ...


def line_chunk_ms_of(endpoint: object) -> float | None:
    """The chunk length ``endpoint``'s parsed settings give the live line, if they say one."""
    if not isinstance(endpoint, ExposesSettings):
        return None
    settings = endpoint.settings
    if not isinstance(settings, LineChunkSettings):
        return None
    chunk = settings.chunk_ms
    if isinstance(chunk, int | float) and not isinstance(chunk, bool) and chunk > 0:
        return float(chunk)
    return None


@dataclass(frozen=True)
class AdapterAbilities:
    """What one adapter class can do beyond the protocol, resolved once (:func:`abilities_of`)."""

    adapter_cls: type
    #: every capability name, False when the adapter does not declare it
    capabilities: Mapping[str, bool]
    #: why ``capabilities`` could not be read (None when it could)
    capabilities_problem: str | None = None
    sends_dtmf: bool = False
    has_outcome_probe: bool = False
    checks_settings: bool = False
    wire_codec: str | None = None
    #: per direction, when the adapter declares a non-zero delay; empty otherwise
    conversion_delay_ms: Mapping[str, float] = field(default_factory=dict)
    declares_turn_taking: bool = False
    reports_product_can_speak_first: bool = False
    #: the adapter's settings model (None: it takes the settings mapping)
    settings_model: type[BaseModel] | None = None
    #: why ``settings_model`` cannot be used (None when it can, or there is none)
    settings_model_problem: str | None = None

    def parse_settings(self, settings: EndpointSettings | None) -> EndpointSettings:
        """``settings`` as the adapter takes them: validated against its settings model (an
        instance of the model passes as it is, so parsed settings are never parsed again;
        a failure is a :class:`~voicelab.errors.ConfigError` keyed
        ``endpoint.settings.<field>``), or a copy of the mapping for an adapter without one."""
        if self.settings_model_problem is not None:
            raise TypeError(self.settings_model_problem)
        if self.settings_model is not None:
            return parse_settings(self.settings_model, settings)
        if isinstance(settings, BaseModel):
            return settings
        return dict(settings or {})

    def turn_taking(self, settings: EndpointSettings | None) -> str:
        """How the adapter takes turns with ``settings`` (``client`` when it does not say);
        the adapter's own errors (bad settings) propagate."""
        adapter = self.adapter_cls
        if not isinstance(adapter, DeclaresTurnTaking):
            return "client"
        parsed = self.parse_settings(settings)
        if isinstance(parsed, Mapping):  # a mapping's reader may still look for the old name
            parsed = with_old_spelling(parsed)
        mode = adapter.turn_taking(parsed)
        if mode not in TURN_TAKING_MODES:
            raise TypeError(f"turn_taking() returned {mode!r}, not one of "
                            f"{', '.join(TURN_TAKING_MODES)}")
        return str(mode)

    def product_can_speak_first(self, settings: EndpointSettings | None) -> bool:
        """Whether the product can open the conversation with ``settings`` (True when the
        adapter does not say)."""
        adapter = self.adapter_cls
        if isinstance(adapter, ReportsProductCanSpeakFirst):
            return bool(adapter.product_can_speak_first(self.parse_settings(settings)))
        return True

    def check_settings(self, settings: EndpointSettings | None) -> None:
        """``settings`` checked as ``validate`` checks them: parsed into the settings model
        (when the adapter has one, and they are not parsed yet), then the adapter's own check,
        when it has one."""
        parsed = self.parse_settings(settings)
        adapter = self.adapter_cls
        if isinstance(adapter, ChecksAdapterSettings):
            adapter.check_settings(parsed)


def _capabilities(adapter_cls: type) -> tuple[Mapping[str, bool], str | None]:
    raw: object = adapter_cls.capabilities if isinstance(adapter_cls, DeclaresCapabilities) \
        else {}
    if not isinstance(raw, Mapping):
        return MappingProxyType(dict.fromkeys(CAPABILITY_KEYS, False)), \
            "capabilities must be a mapping of capability name to bool"
    return MappingProxyType({key: bool(raw.get(key, False)) for key in CAPABILITY_KEYS}), None


def _conversion_delay(adapter_cls: type) -> Mapping[str, float]:
    if not isinstance(adapter_cls, DeclaresConversionDelay):
        return MappingProxyType({})
    delays: object = adapter_cls.conversion_delay_ms
    if not isinstance(delays, Mapping) or not any(delays.values()):
        return MappingProxyType({})
    return MappingProxyType({direction: round(float(delays.get(direction, 0.0)), 6)
                             for direction in CONVERSION_DIRECTIONS})


def _settings_model(adapter_cls: type) -> tuple[type[BaseModel] | None, str | None]:
    if not isinstance(adapter_cls, DeclaresSettingsModel):
        return None, None
    model: object = adapter_cls.settings_model
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model, None
    return None, "settings_model must be a pydantic model class"


#: each adapter class's abilities, resolved the first time it is asked about
_RESOLVED: dict[type, AdapterAbilities] = {}


def abilities_of(adapter_cls: type) -> AdapterAbilities:
    """The abilities of ``adapter_cls``, checked against every ability Protocol once."""
    abilities = _RESOLVED.get(adapter_cls)
    if abilities is None:
        abilities = _RESOLVED[adapter_cls] = _resolve(adapter_cls)
    return abilities


def _resolve(adapter_cls: type) -> AdapterAbilities:
    capabilities, problem = _capabilities(adapter_cls)
    settings_model, settings_model_problem = _settings_model(adapter_cls)
    codec = adapter_cls.wire_codec if isinstance(adapter_cls, DeclaresWireCodec) else None
    return AdapterAbilities(
        adapter_cls=adapter_cls,
        capabilities=capabilities,
        capabilities_problem=problem,
        sends_dtmf=issubclass(adapter_cls, SendsDtmf),
        has_outcome_probe=issubclass(adapter_cls, HasOutcomeProbe),
        checks_settings=isinstance(adapter_cls, ChecksAdapterSettings),
        wire_codec=codec if isinstance(codec, str) else None,
        conversion_delay_ms=_conversion_delay(adapter_cls),
        declares_turn_taking=isinstance(adapter_cls, DeclaresTurnTaking),
        reports_product_can_speak_first=isinstance(adapter_cls, ReportsProductCanSpeakFirst),
        settings_model=settings_model,
        settings_model_problem=settings_model_problem,
    )


def turn_taking_of(adapter_cls: type, settings: EndpointSettings | None) -> str:
    """How ``adapter_cls`` with ``settings`` takes turns (``client`` when it does not say)."""
    return abilities_of(adapter_cls).turn_taking(settings)


def declared_capabilities(adapter_cls: type) -> dict[str, bool]:
    """The adapter's capabilities as a full mapping (missing keys are False); a ``TypeError``
    when its ``capabilities`` is no mapping."""
    abilities = abilities_of(adapter_cls)
    if abilities.capabilities_problem is not None:
        raise TypeError(abilities.capabilities_problem)
    return dict(abilities.capabilities)
