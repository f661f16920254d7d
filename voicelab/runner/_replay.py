"""Replaying a run: the same user audio, trial by trial, sent again to a product.

``replay(RUN_DIR)`` runs a new run whose persona is the :class:`~voicelab.personas._replay.
ReplayPersona`: in trial N it says what the user said in ``RUN_DIR/trial-NNN``, sample for
sample, with the runner's own turn taking (a turn starts when the simulated user hears the reply
end). The configuration is the one the original ran with: the bundle's ``resolved-*.json``
(``--set`` overrides apply to it as to a run's files; ``run_file`` loads a run file instead),
with what replay changes:

* ``persona_mode: replay`` (``persona_settings: {bundle: RUN_DIR}``) and the tone speech
  provider, which is never called (every turn's audio is given);
* the environment loses its ``to_product`` line (the recorded audio came through it); its
  sounds are never mixed into a replayed turn (they are in it already) but still fill a live
  line between utterances, as in a run; when their files are gone (a bundle from elsewhere)
  they are dropped, with a warning, and that line carries silence;
* the script is the one the replayed run followed (its first trial's ``resolved-script.json``
  under a scripted persona, or a replay of one), its turns without their ``audio_path`` (the
  recording replaces it), and ``script_turns_said`` judges the replay by it (a replayed turn
  carries the script index it had); a replayed run whose persona followed no script (an LLM
  persona, ingested calls) leaves the replay without one, whatever the run file says.

The new run has the same trial numbers and seeds (so ``compare ORIGINAL REPLAY`` pairs it trial
by trial), is scored by the same verdicts, and its report says ``replay_of``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import RunPlan, validate_run
from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    ReplayOrigin,
    RunReport,
    check_tree,
    read_json,
    resolved_document,
    trial_folder,
)
from ..config import (
    MASK,
    RECORDED_KINDS,
    LoadedRun,
    Override,
    ScriptConfig,
    format_key_path,
    load_recorded_run,
    load_run,
    parse_settings,
)
from ..endpoints import ENDPOINTS
from ..errors import ConfigError
from ..personas import REPLAY_MODE, SCRIPTED_MODE, read_recorded_trial
from ..scoring import PROBES
from ._run import trial_seed

logger = logging.getLogger(__name__)

_TRIAL = re.compile(r"^trial-(\d{3,})$")


@dataclass(frozen=True)
class ReplaySource:
    """The run folder being replayed: its report and its trials' numbers and seeds."""

    run_dir: Path
    report: RunReport
    seeds: dict[int, int]

    @property
    def origin(self) -> ReplayOrigin:
        return ReplayOrigin(run_id=self.report.run_id, bundle_path=str(self.run_dir))


def read_source(run_dir: str | Path) -> ReplaySource:
    """Check that ``run_dir`` is a run folder whose every trial can be replayed (the files a
    replay needs are there and consistent); raise :class:`ConfigError` naming the file."""
    folder = Path(run_dir).expanduser()
    if not folder.is_dir():
        raise ConfigError("no such run folder", source=folder)
    folder = folder.resolve()
    check_tree(folder)  # regular files and folders only, before anything is read
    if (folder / MATRIX_REPORT).is_file():
        raise ConfigError("a sweep folder: replay it with replay_sweep (voice-evaluator replay "
                          "does), or replay one cell's run folder", source=folder)
    report_path = folder / RUN_REPORT
    if not report_path.is_file():
        raise ConfigError("not a run folder (no run-report.json)", source=folder)
    report: RunReport = parse_settings(RunReport, read_json(report_path), key=None,
                                       source=report_path)
    indices = sorted(int(match[1]) for path in folder.iterdir()
                     if (match := _TRIAL.match(path.name)) and path.is_dir())
    if not indices:
        raise ConfigError("the run folder has no trial folders (trial-NNN) to replay",
                          source=folder)
    if indices != list(range(1, len(indices) + 1)):
        missing = sorted(set(range(1, indices[-1] + 1)) - set(indices))
        raise ConfigError(f"trial {missing[0]} is missing: replay needs the trials 1 to "
                          f"{indices[-1]}", source=folder / trial_folder(missing[0]))
    seeds = {}
    for index in indices:
        recorded = read_recorded_trial(folder / trial_folder(index))
        seeds[index] = recorded.seed
    return ReplaySource(folder, report, seeds)


