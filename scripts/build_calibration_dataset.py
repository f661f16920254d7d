"""Build the labeled judge-calibration dataset shipped under datasets/calibration/.

Real voicelab runs (the runner, the scripted persona, tone speech, the embedded fake product over
its real WebSocket protocol) against variants of the fake product that confirm the reminder in
different words, with or without really saving it (``claim_without_tool``). Two judges score
every trial through the real judge code path (``quality_evaluation`` in the run config), both
served by the local OpenAI-compatible server on 127.0.0.1 whose "model" is a rule engine:

* ``no_unsupported_commitments``: a custom binary judge (generic OpenAI-compatible provider);
* ``groundedness``: azure-ai-evaluation's GroundednessEvaluator (numeric, 1..5).

The labels are derived from the injected behaviour, never from a judge: a trial passes when the
product really saved the reminder (a ``save_reminder`` tool call), and fails otherwise. The
builder checks every trial's evidence against that before writing anything. Only small text
files are written (labels.csv, judges.csv, trials.csv, README.md); the bundles go to a temporary
directory unless ``--bundles-dir`` keeps them.

    python scripts/build_calibration_dataset.py                  # the shipped dataset
    python scripts/build_calibration_dataset.py --out /tmp/calibration --trials-per-variant 1 \\
        --holdout-honest-trials 0 --holdout-claim-trials 0       # a quick one
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
from _calibration_judge import (
    BINARY_JUDGE,
    CRITERIA,
    GROUNDEDNESS_THRESHOLD,
    NUMERIC_JUDGE,
    CalibrationJudgePolicy,
)
from _calibration_readme import write_readme
from _calibration_variants import ANNOTATOR, VARIANTS, Variant

import voicelab
from voicelab.analysis import load_frames
from voicelab.analysis.calibration import (
    JUDGE_RESULT_COLUMNS,
    validate_human_labels,
)
from voicelab.doubles.openai import OpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DEFAULT_OUT = ROOT / "datasets" / "calibration"

SEED_STRIDE = 1000  # variant i's trials use seeds (i + 1) * 1000 + k; holdout trials + 500


# --- running ----------------------------------------------------------------------------------

def run_config(variant: Variant, *, base_url: str, seed: int) -> dict[str, Any]:
    return {
        "scenario_path": str(EXAMPLES / "scenario-workload-neutral-voice.yaml"),
        "persona_path": str(EXAMPLES / "persona-workload-neutral-voice.yaml"),
        "data_path": str(EXAMPLES / "data-workload-neutral-voice.yaml"),
        "script_path": str(EXAMPLES / "script-workload-neutral-voice.yaml"),
        "persona_mode": "scripted", "speech_provider": "tone", "pace_audio": False,
        "trial_seed": seed,
        "endpoint": {"adapter": "fake", "settings": variant.settings},
        "providers": {"openai": {"base_url": base_url, "api_key": "local-no-auth",
                                 "model": "local-rule-engine"}},
        "quality_evaluation": {
            "timeout_seconds": 60,
            "custom_judges": [{"name": BINARY_JUDGE, "criteria": CRITERIA, "is_critical": True}],
            "azure_evaluators": [{"type": NUMERIC_JUDGE, "threshold": GROUNDEDNESS_THRESHOLD,
                                  "is_critical": False}]},
    }


@dataclass(frozen=True)
class PlannedRun:
    split: str  # "calibration" (labeled) or "holdout" (judged only)
    variant: Variant
    trials: int
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.split}-{self.variant.name}"


def plan_runs(variants: Sequence[Variant], *, trials_per_variant: int, holdout_honest: int,
              holdout_claim: int) -> list[PlannedRun]:
    planned = []
    for variant in variants:
        seed = (VARIANTS.index(variant) + 1) * SEED_STRIDE
        if trials_per_variant:
            planned.append(PlannedRun("calibration", variant, trials_per_variant, seed))
        holdout = holdout_honest if variant.saves_reminder else holdout_claim
        if holdout:
            planned.append(PlannedRun("holdout", variant, holdout, seed + SEED_STRIDE // 2))
    return planned


async def run_all(planned: Sequence[PlannedRun], *, bundles: Path, concurrency: int) -> None:
    with OpenAIServer(CalibrationJudgePolicy()) as server:
        configs = bundles / "configs"
        configs.mkdir(parents=True, exist_ok=True)
        for number, one in enumerate(planned, start=1):
            path = configs / f"{one.run_id}.yaml"  # JSON is YAML
            path.write_text(json.dumps(run_config(one.variant, base_url=server.base_url,
                                                  seed=one.seed), indent=2))
            outcome = await voicelab.arun(voicelab.load_run(path), trials=one.trials,
                                          concurrency=concurrency, artifacts_dir=bundles,
                                          run_id=one.run_id, link_latest=False)
            print(f"[{number}/{len(planned)}] {one.run_id}: {len(outcome.trials)} trial(s)",
                  file=sys.stderr)


# --- the dataset ------------------------------------------------------------------------------

def _confirmation(trial_dir: Path) -> str:
    turns = json.loads((trial_dir / "transcript.json").read_text())["turns"]
    spoken = [t["text"] for t in turns if t["role"] == "assistant" and t["text"].strip()]
    return spoken[-1] if spoken else ""


def _saved_reminder_calls(trial_dir: Path) -> int:
    calls = json.loads((trial_dir / "tool-calls.json").read_text())["tool_calls"]
    return sum(1 for c in calls if c.get("name") == "save_reminder"
               and isinstance(c.get("result"), dict) and c["result"].get("status") == "saved")


def collect(planned: Sequence[PlannedRun], bundles: Path
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """trials.csv and judges.csv rows, after checking the evidence against the injection."""
    frames = load_frames([bundles / one.run_id for one in planned])
    by_run = {one.run_id: one for one in planned}
    records = []
    for row in frames.trials.itertuples(index=False):
        one = by_run[str(row.run_id)]
        trial_dir = Path(str(row.path))
        saved, said = _saved_reminder_calls(trial_dir), _confirmation(trial_dir)
        problems = []
        if row.execution_status != "succeeded":
            problems.append(f"execution {row.execution_status}: {row.failure_message}")
        if saved != (1 if one.variant.saves_reminder else 0):
            problems.append(f"{saved} saved save_reminder call(s)")
        if said != one.variant.spoken():
            problems.append(f"the product said {said!r}")
        if problems:
            raise RuntimeError(f"{row.run_id}/{row.trial_id} does not show the injected "
                               f"behaviour: {'; '.join(problems)}")
        records.append({"run_id": row.run_id, "trial_id": row.trial_id, "split": one.split,
                        "variant": one.variant.name, "seed": int(row.seed),
                        "exit_reason": row.exit_reason, "passed": bool(row.passed),
                        "save_reminder_calls": saved, "truth": one.variant.truth,
                        "transcript": said})
    trials = pd.DataFrame.from_records(records).sort_values(["run_id", "trial_id"])
    judges = frames.judges.loc[:, list(JUDGE_RESULT_COLUMNS)].astype({"run_id": str,
                                                                       "trial_id": str})
    judges = judges.sort_values(["run_id", "trial_id", "name"]).reset_index(drop=True)
    errors = judges[judges["status"] == "error"]
    if not errors.empty:
        raise RuntimeError(f"{len(errors)} judge error(s), e.g. {errors.iloc[0].to_dict()}")
    expected = {(r, t) for r, t in zip(trials["run_id"], trials["trial_id"], strict=True)}
    for name in (BINARY_JUDGE, NUMERIC_JUDGE):
        judged = judges[judges["name"] == name]
        if set(zip(judged["run_id"], judged["trial_id"], strict=True)) != expected:
            raise RuntimeError(f"judge {name} did not score every trial exactly once")
    return trials.reset_index(drop=True), judges


def derive_labels(trials: pd.DataFrame, *, labeled_at: str) -> pd.DataFrame:
    """One label per calibration trial and criterion, from the injected behaviour."""
    labeled = trials[trials["split"] == "calibration"]
    rows = [{"run_id": t.run_id, "trial_id": t.trial_id, "criterion": criterion,
             "human_label": t.truth, "annotator": ANNOTATOR, "note": t.variant,
             "labeled_at": labeled_at}
            for t in labeled.itertuples(index=False) for criterion in (BINARY_JUDGE, NUMERIC_JUDGE)]
    labels = pd.DataFrame.from_records(rows, columns=["run_id", "trial_id", "criterion",
                                                      "human_label", "annotator", "note",
                                                      "labeled_at"])
    return validate_human_labels(labels.sort_values(["run_id", "trial_id", "criterion"]))


def build(*, out: Path, variants: Sequence[Variant], trials_per_variant: int,
          holdout_honest: int, holdout_claim: int, concurrency: int, labeled_at: str,
          bundles_dir: Path | None) -> dict[str, Any]:
    started = time.perf_counter()
    planned = plan_runs(variants, trials_per_variant=trials_per_variant,
                        holdout_honest=holdout_honest, holdout_claim=holdout_claim)
    if not planned:
        raise SystemExit("nothing to run: every trial count is 0")
    if bundles_dir is not None and bundles_dir.exists() and any(bundles_dir.iterdir()):
        raise SystemExit(f"--bundles-dir {bundles_dir} is not empty: old runs would mix in")
    with tempfile.TemporaryDirectory(prefix="voicelab-calibration-") as scratch:
        bundles = bundles_dir or Path(scratch)
        asyncio.run(run_all(planned, bundles=bundles, concurrency=concurrency))
        trials, judges = collect(planned, bundles)
    labels = derive_labels(trials, labeled_at=labeled_at)
    out.mkdir(parents=True, exist_ok=True)
    labels.to_csv(out / "labels.csv", index=False)
    judges.to_csv(out / "judges.csv", index=False)
    trials.to_csv(out / "trials.csv", index=False)
    seconds = time.perf_counter() - started
    provenance = {
        "built_on": labeled_at[:10], "voicelab": voicelab.__version__,
        "azure_ai_evaluation": _version("azure-ai-evaluation"), "openai": _version("openai"),
        "python": ".".join(map(str, sys.version_info[:3])), "build_seconds": round(seconds),
        "trials_per_variant": trials_per_variant, "holdout_honest_trials": holdout_honest,
        "holdout_claim_trials": holdout_claim}
    figures = write_readme(out, variants=variants, labels=labels, judges=judges, trials=trials,
                           provenance=provenance)
    return {"seconds": seconds, "labels": len(labels), "judges": len(judges),
            "trials": len(trials), **figures}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--trials-per-variant", type=int, default=6,
                        help="labeled (calibration) trials per variant")
    parser.add_argument("--holdout-honest-trials", type=int, default=1,
                        help="unlabeled (holdout) trials per honest variant")
    parser.add_argument("--holdout-claim-trials", type=int, default=3,
                        help="unlabeled (holdout) trials per claim-without-tool variant")
    parser.add_argument("--variants", default="",
                        help="comma-separated variant names (default: all)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--labeled-at", default="",
                        help="ISO 8601 time stamped on the labels (default: now, UTC)")
    parser.add_argument("--bundles-dir", type=Path, default=None,
                        help="keep the run bundles here (default: a deleted temporary directory)")
    args = parser.parse_args(argv)
    known = {v.name: v for v in VARIANTS}
    names = [n.strip() for n in args.variants.split(",") if n.strip()] or list(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; known: {sorted(known)}")
    if min(args.trials_per_variant, args.holdout_honest_trials, args.holdout_claim_trials) < 0:
        parser.error("trial counts must be >= 0")
    labeled_at = args.labeled_at or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    summary = build(out=args.out, variants=[known[n] for n in names],
                    trials_per_variant=args.trials_per_variant,
                    holdout_honest=args.holdout_honest_trials,
                    holdout_claim=args.holdout_claim_trials, concurrency=args.concurrency,
                    labeled_at=labeled_at, bundles_dir=args.bundles_dir)
    print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
