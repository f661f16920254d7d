"""What ``voice-evaluator validate`` prints of a validated run (:class:`ValidationSummary`), and
the warnings ``run`` repeats: what this run cannot judge as configured, and how to fix it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .config import OLD_TURN_TAKING, TURN_TAKING, GateConfig, LoadedRun, RetentionConfig


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


@dataclass(frozen=True)
class AdapterFacts:
    """What the summary says of the run's adapter, as validation resolved it."""

    name: str
    capabilities: Mapping[str, bool]
    turn_taking: str


def run_summary(loaded: LoadedRun, adapter: AdapterFacts, run_file: str, *, assets: list[str],
                probe_name: str | None, judges: list[str]) -> ValidationSummary:
    """The summary of a validated run, with its warnings."""
    from .metrics import entity_warnings

    capabilities = dict(adapter.capabilities)
    transcription, warnings = product_words(loaded, adapter.name, capabilities, run_file)
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


def product_words(loaded: LoadedRun, adapter_name: str, capabilities: Mapping[str, bool],
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
