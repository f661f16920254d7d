"""`voice-evaluator validate`: everything a run needs, checked without any network connection."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from .config import LoadedRun
from .errors import AudioFileError, ConfigError


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

    def lines(self) -> list[str]:
        enabled = [name for name, on in self.capabilities.items() if on]
        return [
            f"run        {self.run_path}",
            f"scenario   {self.scenario_id}",
            f"persona    {self.persona} ({self.persona_mode}, speech: {self.speech_provider})",
            f"endpoint   {self.adapter} [{', '.join(enabled) or 'no capabilities'}]",
            f"environment {self.environment} ({len(self.assets)} audio asset(s) decoded)",
            f"probe      {self.outcome_probe or 'none'}",
            f"judges     {', '.join(self.judges) or 'none'}",
            f"suite hash {self.suite_hash}",
        ]


def _check_class_methods(target: Any, methods: tuple[str, ...], *, what: str, name: str,
                         source: str, key: str) -> None:
    missing = [m for m in methods if not callable(getattr(target, m, None))]
    if missing:
        raise ConfigError(f"{name!r} is not a valid {what}: missing {', '.join(missing)}",
                          source=source, key=key)


def _call_check(target: Any, *args: Any, source: str, key: str) -> None:
    check = getattr(target, "check", None) or getattr(target, "check_settings", None)
    if check is None:
        return
    try:
        check(*args)
    except ConfigError as error:
        if error.source is None:
            raise ConfigError(error.message, source=source, key=error.key or key) from None
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), source=source, key=key) from None


def validate_run(loaded: LoadedRun) -> ValidationSummary:
    """Resolve and check every part of ``loaded``; raise ConfigError on the first problem."""
    from .audio import prepare_environment, read_audio
    from .endpoints import check_capabilities, declared_capabilities, load_endpoint_class
    from .personas import PERSONAS
    from .scoring._probe_loader import load_probe_class
    from .speech import SPEECH_PROVIDERS, SpeechContext

    run_file = str(loaded.run_path)
    search_dirs = [loaded.base_dir]

    assets: list[str] = []
    if loaded.run.environment_path is not None:
        prepare_environment(loaded.environment, source=loaded.sources["environment"])
        assets.extend(str(path) for _, path in loaded.environment.asset_paths())
    if loaded.script is not None:
        for index, turn in enumerate(loaded.script.turns):
            if turn.audio_path is not None:
                try:
                    read_audio(turn.audio_path)
                except AudioFileError as error:
                    raise AudioFileError(f"{error.message} ({turn.audio_path})",
                                         source=loaded.sources["script"],
                                         key=f"turns[{index}].audio_path") from None
                assets.append(str(turn.audio_path))

    adapter_name = loaded.run.endpoint.adapter
    adapter = load_endpoint_class(adapter_name, search_dirs=search_dirs, source=run_file)
    check_settings = getattr(adapter, "check_settings", None)
    if check_settings is not None:
        try:
            check_settings(loaded.run.endpoint.settings)
        except ConfigError as error:
            raise ConfigError(error.message, source=run_file,
                              key=error.key or "endpoint.settings") from None
        except (ValueError, TypeError) as error:
            raise ConfigError(str(error), source=run_file, key="endpoint.settings") from None
    check_capabilities(adapter, loaded.scenario.conversation.required_capabilities,
                       adapter_name=adapter_name, source=str(loaded.sources["scenario"]))
    speaks_first = getattr(adapter, "product_can_speak_first", None)
    if loaded.scenario.conversation.first_speaker == "product" and callable(speaks_first) \
            and not speaks_first(loaded.run.endpoint.settings):
        raise ConfigError(f"the product speaks first, but adapter {adapter_name!r} cannot give "
                          f"it the first turn with these settings (see its opening option, "
                          f"e.g. endpoint.settings.opening_request: true for http)",
                          source=str(loaded.sources["scenario"]), key="conversation.first_speaker")

    persona_cls = PERSONAS.resolve(loaded.run.persona_mode, search_dirs=search_dirs,
                                   source=run_file, key="persona_mode")
    _check_class_methods(persona_cls, ("opening", "reply", "barge_in"), what="persona",
                         name=loaded.run.persona_mode, source=run_file, key="persona_mode")
    from .runner._context import persona_context

    _call_check(persona_cls, loaded.run.persona_settings, persona_context(loaded, trial_index=1,
                                                                           seed=loaded.run.trial_seed),
                source=run_file, key="persona_settings")

    speech_cls = SPEECH_PROVIDERS.resolve(loaded.run.speech_provider, search_dirs=search_dirs,
                                          source=run_file, key="speech_provider")
    _check_class_methods(speech_cls, ("synthesize",), what="speech provider",
                         name=loaded.run.speech_provider, source=run_file, key="speech_provider")
    speech_context = SpeechContext(providers=loaded.run.providers, scrubber=loaded.scrubber,
                                   base_dir=loaded.base_dir)
    _call_check(speech_cls, loaded.run.speech_settings, speech_context, source=run_file,
                key="speech_settings")

    probe_name = None
    if loaded.run.outcome_probe is not None:
        probe_cls = load_probe_class(loaded.run.outcome_probe.probe, search_dirs=search_dirs,
                                     source=run_file)
        probe_name = loaded.run.outcome_probe.probe
        _call_check(probe_cls, loaded.run.outcome_probe.settings, source=run_file,
                    key="outcome_probe.settings")
    elif callable(getattr(adapter, "outcome_probe", None)):
        probe_name = f"{adapter_name} (built-in)"

    if loaded.run.speech_metrics:
        import importlib.util

        from .errors import MissingDependencyError

        for module, package in (("jiwer", "jiwer"), ("pocketsphinx", "pocketsphinx"),
                                ("speechmos", "speechmos"), ("pystoi", "pystoi"),
                                ("pesq", "pesq"), ("onnxruntime", "onnxruntime")):
            if importlib.util.find_spec(module) is None:
                raise MissingDependencyError(package, extra="speech", purpose="speech_metrics",
                                             source=run_file, key="speech_metrics")

    judges: list[str] = []
    if loaded.run.quality_evaluation is not None:
        from .scoring import check_quality_evaluation

        judges = check_quality_evaluation(loaded)

    return ValidationSummary(
        run_path=run_file,
        scenario_id=loaded.scenario.id,
        persona=loaded.persona.name,
        persona_mode=loaded.run.persona_mode,
        speech_provider=loaded.run.speech_provider,
        adapter=adapter_name if inspect.isclass(adapter) else str(adapter),
        capabilities=declared_capabilities(adapter),
        environment=(loaded.environment.name or (loaded.run.environment_path.name
                     if loaded.run.environment_path else "quiet")),
        assets=assets,
        outcome_probe=probe_name,
        suite_hash=loaded.suite_hash(),
        judges=judges,
    )
