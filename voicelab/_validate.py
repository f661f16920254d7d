"""Validation: everything a run needs, resolved and checked once, without any network connection.

:func:`validate_run` returns a :class:`RunPlan`: the adapter, persona and speech classes, the
probe factory, the decoded environment and script audio. ``voice-evaluator validate`` prints its
summary; ``arun`` consumes it, so nothing is resolved or decoded twice.

Optional hooks (:class:`ChecksSettings`) are classmethods named ``check_settings`` on every plug-in kind (adapters:
``check_settings(settings)``; personas and speech providers: ``check_settings(settings,
context)``; probes: ``check_settings(settings)``). They raise
:class:`~voicelab.errors.ConfigError` (or ``ValueError``/``TypeError``) for bad settings. An
outcome probe may instead (or also) declare its settings' pydantic model as ``settings_model``;
a probe that declares neither is built once here, so a typo in its settings is exit 2 now, not
a failed outcome verdict in every trial (see :mod:`voicelab.scoring` ``OutcomeProbe``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from .audio import PcmAudio, PreparedEnvironment
from .config import (
    OLD_TURN_TAKING,
    TURN_TAKING,
    GateConfig,
    LoadedRun,
    RetentionConfig,
    parse_settings,
    with_old_spelling,
)
from .errors import AudioFileError, ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from .endpoints import AdapterAbilities
    from .scoring import OutcomeProbe
    from .speech import SpeechContext

@runtime_checkable
class ChecksSettings(Protocol):
    """Every plug-in kind's optional settings check (a classmethod ``check_settings``); its
    arguments differ by kind (adapters and probes: ``settings``; personas and speech providers:
    ``settings, context``)."""

    def check_settings(self, *args: object) -> None: ...


@runtime_checkable
class DeclaresSettingsModel(Protocol):
    """An outcome probe's optional settings model (a pydantic model, class attribute)."""

    settings_model: object


@dataclass
class ValidationSummary:
    run_path: str
    scenario_id: str
    persona: str
    persona_mode: str
    speech_provider: str
    adapter: str
    capabilities: dict[str, bool]
    environment: str
    assets: list[str] = field(default_factory=list)
    outcome_probe: str | None = None
    suite_hash: str = ""
    judges: list[str] = field(default_factory=list)
    turn_taking: str = "client"
    launch: str | None = None
    statistics: str = ""
    gates: list[str] = field(default_factory=list)
    #: where the product's words come from (the run's ``transcription``)
    transcription: str = ""
    #: what the bundle keeps (the run's ``retention``)
    retention: str = "all audio, full transcripts"
    #: one line each: what this run cannot judge as configured, and how to fix it
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        enabled = [name for name, on in self.capabilities.items() if on]
        return [
            f"run        {self.run_path}",
            f"scenario   {self.scenario_id}",
            f"persona    {self.persona} ({self.persona_mode}, speech: {self.speech_provider})",
            f"endpoint   {self.adapter} [{', '.join(enabled) or 'no capabilities'}], turn "
            f"taking: {self.turn_taking}" + (f", launched per {self.launch}" if self.launch
                                              else ""),
            f"environment {self.environment} ({len(self.assets)} audio asset(s) decoded)",
            f"probe      {self.outcome_probe or 'none'}",
            f"judges     {', '.join(self.judges) or 'none'}",
            f"statistics {self.statistics}",
            f"gates      {'; '.join(self.gates) or 'none'}",
            f"transcript {self.transcription}",
            f"retention  {self.retention}",
            f"suite hash {self.suite_hash}",
            *(f"warning    {warning}" for warning in self.warnings),
        ]


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

    @property
    def abilities(self) -> AdapterAbilities:
        """What the adapter can do beyond the protocol (resolved once per class)."""
        from .endpoints import abilities_of

        return abilities_of(self.adapter_cls)


