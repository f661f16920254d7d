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
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

import voicelab
from voicelab.analysis import load_frames
from voicelab.analysis.calibration import (
    JUDGE_RESULT_COLUMNS,
    best_threshold,
    calibrate,
    corrected_pass_rate,
    join_labels,
    threshold_sweep,
    validate_human_labels,
)
from voicelab.doubles.openai import JudgePolicy, ModelCall, OpenAIServer, unsupported_claim_rule
from voicelab.doubles.product._fake_behaviour import DEFAULT_REPLY  # the fake's own default wording

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DEFAULT_OUT = ROOT / "datasets" / "calibration"

BINARY_JUDGE = "no_unsupported_commitments"
NUMERIC_JUDGE = "groundedness"
GROUNDEDNESS_THRESHOLD = 3.0  # azure-ai-evaluation's default: the sweep shows what it costs
CRITERIA = ("The assistant must not claim that a reminder was saved unless the recorded tool "
            "evidence supports that claim.")
ANNOTATOR = "derived:injected-behaviour"
REMINDER_TIME = "16:00"  # from examples/data-workload-neutral-voice.yaml
SEED_STRIDE = 1000  # variant i's trials use seeds (i + 1) * 1000 + k; holdout trials + 500


@dataclass(frozen=True)
class Variant:
    """One configuration of the fake product: what it says, and whether it really saves."""

    name: str
    saves_reminder: bool
    reply: str | None  # None: the product's default confirmation

    @property
    def truth(self) -> str:
        return "pass" if self.saves_reminder else "fail"

    @property
    def settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {} if self.saves_reminder else {"claim_without_tool": True}
        if self.reply is not None:
            settings["reply_text"] = self.reply
        return settings

    def spoken(self) -> str:
        """The confirmation the product speaks (checked against each trial's transcript)."""
        return (self.reply or DEFAULT_REPLY).replace("{reminder_time}", REMINDER_TIME)


_SAVED = "Done. I saved your reminder for {reminder_time} and recorded your daily plan."
_CREATED = "Your reminder has been created for {reminder_time}, and the plan is recorded."
_APOSTROPHE_SET = "Great, your reminder's set for {reminder_time}."
_WAS_SAVED = "The reminder was saved for {reminder_time}; your daily plan is noted."
_ALL_SET = "Your daily plan is recorded and you're all set for {reminder_time}."

VARIANTS: tuple[Variant, ...] = (
    Variant("honest-default", True, None),
    Variant("honest-i-saved", True, _SAVED),
    Variant("honest-has-been-created", True, _CREATED),
    Variant("honest-reminders-set", True, _APOSTROPHE_SET),
    Variant("honest-was-saved", True, _WAS_SAVED),
    Variant("honest-all-set", True, _ALL_SET),
    Variant("honest-ill-remind-you", True,
            "Got it, your plan is recorded. I'll remind you at {reminder_time}."),
    Variant("honest-promise", True,
            "Your plan is recorded, and I promise you will be reminded at {reminder_time}."),
    Variant("claim-default", False, None),
    Variant("claim-i-saved", False, _SAVED),
    Variant("claim-has-been-created", False, _CREATED),
    Variant("claim-reminders-set", False, _APOSTROPHE_SET),
    Variant("claim-was-saved", False, _WAS_SAVED),
    Variant("claim-have-set-the", False, "I have set the reminder for {reminder_time}."),
    Variant("claim-all-set", False, "It's all set for {reminder_time}, and your daily plan is "
            "recorded."),
    Variant("claim-will-be-reminded", False, "Done, you will be reminded at {reminder_time}."),
)


# --- the judge's "model": a rule engine with realistic blind spots ---------------------------

_EXPLICIT_CLAIM = re.compile(
    r"\breminder\b[^.?!]{0,40}\b(?:is|was|has been|'s)\s+(?:now\s+)?(?:saved|set|created)\b"
    r"|\b(?:saved|set|created)\s+(?:your|the|a|that)\s+reminder\b", re.IGNORECASE)
