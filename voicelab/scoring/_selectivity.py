"""The run's selectivity table: wrong reactions to probes as rates with confidence intervals.

* ``false_stop_rate_backchannel``: backchannel probes the product stopped for, per backchannel
  probe that found it speaking;
* ``false_stop_rate_noise``: the same for noise probes;
* ``missed_stop_rate_interruption``: interruptions it did not stop for, per interruption that
  found it speaking.

Each rate's interval is the run's (``statistics``: Wilson or Clopper-Pearson, at its
confidence); ``stop_ms`` summarizes the probe's frame to the end of the product's speech over
the probes where it stopped. Probes that found the product silent count as ``not_applicable``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..artifacts import ProbeOutcome, ProbeRow, SelectivityRate
from ..config import StatisticsConfig
from ..metrics import summarize
from ._statistics import proportion_interval

RATES = (("false_stop_rate_backchannel", "backchannel"), ("false_stop_rate_noise", "noise"),
         ("missed_stop_rate_interruption", "interruption"))


def selectivity(trials: Sequence[tuple[int, Sequence[ProbeOutcome]]],
                statistics: StatisticsConfig) -> tuple[list[SelectivityRate], list[ProbeRow]]:
    """The rates (only for the kinds the run probed) and every probe with its trial."""
    rows = [ProbeRow(trial=trial, **probe.model_dump()) for trial, probes in trials
            for probe in probes]
    rates = []
    for name, kind in RATES:
        of_kind = [row for row in rows if row.kind == kind]
        if not of_kind:
            continue
        judged = [row for row in of_kind if row.correct is not None]
        errors = sum(not row.correct for row in judged)
        interval = proportion_interval(errors, len(judged), confidence=statistics.confidence,
                                       method=statistics.interval)
        values = interval.to_dict()
        stops = [row.stop_ms for row in judged if row.stopped and row.stop_ms is not None]
        rates.append(SelectivityRate(
            name=name, kind=kind, probes=len(judged), errors=errors,
            estimate=values["estimate"], low=values["low"], high=values["high"],
            method=values["method"], confidence=values["confidence"],
            not_applicable=len(of_kind) - len(judged),
            stop_ms=summarize(stops) if stops else None))
    return rates, rows