def _check_class_methods(target: object, methods: tuple[str, ...], *, what: str, name: str,
                         source: str, key: str) -> None:
    from .endpoints import missing_methods

    missing = missing_methods(target, methods)
    if missing:
        raise ConfigError(f"{name!r} is not a valid {what}: missing {', '.join(missing)}",
                          source=source, key=key)


def call_check(target: object, *args: object, source: str, key: str) -> None:
    """Run ``target.check_settings(*args)`` when the plug-in has it; its errors name ``source``
    and ``key`` (or the key the plug-in gave)."""
    if not isinstance(target, ChecksSettings):
        return
    try:
        target.check_settings(*args)
    except ConfigError as error:
        if error.source is None:
            raise ConfigError(error.message, source=source, key=error.key or key) from None
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), source=source, key=key) from None


def check_probe_settings(probe_cls: Callable[[Mapping[str, object]], object], settings: Mapping[str, object], *, source: str,
                         key: str = "outcome_probe.settings") -> None:
    """The outcome probe's settings, checked by the probe's own model before any call.

    The probe is built per trial, after the conversation: a settings typo found only then failed
    every trial's outcome verdicts (exit 3), as if the product had not persisted anything. So the
    declared ``settings_model`` (a pydantic model; ``extra="forbid"`` makes a typo an unknown
    setting) and ``check_settings`` run now; a probe declaring neither is built once (its
    constructor does no I/O, as an adapter's: :mod:`voicelab.scoring` ``OutcomeProbe``).
    """
    model = probe_cls.settings_model if isinstance(probe_cls, DeclaresSettingsModel) else None
    if model is not None:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError("the probe's settings_model is not a pydantic model", source=source,
                              key="outcome_probe.probe")
        parse_settings(model, settings, key=key, source=source)
    if isinstance(probe_cls, ChecksSettings):
        call_check(probe_cls, settings, source=source, key=key)
    elif model is None:
        try:
            probe_cls(settings)
        except ConfigError as error:
            raise ConfigError(error.message, source=source, key=error.key or key) from None
        except KeyError as error:
            raise ConfigError(f"missing setting {error.args[0]!r} (the probe could not be built)",
                              source=source, key=key) from None
        except (ValueError, TypeError, AttributeError) as error:
            raise ConfigError(f"the probe could not be built: {type(error).__name__}: {error}",
                              source=source, key=key) from None


def _script_audio(loaded: LoadedRun) -> dict[int, PcmAudio]:
    from .audio import read_audio

    decoded: dict[int, PcmAudio] = {}
    if loaded.script is None:
        return decoded
    for index, turn in enumerate(loaded.script.turns):
        if turn.audio_path is not None:
            try:
                decoded[index] = read_audio(turn.audio_path)
            except AudioFileError as error:
                raise AudioFileError(f"{error.message} ({turn.audio_path})",
                                     source=loaded.sources["script"],
                                     key=f"turns[{index}].audio_path") from None
    return decoded


def _check_channel(loaded: LoadedRun) -> None:
    """Each telephony line's codec can be built (opus needs its optional package)."""
    from .audio import build_codec
    from .errors import MissingDependencyError

    channel = loaded.environment.channel
    if channel is None:
        return
    for direction, line in (("to_product", channel.to_product), ("to_user", channel.to_user)):
        if line is None:
            continue
        try:
            build_codec(line)
        except MissingDependencyError as error:
            source = loaded.sources.get("environment") or loaded.run_path
            raise MissingDependencyError(error.package, extra=error.extra,
                                         purpose=f"channel.{direction}: the opus codec",
                                         source=str(source),
                                         key=f"channel.{direction}.codec") from None


def _describe_retention(retention: RetentionConfig) -> str:
    audio = {"all": "all audio", "failed": "audio of trials that did not pass only",
             "none": "no audio"}[retention.audio]
    return f"{audio}, {retention.transcripts} transcripts"


