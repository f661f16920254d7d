"""Validation: everything a run needs, resolved and checked once, without any network connection.

:func:`validate_run` returns a :class:`RunPlan`: the adapter, persona and speech classes, the
adapter's settings parsed into its settings model, the probe factory, the decoded environment
and script audio. ``voice-evaluator validate`` prints its summary; ``arun`` consumes it, so
nothing is resolved, decoded or parsed twice.

The adapter is resolved here; the other plug-ins in :mod:`._plugin_checks`, the rest of the run
in :mod:`._plan_checks`, and what ``validate`` prints in :mod:`._run_summary`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._plan_checks import check_channel, check_line_only, checked_scoring, script_audio
from ._plugin_checks import plugin_errors, resolved_persona, resolved_probe, resolved_speech
from ._run_summary import AdapterFacts, ValidationSummary, run_summary
from .audio import PcmAudio, PreparedEnvironment
from .config import OLD_TURN_TAKING, TURN_TAKING, LoadedRun
from .errors import ConfigError

if TYPE_CHECKING:
    from .endpoints import AdapterAbilities, EndpointSettings
    from .scoring import OutcomeProbe

@dataclass(frozen=True)
class RunPlan:
    """A validated run, resolved once: what ``arun`` needs besides the trial count."""

    loaded: LoadedRun
    adapter_cls: type
    persona_cls: type
    speech_cls: type
    probe_factory: Callable[[], OutcomeProbe] | None
    environment: PreparedEnvironment
    script_audio: Mapping[int, PcmAudio]
    summary: ValidationSummary
    #: ``client`` or ``server_vad`` (the adapter's ``turn_taking(settings)``)
    turn_taking: str = "client"
    #: ``endpoint.settings`` parsed once into the adapter's settings model (the mapping for an
    #: adapter without one): what its hooks were asked with and what it is built with. A
    #: launched product's ``{port}`` is filled with a stand-in here; the adapter of a launched
    #: product is built with the settings the launch filled.
    endpoint_settings: EndpointSettings = field(default_factory=dict)

    @property
    def abilities(self) -> AdapterAbilities:
        """What the adapter can do beyond the protocol (resolved once per class)."""
        from .endpoints import abilities_of

        return abilities_of(self.adapter_cls)


def validate_run(loaded: LoadedRun) -> RunPlan:
    """Resolve and check every part of ``loaded``; raise ConfigError on the first problem."""
    from .audio import prepare_environment

    run_file = str(loaded.run_path)
    environment = prepare_environment(loaded.environment, source=loaded.sources.get("environment"))
    check_channel(loaded)
    assets = [str(path) for _, path in loaded.environment.asset_paths()]
    decoded = script_audio(loaded)
    assets.extend(str(loaded.script.turns[i].audio_path) for i in decoded
                  if loaded.script is not None)

    adapter = _resolved_adapter(loaded, run_file)
    _check_adapter_fits(loaded, adapter, run_file)
    persona_cls = resolved_persona(loaded, decoded, run_file)
    speech_cls = resolved_speech(loaded, decoded, run_file)
    probe_name, probe_factory = resolved_probe(
        loaded, adapter_name=adapter.name, adapter_has_probe=adapter.abilities.has_outcome_probe,
        run_file=run_file)
    judges = checked_scoring(loaded, run_file)
    summary = run_summary(loaded, AdapterFacts(adapter.name, adapter.abilities.capabilities,
                                               adapter.turn_taking),
                          run_file, assets=assets, probe_name=probe_name, judges=judges)
    return RunPlan(loaded=loaded, adapter_cls=adapter.abilities.adapter_cls,
                   persona_cls=persona_cls, speech_cls=speech_cls, probe_factory=probe_factory,
                   environment=environment, script_audio=decoded, summary=summary,
                   turn_taking=adapter.turn_taking, endpoint_settings=adapter.settings)


@dataclass(frozen=True)
class _Adapter:
    """The run's adapter as validation resolved it."""

    name: str
    abilities: AdapterAbilities
    #: the endpoint settings, parsed (a launched product's placeholders filled)
    settings: EndpointSettings
    turn_taking: str


