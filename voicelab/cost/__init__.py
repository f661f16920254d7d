"""What a suite costs: usage recorded where it is spent, priced under a table; estimates for
``plan``; budgets that stop a run before it spends too much (docs/cost.md).

Usage is a fact of a trial (``usage.recorded`` events, each judge's ``usage``); cost is derived
from it, never stored as the only record, so ``rescore --pricing`` prices an old run under a
new table. voicelab knows no price of its own: a run's ``pricing:`` table says them. What a run
will cost before it runs is :mod:`voicelab.runner`'s to estimate (it knows the personas and
providers a plan uses).
"""

from ._budget import CostBudget
from ._ledger import (
    BYTES_PER_GIGABYTE,
    cost_summary,
    merged_summary,
    price_usage,
    product_usage,
    recorded_usage,
    storage_usage,
    trial_cost,
    trial_usage,
)
from ._usage import (
    ASSISTANT_AUDIO_TOKENS_PER_SECOND,
    CHARS_PER_TOKEN,
    USER_AUDIO_TOKENS_PER_SECOND,
    chat_usage,
    realtime_usage,
    speech_usage,
    text_tokens,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