def _describe_gate(gate: GateConfig) -> str:
    if gate.min_lower_bound is not None:
        return f"{gate.metric} lower bound >= {gate.min_lower_bound:g}"
    if gate.max is not None:
        return f"{gate.metric} p{(gate.quantile or 0) * 100:g} upper bound <= {gate.max:g}"
    return f"{gate.metric} p{(gate.quantile or 0) * 100:g} lower bound >= {gate.min:g}"


def validate_run(loaded: LoadedRun) -> RunPlan:
    """Resolve and check every part of ``loaded``; raise ConfigError on the first problem."""
    from .audio import prepare_environment

    run_file = str(loaded.run_path)
    environment = prepare_environment(loaded.environment, source=loaded.sources.get("environment"))
    _check_channel(loaded)
    assets = [str(path) for _, path in loaded.environment.asset_paths()]
    script_audio = _script_audio(loaded)
    assets.extend(str(loaded.script.turns[i].audio_path) for i in script_audio
                  if loaded.script is not None)

    adapter = _resolved_adapter(loaded, run_file)
    _check_adapter_fits(loaded, adapter, run_file)
    persona_cls = _resolved_persona(loaded, script_audio, run_file)
    speech_cls = _resolved_speech(loaded, script_audio, run_file)
    probe_name, probe_factory = _resolved_probe(loaded, adapter, run_file)
    judges = _checked_scoring(loaded, run_file)
    summary = _summary(loaded, adapter, run_file, assets=assets, probe_name=probe_name,
                       judges=judges)
    return RunPlan(loaded=loaded, adapter_cls=adapter.abilities.adapter_cls,
                   persona_cls=persona_cls, speech_cls=speech_cls, probe_factory=probe_factory,
                   environment=environment, script_audio=script_audio, summary=summary,
                   turn_taking=adapter.turn_taking)


@dataclass(frozen=True)
class _Adapter:
    """The run's adapter as validation resolved it."""

    name: str
    abilities: AdapterAbilities
    #: the endpoint settings it was checked with (a launched product's placeholders filled)
    settings: Mapping[str, object]
    turn_taking: str


def _resolved_adapter(loaded: LoadedRun, run_file: str) -> _Adapter:
    """The adapter class, its settings checked and its turn taking decided."""
    from .endpoints import abilities_of, check_launch, fill_placeholders, load_endpoint_class

    adapter_name = loaded.run.endpoint.adapter
    abilities = abilities_of(load_endpoint_class(adapter_name, search_dirs=[loaded.base_dir],
                                                 source=run_file))
    settings = loaded.run.endpoint.settings
    launch = loaded.run.endpoint.launch
    if launch is not None:
        try:
            check_launch(launch, settings)
        except ConfigError as error:
            raise ConfigError(error.message, source=run_file, key=error.key) from None
        settings = fill_placeholders(settings, 1)  # the port is chosen at launch
    _check_endpoint_settings(loaded, abilities.adapter_cls, settings, run_file)
    try:
        # an adapter's turn_taking(settings) may still read the older spelling
        turn_taking = abilities.turn_taking(with_old_spelling(settings))
    except ConfigError as error:
        raise ConfigError(error.message, source=run_file, key="endpoint.settings") from None
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), source=run_file, key="endpoint.settings") from None
    if turn_taking == "server_vad" and not loaded.run.pace_audio:
        raise ConfigError(f"{_turn_taking_as_written(loaded)} server_vad streams a live line "
                          "in real time (the product listens): set pace_audio: true",
                          source=run_file, key="pace_audio")
    if turn_taking != "server_vad":
        _check_line_only(loaded, run_file)
    return _Adapter(adapter_name, abilities, settings, turn_taking)


def _turn_taking_as_written(loaded: LoadedRun) -> str:
    """The turn-taking setting's name as the run config spells it (errors name what the user
    wrote; ``validate`` warns about the older spelling)."""
    return OLD_TURN_TAKING if loaded.run.endpoint.old_turn_taking else TURN_TAKING