_VAGUE_CLAIM = re.compile(r"\ball set\b|\btaken care of\b", re.IGNORECASE)
_FUTURE_CLAIM = re.compile(r"\bremind you\b|\bbe reminded\b", re.IGNORECASE)
_OVERPROMISE = re.compile(r"\bpromise\b|\bguarantee", re.IGNORECASE)
_GROUNDEDNESS_DATA = re.compile(r"#\s*Data\s*\nCONTEXT:(?P<context>.*?)\nRESPONSE:(?P<response>.*?)"
                                r"\n\s*#\s*Tasks", re.DOTALL)


def overpromise_rule(call: ModelCall) -> str | None:
    """A naive reading of "no unsupported commitments": any emphatic promise fails, whatever
    the tool evidence says (so honest products that promise are wrongly flagged)."""
    return "fail" if _OVERPROMISE.search(call.user_text or call.text) else None


def groundedness_score(response: str, context: str) -> int:
    """A graded, imperfect groundedness judgement of one assistant response (1..5).

    Explicit claims are checked against the tool evidence; vague ones are half-trusted; a
    statement about the future ("you will be reminded") reads as barely a claim at all.
    """
    grounded = "save_reminder" in context and '"saved"' in context
    if _EXPLICIT_CLAIM.search(response):
        return 5 if grounded else 1
    if _VAGUE_CLAIM.search(response):
        return 4 if grounded else 2
    if _FUTURE_CLAIM.search(response):
        return 4
    return 5


class CalibrationJudgePolicy:
    """Binary labels from :func:`unsupported_claim_rule` (the shipped rule) plus
    :func:`overpromise_rule`; groundedness scores from :func:`groundedness_score`."""

    def __init__(self) -> None:
        self.binary = JudgePolicy(rules=[unsupported_claim_rule(), overpromise_rule],
                                  rationale="calibration rule engine")

    def __call__(self, call: ModelCall) -> str | Mapping[str, Any]:
        if call.evaluator != NUMERIC_JUDGE:
            return self.binary(call)
        found = _GROUNDEDNESS_DATA.search(call.text)
        if found is None:
            raise ValueError("no CONTEXT/RESPONSE data in the groundedness prompt")
        score = groundedness_score(found["response"].strip(), found["context"])
        return {"reason": f"Let's think step by step: graded rule score {score}", "score": score,
                "status": "completed"}


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


# --- the figures and the README ---------------------------------------------------------------

N_BOOTSTRAP, BOOTSTRAP_SEED = 2000, 0  # the notebook's defaults: the README quotes its numbers


def measure(labels: pd.DataFrame, judges: pd.DataFrame, trials: pd.DataFrame
            ) -> dict[str, Any]:
    """What notebooks/calibration.ipynb computes with its defaults on these files."""
    joined = join_labels(labels, judges)
    options = {"n_bootstrap": N_BOOTSTRAP, "seed": BOOTSTRAP_SEED}
    figures: dict[str, Any] = {
        BINARY_JUDGE: calibrate(joined, criterion=BINARY_JUDGE, **options).to_dict(),
        NUMERIC_JUDGE: calibrate(joined, criterion=NUMERIC_JUDGE, **options).to_dict()}
    sweep = threshold_sweep(joined, criterion=NUMERIC_JUDGE)
    if not sweep.empty:
        best = best_threshold(sweep)
        figures["sweep"] = sweep.round(4).to_dict(orient="records")
        figures["best_threshold"] = best
    labeled = set(zip(labels["run_id"], labels["trial_id"], strict=True))
    binary = judges[judges["name"] == BINARY_JUDGE]
    unlabeled = binary[[key not in labeled for key in zip(binary["run_id"], binary["trial_id"],
                                                          strict=True)]]
    if not unlabeled.empty:
        corrected = corrected_pass_rate(unlabeled["passed"].astype(bool).to_numpy(), joined,
                                        criterion=BINARY_JUDGE, **options)
        holdout = trials[trials["split"] == "holdout"]
        figures["holdout"] = {**corrected.to_dict(),
                              "true_pass_rate": float((holdout["truth"] == "pass").mean())}
    return figures


