"""Analysis: bundles -> pandas frames, plots, inline audio and widgets, HTML reports, labels.

    frames = voicelab.analysis.load_frames(run_dir)       # .runs .trials .turns .events ...
    voicelab.analysis.plot_latency(frames.turns, by="persona")
    voicelab.analysis.TrialPlayer(frames, trial_id="trial-001")

Importing this package loads numpy and pandas only: matplotlib, ipywidgets, IPython, papermill
and nbconvert are imported inside the functions that use them. The CLI start-up path never
imports it. Judge calibration against human labels is :mod:`voicelab.analysis.calibration`;
simulated callers against recorded ones: ``caller_behaviour`` and ``compare_realism``.
"""

from ._compare import DEFAULT_GATES, Gate, compare
from ._comparison import (
    Comparison,
    CostComparison,
    MetricComparison,
    PassRateComparison,
    RunSide,
)
from ._cost import cost_table, plot_cost_and_pass_rate, stage_table
from ._embed import (
    AUDIO_FORMATS,
    audio_data_uri,
    audio_html,
    encode_audio,
    read_trial_audio,
    retention_note,
    turn_audio_html,
    turn_windows,
)
from ._endpointing import endpointing_frame, half_cut_in_pause, plot_endpointing
from ._failures import failing_trials, transcript_markdown
from ._frames import GROUP_COLUMNS, KEY_COLUMNS, Frames, check_metric, load_frames, worst_turns
from ._labels import label_rows, load_labels, save_labels
from ._plots import (
    PRODUCT_VOICE_METRICS,
    figure_png,
    plot_latency,
    plot_pass_curves,
    plot_pass_rate_heatmap,
    plot_product_voice,
    plot_silence,
    plot_timeline,
)
from ._rates import pass_curve_table, pass_rate_table
from ._realism import (
    BEHAVIOUR_COLUMNS,
    CALLER_METRICS,
    DEFAULT_MIN_PAUSE_MS,
    TurnSpeech,
    caller_behaviour,
    measure_turn,
)
from ._realism_plots import plot_qq, plot_realism
from ._realism_stats import (
    DEFAULT_MIN_DIFFERENCES,
    DRIVERS,
    REALISM_COLUMNS,
    Knob,
    MetricDriver,
    RealismReport,
    cliffs_delta,
    compare_realism,
    hedges_g,
    hodges_lehmann,
    holm,
    realism_table,
)
from ._report import write_compare_report, write_report
from ._selectivity import probes_table, selectivity_table
from ._tables import show_table
from ._widgets import LabelingWidget, MatrixBrowser, TrialPlayer, default_criteria
from .calibration import (
    HUMAN_LABEL_COLUMNS,
    CalibrationReport,
    CorrectedPassRate,
    best_threshold,
    calibrate,
    corrected_pass_rate,
    join_labels,
    read_human_labels,
    threshold_sweep,
    validate_human_labels,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "probes_table",
    "HUMAN_LABEL_COLUMNS",
    "CalibrationReport",
    "best_threshold",
    "calibrate",
    "corrected_pass_rate",
    "join_labels",
    "read_human_labels",
    "threshold_sweep",
    "validate_human_labels",
    "load_frames",
    "write_report",
    "DEFAULT_GATES",
    "Gate",
    "compare",
    "write_compare_report",
]