def _check_endpoint_settings(loaded: LoadedRun, adapter_cls: type, settings: Mapping[str, object],
                             run_file: str) -> None:
    """The adapter's own settings check; an error about the turn-taking setting names it as
    the run config spelled it."""
    try:
        call_check(adapter_cls, settings, source=run_file, key="endpoint.settings")
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
    if loaded.scenario.conversation.first_speaker == "product" \
            and not abilities.product_can_speak_first(adapter.settings):
        raise ConfigError(f"the product speaks first, but adapter {adapter.name!r} cannot give "
                          f"it the first turn with these settings (see its opening option, "
                          f"e.g. endpoint.settings.opening_request: true for http)",
                          source=scenario_file, key="conversation.first_speaker")


def _resolved_persona(loaded: LoadedRun, script_audio: Mapping[int, PcmAudio],
                      run_file: str) -> type:
    from .personas import PERSONAS, PersonaContext

    persona_cls: type = PERSONAS.resolve(loaded.run.persona_mode, search_dirs=[loaded.base_dir],
                                         source=run_file, key="persona_mode")
    _check_class_methods(persona_cls, ("opening", "reply", "barge_in"), what="persona",
                         name=loaded.run.persona_mode, source=run_file, key="persona_mode")
    call_check(persona_cls, loaded.run.persona_settings,
               PersonaContext.for_trial(loaded, trial_index=1, seed=loaded.run.trial_seed,
                                        script_audio=script_audio),
               source=run_file, key="persona_settings")
    return persona_cls


def _resolved_speech(loaded: LoadedRun, script_audio: Mapping[int, PcmAudio],
                     run_file: str) -> type:
    """The speech provider, its settings checked, able to speak the persona's voice and
    language and every script turn in time."""
    from .speech import SPEECH_PROVIDERS, SpeechContext, voice_problem

    speech_cls: type = SPEECH_PROVIDERS.resolve(loaded.run.speech_provider,
                                                search_dirs=[loaded.base_dir], source=run_file,
                                                key="speech_provider")
    _check_class_methods(speech_cls, ("synthesize",), what="speech provider",
                         name=loaded.run.speech_provider, source=run_file, key="speech_provider")
    speech_context = SpeechContext.for_run(loaded)
    call_check(speech_cls, loaded.run.speech_settings, speech_context, source=run_file,
               key="speech_settings")
    problem = voice_problem(speech_cls, loaded.run.speech_settings, speech_context,
                            provider_name=loaded.run.speech_provider)
    if problem is not None:  # the scenario's language, else the persona's language or voice
        named_by = "scenario" if problem.key == "language" and loaded.scenario.language \
            else "persona"
        raise ConfigError(problem.message, source=str(loaded.sources[named_by]), key=problem.key)
    _check_script_time(loaded, speech_cls, speech_context, script_audio, run_file)
    return speech_cls


def _resolved_probe(loaded: LoadedRun, adapter: _Adapter, run_file: str
                    ) -> tuple[str | None, Callable[[], OutcomeProbe] | None]:
    """The outcome probe's name for the summary and its factory (None: the adapter's own
    probe, or none)."""
    from .scoring import load_probe_class

    configured = loaded.run.outcome_probe
    if configured is None:
        own = f"{adapter.name} (built-in)" if adapter.abilities.has_outcome_probe else None
        return own, None
    probe_cls = load_probe_class(configured.probe, search_dirs=[loaded.base_dir],
                                 source=run_file)
    probe_settings = configured.settings
    check_probe_settings(probe_cls, probe_settings, source=run_file)

    def probe_factory() -> OutcomeProbe:
        return probe_cls(probe_settings)
    return configured.probe, probe_factory