def _resolved_adapter(loaded: LoadedRun, run_file: str) -> _Adapter:
    """The adapter class, its settings parsed once and checked, its turn taking decided."""
    from .endpoints import abilities_of, check_launch, fill_placeholders, load_endpoint_class

    adapter_name = loaded.run.endpoint.adapter
    abilities = abilities_of(load_endpoint_class(adapter_name, search_dirs=[loaded.base_dir],
                                                 source=run_file))
    settings: Mapping[str, object] = loaded.run.endpoint.settings
    launch = loaded.run.endpoint.launch
    if launch is not None:
        try:
            check_launch(launch, settings)
        except ConfigError as error:
            raise ConfigError(error.message, source=run_file, key=error.key) from None
        settings = fill_placeholders(settings, 1)  # the port is chosen at launch
    with _endpoint_errors(loaded, run_file):
        parsed = abilities.parse_settings(settings)  # the one parse of endpoint.settings
        abilities.check_settings(parsed)
    with _endpoint_errors(loaded, run_file, key="endpoint.settings"):
        turn_taking = abilities.turn_taking(parsed)
    if turn_taking == "server_vad" and not loaded.run.pace_audio:
        raise ConfigError(f"{_turn_taking_as_written(loaded)} server_vad streams a live line "
                          "in real time (the product listens): set pace_audio: true",
                          source=run_file, key="pace_audio")
    if turn_taking != "server_vad":
        check_line_only(loaded, run_file)
    return _Adapter(adapter_name, abilities, parsed, turn_taking)


def _turn_taking_as_written(loaded: LoadedRun) -> str:
    """The turn-taking setting's name as the run config spells it (errors name what the user
    wrote; ``validate`` warns about the older spelling)."""
    return OLD_TURN_TAKING if loaded.run.endpoint.old_turn_taking else TURN_TAKING


@contextmanager
def _endpoint_errors(loaded: LoadedRun, run_file: str, *, key: str = "endpoint.settings"
                     ) -> Iterator[None]:
    """The adapter's settings errors naming the run file; one about the turn-taking setting
    names it as the run config spelled it."""
    try:
        with plugin_errors(source=run_file, key=key):
            yield
    except ConfigError as error:
        if error.key != f"endpoint.settings.{TURN_TAKING}":
            raise
        raise ConfigError(error.message, source=error.source,
                          key=f"endpoint.settings.{_turn_taking_as_written(loaded)}") from None


def _check_adapter_fits(loaded: LoadedRun, adapter: _Adapter, run_file: str) -> None:
    """The script and scenario ask nothing of the adapter it cannot do: keys pressed, the
    capabilities required, the product's opening."""
    from .endpoints import check_capabilities
    from .metrics import check_entities

    abilities = adapter.abilities
    pressed = [i for i, turn in enumerate(loaded.script.turns) if turn.dtmf] \
        if loaded.script is not None else []
    if pressed and not abilities.sends_dtmf:
        raise ConfigError(f"adapter {adapter.name!r} cannot press keys (it has no send_dtmf; "
                          f"twilio has)", source=str(loaded.sources.get("script") or run_file),
                          key=f"turns[{pressed[0]}].dtmf")
    scenario_file = str(loaded.sources["scenario"])
    check_capabilities(abilities.adapter_cls, loaded.scenario.conversation.required_capabilities,
                       adapter_name=adapter.name, source=scenario_file)
    check_entities(loaded.scenario, source=scenario_file)
    if loaded.scenario.conversation.first_speaker != "product":
        return
    with _endpoint_errors(loaded, run_file):
        can_open = abilities.product_can_speak_first(adapter.settings)
    if not can_open:
        raise ConfigError(f"the product speaks first, but adapter {adapter.name!r} cannot give "
                          f"it the first turn with these settings (see its opening option, "
                          f"e.g. endpoint.settings.opening_request: true for http)",
                          source=scenario_file, key="conversation.first_speaker")
