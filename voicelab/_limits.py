"""How much one command may ask for: bounds that keep a typo (``--trials 1e20``) from
exhausting the machine. A light module of its own, so the command line checks its options
without importing the runner; the packages that enforce them import them from here."""

from __future__ import annotations

#: trials of one run (a bigger study is a sweep or several runs)
MAX_TRIALS = 100_000
#: conversations in flight at once
MAX_CONCURRENCY = 1_000
#: The most worker processes of the local executor (``--workers``).
MAX_WORKERS = 256
#: runs again of a trial that ended inconclusive (``--retry-inconclusive``)
MAX_RETRIES = 5
#: ingest's turn gap: a caller silent this long ends the turn; a longer silence inside a call
#: is no gap between words any more
MAX_TURN_GAP_MS = 60_000.0
#: ``--ramp``: the longest period a run's first trials start over
MAX_RAMP_SECONDS = 3_600.0
#: ``--arrival-rate``: new trials a second (an open load profile)
MAX_ARRIVAL_RATE = 1_000.0