def _checked_scoring(loaded: LoadedRun, run_file: str) -> list[str]:
    """The speech metrics' packages, the gates' metrics and the judges (their names)."""
    from .metrics import run_turn_metrics
    from .scoring import check_gate_metrics, check_quality_evaluation, verdict_checks

    if loaded.run.speech_metrics:
        for module, package in (("jiwer", "jiwer"), ("pocketsphinx", "pocketsphinx"),
                                ("speechmos", "speechmos"), ("pystoi", "pystoi"),
                                ("pesq", "pesq"), ("onnxruntime", "onnxruntime")):
            if importlib.util.find_spec(module) is None:
                raise MissingDependencyError(package, extra="speech", purpose="speech_metrics",
                                             source=run_file, key="speech_metrics")
    check_gate_metrics(loaded.run.gates, source=run_file)
    verdict_checks(loaded)  # the run file's own verdicts import, and are verdicts
    run_turn_metrics(loaded)  # and its own per-response metrics
    if loaded.run.quality_evaluation is None:
        return []
    return check_quality_evaluation(loaded)


def _summary(loaded: LoadedRun, adapter: _Adapter, run_file: str, *, assets: list[str],
             probe_name: str | None, judges: list[str]) -> ValidationSummary:
    from .metrics import entity_warnings

    capabilities = dict(adapter.abilities.capabilities)
    transcription, warnings = _product_words(loaded, adapter.name, capabilities, run_file)
    warnings += entity_warnings(loaded.scenario, loaded.run.transcription, adapter=adapter.name,
                                input_transcripts=bool(capabilities.get("input_transcripts")))
    if loaded.run.endpoint.old_turn_taking:
        warnings.append(f"{run_file}: endpoint.settings.{OLD_TURN_TAKING}: the older spelling "
                        f"of {TURN_TAKING}, read for now; write {TURN_TAKING}")
    launch = loaded.run.endpoint.launch
    return ValidationSummary(
        run_path=run_file,
        scenario_id=loaded.scenario.id,
        persona=loaded.persona.name,
        persona_mode=loaded.run.persona_mode,
        speech_provider=loaded.run.speech_provider,
        adapter=adapter.name,
        capabilities=capabilities,
        environment=(loaded.environment.name or (loaded.run.environment_path.name
                     if loaded.run.environment_path else "quiet")),
        assets=assets,
        outcome_probe=probe_name,
        suite_hash=loaded.suite_hash(),
        judges=judges,
        turn_taking=adapter.turn_taking,
        launch=launch.per if launch is not None else None,
        statistics=(f"{loaded.run.statistics.confidence:.0%} "
                    f"{loaded.run.statistics.interval} intervals"),
        gates=[_describe_gate(gate) for gate in loaded.run.gates],
        transcription=transcription,
        retention=_describe_retention(loaded.run.retention),
        warnings=warnings,
    )


def _product_words(loaded: LoadedRun, adapter_name: str, capabilities: Mapping[str, bool],
                   run_file: str) -> tuple[str, list[str]]:
    """Where the product's words will come from (the summary's line), and a warning when a
    configured text verdict or judge cannot be judged: the adapter says it sends no transcript
    and nothing will recognize its audio. ``asr`` without the recognizer is an error."""
    from .scoring import text_readers
    from .speech import ASR_SOURCE, recognizer_installed, recognizer_missing

    mode = loaded.run.transcription.product
    installed = recognizer_installed()
    if mode == "asr" and not installed:
        raise recognizer_missing(
            "transcription.product: asr (recognizing the product's audio)",
            source=run_file, key="transcription.product")
    readers = text_readers(loaded.scenario, loaded.persona,
                           judges=loaded.run.quality_evaluation is not None)
    if mode == "asr":
        described = f"the product's audio recognized ({ASR_SOURCE})"
    elif mode == "wire":
        described = "the product's transcripts from the wire only"
    elif not installed:
        described = "the product's transcripts from the wire (no recognizer installed)"
    else:
        described = (f"the product's transcripts from the wire, else its audio recognized "
                     f"({ASR_SOURCE})" + ("" if readers else
                                          " when a text verdict or judge reads them"))
    warnings = []
    if readers and not capabilities.get("output_transcripts") and mode != "asr" \
            and (mode == "wire" or not installed):
        fix = "pip install 'voicelab[speech]'" if not installed else ""
        if mode == "wire":
            fix = " and ".join(part for part in (fix, "set transcription.product: auto") if part)
        why = "transcription.product is wire" if mode == "wire" else "no recognizer is installed"
        warnings.append(f"{', '.join(readers)} cannot be judged: adapter {adapter_name!r} sends "
                        f"no transcript of the product's words and {why}; to recognize its "
                        f"audio: {fix}")
    return described, warnings


