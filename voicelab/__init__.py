"""voicelab: test deployed voice agents by simulation.

Public API (the CLI and notebooks use the same calls)::

    loaded = voicelab.load_run("examples/run-workload-neutral-voice.yaml")
    options = voicelab.RunOptions(trials=3)            # what you choose, in one object
    report = await voicelab.arun(loaded, options)      # in a notebook (an event loop is running)
    report = voicelab.run(loaded, options)             # in a script
    voicelab.rescore(report.bundle_path)               # metrics and verdicts again, from a bundle
    voicelab.rescore(path, pricing="prices.yaml")      # its cost under another price table
    voicelab.matrix_costs(voicelab.plan_matrix("suite.yaml"))  # what a sweep will cost
    voicelab.replay(report.bundle_path)                # the same user audio, sent again
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "RunOptions",
    "TrialProgress",
    "__version__",
    "acheck_endpoint",
    "areplay",
    "areplay_sweep",
    "arun",
    "arun_matrix",
    "check_endpoint",
    "load_run",
    "matrix_costs",
    "plan_matrix",
    "replay",
    "replay_sweep",
    "rescore",
    "run",
    "run_matrix",
]

if TYPE_CHECKING:
    from ._progress import TrialProgress
    from .config import load_run
    from .execution import (
        RunOptions,
        acheck_endpoint,
        areplay,
        areplay_sweep,
        arun,
        arun_matrix,
        check_endpoint,
        replay,
        replay_sweep,
        run,
        run_matrix,
    )
    from .runner import matrix_costs, plan_matrix, rescore

_LAZY = {
    "load_run": ("voicelab.config", "load_run"),
    "arun": ("voicelab.execution", "arun"),
    "run": ("voicelab.execution", "run"),
    "arun_matrix": ("voicelab.execution", "arun_matrix"),
    "run_matrix": ("voicelab.execution", "run_matrix"),
    "rescore": ("voicelab.runner", "rescore"),
    "plan_matrix": ("voicelab.runner", "plan_matrix"),
    "matrix_costs": ("voicelab.runner", "matrix_costs"),
    "replay": ("voicelab.execution", "replay"),
    "areplay": ("voicelab.execution", "areplay"),
    "replay_sweep": ("voicelab.execution", "replay_sweep"),
    "areplay_sweep": ("voicelab.execution", "areplay_sweep"),
    "TrialProgress": ("voicelab._progress", "TrialProgress"),
    "RunOptions": ("voicelab.execution", "RunOptions"),
    "check_endpoint": ("voicelab.execution", "check_endpoint"),
    "acheck_endpoint": ("voicelab.execution", "acheck_endpoint"),
}


def __getattr__(name: str) -> Any:
    # Lazy so `voice-evaluator validate` does not pay for the runner's imports.
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'voicelab' has no attribute {name!r}")
