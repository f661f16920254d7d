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
  :class:`DeclaresTurnTaking`, :class:`ReportsProductCanSpeakFirst`,
  :class:`ChecksAdapterSettings`, :class:`DeclaresWireCodec`,
  :class:`DeclaresConversionDelay`, :class:`DeclaresCapabilities`):
  ``isinstance(adapter_cls, Protocol)``, the class object being what offers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ._protocol import CAPABILITY_KEYS, TURN_TAKING_MODES

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
    late, so loop lag is not charged to them), else ``loop`` (stamped when the loop reads it)."""

    def arrival_stamps(self) -> str:
        """``kernel`` or ``loop``."""


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
class DeclaresTurnTaking(Protocol):
    """Says (a classmethod) how it takes turns with ``settings``: ``client`` (the default for an
    adapter without it) or ``server_vad``."""

    def turn_taking(self, settings: Mapping[str, object]) -> str: ...


@runtime_checkable
class ReportsProductCanSpeakFirst(Protocol):
    """Says (a classmethod) whether, with ``settings``, the product can open the conversation;
    ``validate`` refuses ``first_speaker: product`` when it cannot."""

    def product_can_speak_first(self, settings: Mapping[str, object]) -> bool: ...


@runtime_checkable
class ChecksAdapterSettings(Protocol):
    """Checks ``endpoint.settings`` (a classmethod) at ``validate``, without building anything;
    raises :class:`~voicelab.errors.ConfigError`, ``ValueError`` or ``TypeError``."""

    def check_settings(self, settings: Mapping[str, object]) -> None: ...


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

    def turn_taking(self, settings: Mapping[str, object]) -> str:
        """How the adapter takes turns with ``settings`` (``client`` when it does not say);
        the adapter's own errors (bad settings) propagate."""
        adapter = self.adapter_cls
        mode = adapter.turn_taking(settings) if isinstance(adapter, DeclaresTurnTaking) \
            else "client"
        if mode not in TURN_TAKING_MODES:
            raise TypeError(f"turn_taking() returned {mode!r}, not one of "
                            f"{', '.join(TURN_TAKING_MODES)}")
        return str(mode)

    def product_can_speak_first(self, settings: Mapping[str, object]) -> bool:
        """Whether the product can open the conversation with ``settings`` (True when the
        adapter does not say)."""
        adapter = self.adapter_cls
        if isinstance(adapter, ReportsProductCanSpeakFirst):
            return bool(adapter.product_can_speak_first(settings))
        return True

    def check_settings(self, settings: Mapping[str, object]) -> None:
        """The adapter's own settings check, when it has one."""
        adapter = self.adapter_cls
        if isinstance(adapter, ChecksAdapterSettings):
            adapter.check_settings(settings)


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
    )


def turn_taking_of(adapter_cls: type, settings: Mapping[str, object]) -> str:
    """How ``adapter_cls`` with ``settings`` takes turns (``client`` when it does not say)."""
    return abilities_of(adapter_cls).turn_taking(settings)


def declared_capabilities(adapter_cls: type) -> dict[str, bool]:
    """The adapter's capabilities as a full mapping (missing keys are False); a ``TypeError``
    when its ``capabilities`` is no mapping."""
    abilities = abilities_of(adapter_cls)
    if abilities.capabilities_problem is not None:
        raise TypeError(abilities.capabilities_problem)
    return dict(abilities.capabilities)