def _recorded_documents(trial_dir: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    documents: dict[str, Any] = {}
    sources: dict[str, Path] = {}
    for kind in RECORDED_KINDS:
        path = trial_dir / resolved_document(kind)
        sources[kind] = path
        if not path.is_file():
            if kind in ("settings", "scenario", "persona"):
                raise ConfigError("the trial folder has no resolved configuration to replay "
                                  "with (give a run file)", source=path)
            continue
        documents[kind] = read_json(path).get("resolved")
    return documents, sources


def without_executables(documents: dict[str, Any], overrides: Sequence[str | Override], *,
                        source: Path) -> dict[str, Any]:
    """The recorded documents without what would run code a bundle names: its product launch
    command (with its environment) is dropped, and a plug-in class path (an adapter or an
    outcome probe that is no built-in) is refused, unless ``overrides`` (the user's ``--set``)
    give them; a run file (``--run-file``) gives them all."""
    settings = documents.get("settings")
    if not isinstance(settings, dict):
        return documents
    given = [o if isinstance(o, Override) else Override.parse(o) for o in overrides]

    def overridden(*path: str) -> bool:
        return any(o.document == "run" and (o.path[:len(path)] == path
                                            or path[:len(o.path)] == o.path) for o in given)

    settings = dict(settings)
    endpoint = settings.get("endpoint")
    if isinstance(endpoint, dict):
        endpoint = settings["endpoint"] = dict(endpoint)
        if endpoint.pop("launch", None) is not None and not overridden("endpoint", "launch"):
            raise ConfigError(
                "the run launched its product with a command, and replay never runs a command "
                "a bundle names: give the launch (--set endpoint.launch={command: [...], "
                "ready_pattern: ...}), a run file (--run-file), or a running product "
                "(--set endpoint.launch=null --set endpoint.settings.uri=...)", source=source,
                key="endpoint.launch")
        adapter = endpoint.get("adapter")
        if isinstance(adapter, str) and not ENDPOINTS.is_builtin(adapter) \
                and not overridden("endpoint", "adapter"):
            raise ConfigError(f"the adapter {adapter!r} is a class path, and replay never "
                              f"imports code a bundle names: give it (--set endpoint.adapter="
                              f"...) or a run file (--run-file)", source=source,
                              key="endpoint.adapter")
    probe = settings.get("outcome_probe")
    name = probe.get("probe") if isinstance(probe, dict) else None
    if isinstance(name, str) and not PROBES.is_builtin(name) \
            and not overridden("outcome_probe", "probe"):
        raise ConfigError(f"the outcome probe {name!r} is a class path, and replay never imports "
                          f"code a bundle names: give it (--set outcome_probe.probe=...) or a "
                          f"run file (--run-file)", source=source, key="outcome_probe.probe")
    return {**documents, "settings": settings}


def _masked(node: Any, location: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The key path of the first masked secret under ``node``, if any."""
    if isinstance(node, str):
        return location if MASK in node else None
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, value in items:
        found = _masked(value, (*location, key))
        if found is not None:
            return found
    return None


def _check_unmasked(loaded: LoadedRun) -> None:
    """What reaches the product (and the judges, when they run) must not be a masked secret."""
    run = loaded.run.model_dump(mode="json")
    checked: list[tuple[str, Any, Any]] = [
        ("run", ("endpoint",), run.get("endpoint")),
        ("run", ("outcome_probe",), run.get("outcome_probe")),
        ("data", (), loaded.data)]
    if loaded.run.quality_evaluation is not None:
        checked.append(("run", ("providers",), run.get("providers")))
    for kind, prefix, node in checked:
        found = _masked(node, prefix) if node is not None else None
        if found is not None:
            key = format_key_path(found)
            document = "" if kind == "run" else f"{kind}."
            raise ConfigError(f"the bundle keeps this secret masked: give it with --set "
                              f"{document}{key}=${{VAR}} (or a run file)",
                              source=loaded.sources.get(kind, loaded.run_path), key=key)


def replay_config(loaded: LoadedRun, source: ReplaySource) -> LoadedRun:
    """``loaded`` as a replay of ``source`` runs it (see the module docstring)."""
    run = loaded.run.model_copy(update={
        "persona_mode": REPLAY_MODE, "persona_settings": {"bundle": str(source.run_dir)},
        "speech_provider": "tone", "speech_settings": {}})
    environment = loaded.environment
    channel = environment.channel
    if channel is not None:
        environment = environment.model_copy(update={
            "channel": channel.model_copy(update={"to_product": None})})
    missing = [(key, path) for key, path in environment.asset_paths() if not path.is_file()]
    if missing:
        key, path = missing[0]
        logger.warning("the environment's %s (%s) is not found: the replay's live line carries "
                       "silence between utterances (replayed turns keep their recorded noise)",
                       key, path)
        environment = environment.model_copy(update={
            "base_noise": None, "background_voices": None, "transient_events": []})
    script = _replayed_script(source)
    if script is not None:
        script = script.model_copy(update={"turns": [
            turn.model_copy(update={"audio_path": None}) for turn in script.turns]})
    return dataclasses.replace(loaded, run=run, environment=environment, script=script)


def _replayed_script(source: ReplaySource) -> ScriptConfig | None:
    """The script the replayed run's persona followed (its first trial's), or None."""
    first = source.run_dir / trial_folder(1)
    path = first / resolved_document("script")
    settings_path = first / resolved_document("settings")
    if not path.is_file() or not settings_path.is_file():
        return None
    settings = read_json(settings_path).get("resolved")
    mode = settings.get("persona_mode") if isinstance(settings, dict) else None
    script = read_json(path).get("resolved")
    if mode not in (SCRIPTED_MODE, REPLAY_MODE) or script is None:
        return None
    return parse_settings(ScriptConfig, script, key=None, source=path)


def plan_replay(run_dir: str | Path, *, overrides: Sequence[str] = (),
                run_file: str | Path | None = None) -> tuple[RunPlan, ReplaySource]:
    """The validated plan of a replay of ``run_dir`` (:class:`ConfigError` before anything
    runs: a folder that is not a run, a trial without its audio, a masked secret...)."""
    source = read_source(run_dir)
    production = source.report.source == "production"
    if run_file is not None:
        loaded = load_run(run_file, overrides=overrides)
    elif production and not any(Override.parse(o).path[:2] == ("endpoint", "adapter")
                                for o in map(str, overrides)):
        raise ConfigError("recorded calls (voice-evaluator ingest) name no product to replay "
                          "their callers to: give the product's run file (--run-file RUN.yaml) "
                          "or its adapter (--set endpoint.adapter=...)",
                          source=source.run_dir / RUN_REPORT)
    else:
        first = source.run_dir / trial_folder(1)
        documents, sources = _recorded_documents(first)
        documents = without_executables(documents, overrides, source=sources["settings"])
        recorded_run = source.report.run_file
        loaded = load_recorded_run(documents, sources=sources, overrides=overrides,
                                   run_path=Path(recorded_run) if recorded_run
                                   else sources["settings"])
        _check_unmasked(loaded)
    if production:
        # a recorded call's number is its seed (the caller's audio is fixed), and the replay
        # tests the same calls: compare pairs it with them
        loaded = dataclasses.replace(
            loaded, run=loaded.run.model_copy(update={"trial_seed": 1}),
            scenario=loaded.scenario.model_copy(update={"id": source.report.scenario_id}))
    for index, seed in source.seeds.items():
        expected = trial_seed(loaded.run.trial_seed, index)
        if expected != seed:
            raise ConfigError(f"trial {index} ran with seed {seed}, this configuration gives it "
                              f"{expected}: a replay keeps the original seeds",
                              source=loaded.sources.get("run", loaded.run_path), key="trial_seed")
    return validate_run(replay_config(loaded, source)), source