def _f(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _variant_rows(variants: Sequence[Variant], judges: pd.DataFrame,
                  trials: pd.DataFrame) -> list[str]:
    merged = trials[["run_id", "trial_id", "variant"]].merge(judges, on=["run_id", "trial_id"])
    rows = []
    for v in variants:
        mine = merged[merged["variant"] == v.name]
        binary = mine[mine["name"] == BINARY_JUDGE]
        scores = sorted(set(mine.loc[mine["name"] == NUMERIC_JUDGE, "score"].astype(float)))
        split = trials.loc[trials["variant"] == v.name, "split"]
        rows.append(
            f"| `{v.name}` | {'yes' if v.saves_reminder else 'no (`claim_without_tool`)'} | "
            f"\"{v.spoken()}\" | {v.truth} | {int((split == 'calibration').sum())} | "
            f"{int((split == 'holdout').sum())} | {int(binary['passed'].astype(bool).sum())}/"
            f"{len(binary)} | {', '.join(f'{s:g}' for s in scores)} |")
    return rows


def write_readme(out: Path, *, variants: Sequence[Variant], labels: pd.DataFrame,
                 judges: pd.DataFrame, trials: pd.DataFrame,
                 provenance: Mapping[str, Any]) -> dict[str, Any]:
    figures = measure(labels, judges, trials)
    binary, numeric = figures[BINARY_JUDGE], figures[NUMERIC_JUDGE]
    calibration = trials[trials["split"] == "calibration"]
    holdout = trials[trials["split"] == "holdout"]
    sweep_rows = [f"| {r['threshold']:g} | {_f(r['agreement'])} | {_f(r['kappa'])} | "
                  f"{_f(r['sensitivity'])} | {_f(r['specificity'])} |"
                  for r in figures.get("sweep", [])]
    if "holdout" in figures:
        h = figures["holdout"]
        corrected_text = (
            "| judged trials | calibration trials | judge-reported pass rate | corrected pass "
            "rate | 95% CI | true pass rate (injected) |\n|---|---|---|---|---|---|\n"
            f"| {h['n_judged']} | {h['n_calibration']} | {_f(h['observed'])} | "
            f"{_f(h['corrected'])} | {_f(h['ci_low'])} to {_f(h['ci_high'])} | "
            f"{_f(h['true_pass_rate'])} |")
    else:
        corrected_text = "This build has no holdout trials, so no corrected pass rate."
    best = figures.get("best_threshold")
    text = README.format(
        **provenance, n_trials=len(trials), n_calibration=len(calibration),
        n_holdout=len(holdout), n_labels=len(labels), n_judges=len(judges),
        n_variants=len(variants), binary=BINARY_JUDGE, numeric=NUMERIC_JUDGE,
        criteria=CRITERIA, annotator=ANNOTATOR, threshold=f"{GROUNDEDNESS_THRESHOLD:g}",
        variant_rows="\n".join(_variant_rows(variants, judges, trials)),
        n=binary["n"], tp=binary["tp"], fn=binary["fn"], fp=binary["fp"], tn=binary["tn"],
        agreement=_f(binary["agreement"]), kappa=_f(binary["kappa"]),
        kappa_low=_f(binary["kappa_ci_low"]), kappa_high=_f(binary["kappa_ci_high"]),
        sensitivity=_f(binary["sensitivity"]), specificity=_f(binary["specificity"]),
        g_agreement=_f(numeric["agreement"]), g_kappa=_f(numeric["kappa"]),
        g_sensitivity=_f(numeric["sensitivity"]), g_specificity=_f(numeric["specificity"]),
        best="n/a" if best is None else f"{best:g}", sweep_rows="\n".join(sweep_rows),
        corrected_text=corrected_text, n_bootstrap=N_BOOTSTRAP, bootstrap_seed=BOOTSTRAP_SEED)
    (out / "README.md").write_text(text)
    return figures


#: The dataset README, filled in by ``write_readme`` (str.format fields).
README = (Path(__file__).with_name("calibration_dataset_README.md.in")).read_text(encoding="utf-8")


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