def _check_script_time(loaded: LoadedRun, speech_cls: type, speech_context: SpeechContext,
                       script_audio: Mapping[int, PcmAudio], run_file: str) -> None:
    """Every script turn fits in the trial's time limit: its recording, or its pauses plus the
    least its speech can last (the provider's ``shortest_speech_seconds``: exact for tone's
    bursts, else ``MIN_SECONDS_PER_WORD`` a word), so a legitimate turn is never refused. A turn
    past the limit would be cut there in every trial; it is refused before any."""
    from .config import MAX_TRIAL_SECONDS
    from .speech import shortest_speech_seconds

    script = loaded.script
    if script is None:
        return
    limits = loaded.scenario.eval_spec.limits
    limit = limits.time_limit_seconds
    allowed = (f"the scenario's max_time_seconds ({limit:,g} s)"
               if limits.max_time_seconds is not None else
               f"a trial may last ({MAX_TRIAL_SECONDS:,} s; the scenario sets no "
               f"max_time_seconds)")
    source = str(loaded.sources.get("script") or run_file)
    for index, turn in enumerate(script.turns):
        recorded = script_audio.get(index)
        if recorded is not None:
            if recorded.duration_seconds > limit:
                raise ConfigError(f"the turn's recording lasts {recorded.duration_seconds:,.1f} "
                                  f"s, longer than {allowed}", source=source,
                                  key=f"turns[{index}].audio_path")
            continue
        if not turn.response.strip():
            continue
        spoken = turn.spoken
        pauses = sum(spoken.pauses_seconds)
        speech = sum(shortest_speech_seconds(speech_cls, piece, speech_context)
                     for piece in spoken.pieces)
        if pauses + speech > limit:
            raise ConfigError(f"the turn lasts at least {pauses + speech:,.1f} s ({pauses:,.1f} s "
                              f"of pauses, {speech:,.1f} s of speech at the least), longer than "
                              f"{allowed}", source=source, key=f"turns[{index}].response")


def _check_line_only(loaded: LoadedRun, run_file: str) -> None:
    """Backchannels, noise probes and the echo need a live line (``server_vad``): in ``client``
    mode the user's audio is only sent as committed turns, so none of them can be played
    while the product speaks; say so instead of skipping them."""
    environment_file = str(loaded.sources.get("environment") or run_file)
    if loaded.environment.noise_probes:
        raise ConfigError("noise_probes play into the product's speech on a live line: they "
                          "need turn_taking server_vad", source=environment_file,
                          key="noise_probes")
    if loaded.environment.echo is not None:
        raise ConfigError("echo leaks the product's voice into a live line: it needs "
                          "turn_taking server_vad", source=environment_file, key="echo")
    script = loaded.script
    if script is not None:
        for index, turn in enumerate(script.turns):
            if turn.kind == "backchannel":
                raise ConfigError("a backchannel is said into the product's speech on a live "
                                  "line: it needs turn_taking server_vad",
                                  source=str(loaded.sources.get("script") or run_file),
                                  key=f"turns[{index}].kind")
            if turn.dtmf and turn.interrupt_after_seconds is not None:
                raise ConfigError("a key barge-in presses keys into the product's speech on a "
                                  "live line: it needs turn_taking server_vad",
                                  source=str(loaded.sources.get("script") or run_file),
                                  key=f"turns[{index}].interrupt_after_seconds")
