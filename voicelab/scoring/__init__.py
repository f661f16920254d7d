"""Scoring: outcome probes, deterministic verdicts, LLM and plug-in judges, pass@k and pass^k."""

from ._endpointing import Hesitation, curve_of, endpointing_curve, half_cut_in, hesitations
from ._evidence import CALL_ENDED, ConversationEvidence, RedactedEvidence, TrialEvidence
from ._judge_correction import METHOD, CorrectedRate, corrected_rate, rogan_gladen, safe_ratio
from ._judge_plugins import (
    JUDGES,
    Judge,
    JudgeVerdict,
    check_plugin_judges,
    load_judge_class,
)
from ._paired import (
    DifferenceInterval,
    GateResult,
    bootstrap_projection,
    gate_on_interval,
    mcnemar_exact,
    paired_bootstrap_difference,
    paired_rate_difference,
    paired_rate_projection,
)
from ._probe import OutcomeProbe
from ._probe_loader import PROBES, load_probe_class
from ._quality import critical_judge_failures, evaluate_quality, judges_pass
from ._quality_check import check_quality_evaluation, judge_provider_name
from ._redaction import PII_PATTERNS, Redactor, transcript_redactor
from ._run_judges import run_judges
from ._run_statistics import (
    GATE_METRICS,
    RunStatistics,
    check_gate_metrics,
    counts_toward_rates,
    gate_config_of,
    pass_rate,
    read_calibration,
    run_statistics,
    settings_of,
)
from ._statistics import (
    DEFAULT_RESAMPLES,
    INTERVAL_METHODS,
    QUANTILE_STATISTICS,
    IntervalMethod,
    QuantileBound,
    RateInterval,
    pass_at_k_estimate,
    pass_curves,
    pass_power_k_estimate,
    proportion_interval,
    quantile_bound,
    trials_for_width,
)
from ._text_readers import text_readers
from ._verdict_registry import Need, VerdictCheck, judge_verdicts, verdict
from ._verdicts import (
    BUILTIN_VERDICTS,
    UNJUDGED,
    TrialStatus,
    deterministic_verdicts,
    gate_passed,
    no_cut_in_verdict,
    pass_at_k,
    pass_power_k,
    recorded_plugin_verdicts,
    script_turns_said_verdict,
    trial_passed,
    trial_status,
    verdict_checks,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "IntervalMethod",
    "ConversationEvidence",
    "critical_judge_failures",
    "judges_pass",
    "TrialEvidence",
    "verdict",
    "proportion_interval",
    "trials_for_width",
    "read_calibration",
    "Judge",
    "JudgeVerdict",
    "RedactedEvidence",
]
