"""Every plug-in kind's settings checked at ``validate``, and the persona, speech provider and
outcome probe resolved: their classes, their settings, whether the script fits in time.

Optional hooks (:class:`ChecksSettings`) are classmethods named ``check_settings`` on every
plug-in kind (adapters: ``check_settings(settings)``, see :mod:`voicelab.endpoints`; personas
and speech providers: ``check_settings(settings, context)``; probes: ``check_settings(settings)``).
They raise :class:`~voicelab.errors.ConfigError` (or ``ValueError``/``TypeError``) for bad
settings. An outcome probe may instead (or also) declare its settings' pydantic model as
``settings_model``; a probe that declares neither is built once here, so a typo in its settings is
exit 2 now, not a failed outcome verdict in every trial (see :mod:`voicelab.scoring`
``OutcomeProbe``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from .audio import PcmAudio
from .config import LoadedRun, parse_settings
from .errors import ConfigError

if TYPE_CHECKING:
    from .scoring import OutcomeProbe
    from .speech import SpeechContext


@runtime_checkable
class ChecksSettings(Protocol):
    """Every plug-in kind's optional settings check (a classmethod ``check_settings``); its
    arguments differ by kind (adapters and probes: ``settings``; personas and speech providers:
    ``settings, context``)."""

    def check_settings(self, *args: object) -> None: ...


@runtime_checkable
class ProbeSettingsModel(Protocol):
    """An outcome probe's optional settings model (a pydantic model, class attribute)."""

    settings_model: object


def check_class_methods(target: object, methods: tuple[str, ...], *, what: str, name: str,
                        source: str, key: str) -> None:
    """``target`` has ``methods`` (a plug-in of kind ``what``), else a ConfigError at ``key``."""
    from .endpoints import missing_methods

    missing = missing_methods(target, methods)
    if missing:
        raise ConfigError(f"{name!r} is not a valid {what}: missing {', '.join(missing)}",
                          source=source, key=key)


@contextmanager
def plugin_errors(*, source: str, key: str) -> Iterator[None]:
    """A plug-in's own errors (a ConfigError without a file, a ``ValueError``/``TypeError``)
    as a ConfigError naming ``source`` and ``key`` (or the key the plug-in gave)."""
    try:
        yield
    except ConfigError as error:
        if error.source is None:
            raise ConfigError(error.message, source=source, key=error.key or key) from None
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), source=source, key=key) from None


def call_check(target: object, *args: object, source: str, key: str) -> None:
    """Run ``target.check_settings(*args)`` when the plug-in has it; its errors name ``source``
    and ``key`` (or the key the plug-in gave)."""
    if not isinstance(target, ChecksSettings):
        return
    with plugin_errors(source=source, key=key):
        target.check_settings(*args)


def check_probe_settings(probe_cls: Callable[[Mapping[str, object]], object],
                         settings: Mapping[str, object], *, source: str,
                         key: str = "outcome_probe.settings") -> None:
    """The outcome probe's settings, checked by the probe's own model before any call.

    The probe is built per trial, after the conversation: a settings typo found only then failed
    every trial's outcome verdicts (exit 3), as if the product had not persisted anything. So the
    declared ``settings_model`` (a pydantic model; ``extra="forbid"`` makes a typo an unknown
    setting) and ``check_settings`` run now; a probe declaring neither is built once (its
    constructor does no I/O, as an adapter's: :mod:`voicelab.scoring` ``OutcomeProbe``).
    """
    model = probe_cls.settings_model if isinstance(probe_cls, ProbeSettingsModel) else None
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


def resolved_persona(loaded: LoadedRun, script_audio: Mapping[int, PcmAudio],
                     run_file: str) -> type:
    """The persona class, its methods and settings checked."""
    from .personas import PERSONAS, PersonaContext

    persona_cls: type = PERSONAS.resolve(loaded.run.persona_mode, search_dirs=[loaded.base_dir],
                                         source=run_file, key="persona_mode")
    check_class_methods(persona_cls, ("opening", "reply", "barge_in"), what="persona",
                         name=loaded.run.persona_mode, source=run_file, key="persona_mode")
    call_check(persona_cls, loaded.run.persona_settings,
               PersonaContext.for_trial(loaded, trial_index=1, seed=loaded.run.trial_seed,
                                        script_audio=script_audio),
               source=run_file, key="persona_settings")
    return persona_cls


def resolved_speech(loaded: LoadedRun, script_audio: Mapping[int, PcmAudio],
                    run_file: str) -> type:
    """The speech provider, its settings checked, able to speak the persona's voice and
    language and every script turn in time."""
    from .speech import SPEECH_PROVIDERS, SpeechContext, voice_problem

    speech_cls: type = SPEECH_PROVIDERS.resolve(loaded.run.speech_provider,
                                                search_dirs=[loaded.base_dir], source=run_file,
                                                key="speech_provider")
    check_class_methods(speech_cls, ("synthesize",), what="speech provider",
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
    check_script_time(loaded, speech_cls, speech_context, script_audio, run_file)
    return speech_cls


def resolved_probe(loaded: LoadedRun, *, adapter_name: str, adapter_has_probe: bool,
                   run_file: str) -> tuple[str | None, Callable[[], OutcomeProbe] | None]:
    """The outcome probe's name for the summary and its factory (None: the adapter's own
    probe, or none)."""
    from .scoring import load_probe_class

    configured = loaded.run.outcome_probe
    if configured is None:
        own = f"{adapter_name} (built-in)" if adapter_has_probe else None
        return own, None
    probe_cls = load_probe_class(configured.probe, search_dirs=[loaded.base_dir],
                                 source=run_file)
    probe_settings = configured.settings
    check_probe_settings(probe_cls, probe_settings, source=run_file)

    def probe_factory() -> OutcomeProbe:
        return probe_cls(probe_settings)
    return configured.probe, probe_factory


def check_script_time(loaded: LoadedRun, speech_cls: type, speech_context: SpeechContext,
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
