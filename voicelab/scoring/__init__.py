"""Scoring: outcome probes, deterministic verdicts, LLM judges, pass@k and pass^k."""

from ._judge_correction import CorrectedRate, corrected_rate, rogan_gladen
from ._probe import OutcomeProbe
from ._probe_loader import PROBES, load_probe_class
from ._quality import (
    ConversationEvidence,
    critical_judge_failures,
    evaluate_quality,
    judges_pass,
)
from ._quality_check import check_quality_evaluation, judge_provider_name
from ._redaction import RedactedEvidence, Redactor
from ._run_judges import run_judges
from ._run_statistics import (
    GATE_METRICS,
    RunStatistics,
    check_gate_metrics,
    pass_rate,
    read_calibration,
    run_statistics,
    settings_of,
)
from ._statistics import (
    DifferenceInterval,
    GateResult,
    QuantileBound,
    RateInterval,
    bootstrap_projection,
    gate_on_interval,
    mcnemar_exact,
    paired_bootstrap_difference,
    paired_rate_difference,
    paired_rate_projection,
    pass_at_k_estimate,
    pass_curves,
    pass_power_k_estimate,
    proportion_interval,
    quantile_bound,
    trials_for_width,
)
from ._verdicts import (
    TrialStatus,
    deterministic_verdicts,
    pass_at_k,
    pass_power_k,
    trial_passed,
    trial_status,
)

__all__ = [
    "pass_rate",
    "settings_of",
    "ConversationEvidence",
    "RedactedEvidence",
    "Redactor",
    "critical_judge_failures",
    "evaluate_quality",
    "judges_pass",
    "PROBES",
    "OutcomeProbe",
    "check_quality_evaluation",
    "deterministic_verdicts",
    "judge_provider_name",
    "load_probe_class",
    "pass_at_k",
    "pass_power_k",
    "run_judges",
    "DifferenceInterval",
    "GateResult",
    "RateInterval",
    "bootstrap_projection",
    "gate_on_interval",
    "mcnemar_exact",
    "paired_bootstrap_difference",
    "paired_rate_difference",
    "paired_rate_projection",
    "pass_at_k_estimate",
    "pass_curves",
    "pass_power_k_estimate",
    "trial_passed",
    "trial_status",
    "TrialStatus",
    "proportion_interval",
    "trials_for_width",
    "CorrectedRate",
    "GATE_METRICS",
    "QuantileBound",
    "RunStatistics",
    "check_gate_metrics",
    "corrected_rate",
    "quantile_bound",
    "read_calibration",
    "rogan_gladen",
    "run_statistics",
]
