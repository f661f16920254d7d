"""Flaky or broken: cells classified across earlier runs (``--history``; docs/observability.md).

:func:`flakiness` reads the run reports of a history folder (or store URL) with the bundle
readers' limits and classifies each scenario x persona x environment cell of a run or sweep as
stable pass, flaky (with its pass rate and interval) or stable fail, and says which flipped
since the last run; ``flakiness.json`` keeps it, and JUnit marks the flaky cells.
"""

from ._classify import (
    RunRecord,
    classify,
    flakiness,
    read_history,
    record_of,
    record_of_report,
    stability_line,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "classify",
    "flakiness",
    "read_history",
    "stability_line",
]
