"""A trial's bill: its usage gathered (recorded events, judges, recognition, the call's minutes,
the bundle's bytes) and priced under a table; and the sums of many trials.

Pricing is a pure function of usage and the table, so the same bundle priced under the same table
gives the same bytes, and under another table (``rescore --pricing``) only the cost changes.

The table says how a provider bills: for a component/provider/model it prices some units of
(Azure Speech: characters), the other units recorded beside them (the seconds of audio) are
shown without a price and are not missing from the total. Usage the table prices no unit of is
``unpriced`` (``no_price``), as is a priced unit whose quantity is not known
(``unknown_quantity``): neither is ever summed as 0 (docs/cost.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..artifacts import (
    CostItem,
    CostSummary,
    JudgeResult,
    TrialCost,
    UnpricedItem,
    Usage,
)
from ..config import COMPONENTS, UNITS, PricingConfig, Unit
from ..recording import EventType, Recording, UsageRecorded

#: Bytes in a gigabyte as storage is billed (decimal, as cloud price lists use).
BYTES_PER_GIGABYTE = 1_000_000_000
NS_PER_MINUTE = 60_000_000_000

_Key = tuple[str, str | None, str | None]
#: Amounts are kept to this many decimal places (a millionth of a cent is well below any
#: price list's precision; it keeps float noise out of the reports).
AMOUNT_DECIMALS = 12


def money(amount: float) -> float:
    """An amount as reports keep it."""
    return round(amount, AMOUNT_DECIMALS)


def recorded_usage(recording: Recording) -> list[Usage]:
    """Every ``usage.recorded`` event's usage, in the order it was spent."""
    return [UsageRecorded.of(event).usage
            for event in recording.of_type(EventType.USAGE_RECORDED)]


def product_usage(recording: Recording, *, adapter: str) -> Usage | None:
    """The product's call minutes: from the connection's start to the end of the call (real
    time on the trial's clock; an unpaced run's calls are as short as they really were).
    None: the trial never connected."""
    start = next((e.offset_ns for e in recording.of_type(EventType.CONNECT_STARTED)), None)
    if start is None:
        return None
    end = next((e.offset_ns for e in recording.of_type(EventType.TRIAL_ENDED)),
               recording.events[-1].offset_ns)
    minutes = max(0, end - start) / NS_PER_MINUTE
    return Usage(component="product", provider=adapter, quantities={"minute": round(minutes, 6)})


def storage_usage(byte_count: int) -> Usage:
    """The trial's files in the bundle (its report aside)."""
    return Usage(component="storage", quantities={
        "gigabyte": round(byte_count / BYTES_PER_GIGABYTE, 9)})


def trial_usage(recording: Recording, *, adapter: str, judges: Sequence[JudgeResult] = (),
                recognition: Sequence[Usage] = (), storage_bytes: int | None = None
                ) -> list[Usage]:
    """Everything a trial used: what its calls recorded as they spent, the call's minutes, the
    recognition and judges that scored it, and its bundle's bytes."""
    usages = recorded_usage(recording)
    product = product_usage(recording, adapter=adapter)
    if product is not None:
        usages.append(product)
    usages.extend(recognition)
    for judge in judges:
        usages.extend(judge.usage)
    if storage_bytes is not None:
        usages.append(storage_usage(storage_bytes))
    return usages


def trial_cost(recording: Recording, pricing: PricingConfig | None, *, adapter: str,
               judges: Sequence[JudgeResult] = (), recognition: Sequence[Usage] = (),
               storage_bytes: int | None = None) -> TrialCost:
    """A trial's ``cost``: everything it used (:func:`trial_usage`) priced under ``pricing``."""
    return price_usage(trial_usage(recording, adapter=adapter, judges=judges,
                                   recognition=recognition, storage_bytes=storage_bytes),
                       pricing)


def _order(key: _Key, unit: str) -> tuple[int, str, str, int]:
    component, provider, model = key
    return (COMPONENTS.index(component), provider or "", model or "", UNITS.index(unit))


def price_usage(usages: Iterable[Usage], pricing: PricingConfig | None) -> TrialCost:
    """``usages`` priced under ``pricing`` (None: no table, nothing priced); see the module
    docstring for what is unpriced."""
    quantities: dict[tuple[_Key, Unit], list[int | float | None]] = {}
    estimated: set[tuple[_Key, Unit]] = set()
    for usage in usages:
        key: _Key = (usage.component, usage.provider, usage.model)
        for unit, quantity in usage.quantities.items():
            quantities.setdefault((key, unit), []).append(quantity)
            if unit in usage.estimated:
                estimated.add((key, unit))
    priced_keys = {key for key, unit in quantities if pricing is not None
                   and pricing.price_of(*key, unit) is not None}
    items: list[CostItem] = []
    unpriced: list[UnpricedItem] = []
    for key, unit in sorted(quantities, key=lambda ku: _order(*ku)):
        values = quantities[(key, unit)]
        quantity = None if any(v is None for v in values) else _sum(values)
        entry = pricing.price_of(*key, unit) if pricing is not None else None
        price = entry.price if entry is not None else None
        amount = money(quantity * price) if quantity is not None and price is not None else None
        component, provider, model = key
        items.append(CostItem(component=component, provider=provider, model=model,
                              unit=unit, quantity=quantity, price=price, amount=amount,
                              estimated=(key, unit) in estimated))
        if key not in priced_keys or (price is not None and quantity is None):
            unpriced.append(UnpricedItem(
                component=component, provider=provider, model=model, unit=unit,
                reason="no_price" if price is None else "unknown_quantity"))
    known = [item.amount for item in items if item.amount is not None]
    total = money(math.fsum(known)) if known or not unpriced else None
    return TrialCost(currency=pricing.currency if pricing is not None else None, total=total,
                     items=items, unpriced=unpriced)


def _sum(values: Sequence[int | float | None]) -> int | float:
    numbers = [v for v in values if v is not None]
    if all(isinstance(v, int) for v in numbers):
        return sum(numbers)
    return round(math.fsum(numbers), 9)


def _plus(total: float | None, amount: float | None) -> float | None:
    if amount is None:
        return total
    return amount if total is None else money(total + amount)


def _unpriced_union(groups: Iterable[Iterable[UnpricedItem]]) -> list[UnpricedItem]:
    seen: dict[tuple[object, ...], UnpricedItem] = {}
    for group in groups:
        for item in group:
            seen.setdefault((item.component, item.provider, item.model, item.unit,
                             item.reason), item)
    return sorted(seen.values(), key=lambda i: (*_order((i.component, i.provider, i.model),
                                                        i.unit), i.reason))


def cost_summary(costs: Iterable[TrialCost | None]) -> CostSummary:
    """The cost of several trials (a run, a cell): their known amounts summed by component."""
    priced = [cost for cost in costs if cost is not None]
    by_component: dict[str, float | None] = {}
    total: float | None = None
    for cost in priced:
        total = _plus(total, cost.total)
        for item in cost.items:
            by_component[item.component] = _plus(by_component.get(item.component), item.amount)
    unpriced = _unpriced_union(cost.unpriced for cost in priced)
    if total is None and not unpriced:
        total = 0.0  # nothing was used
    return CostSummary(
        currency=next((c.currency for c in priced if c.currency), None), total=total,
        by_component={c: by_component[c] for c in COMPONENTS if c in by_component},
        trials=len(priced), unpriced=unpriced,
        estimated=any(item.estimated for cost in priced for item in cost.items))


def merged_summary(summaries: Iterable[CostSummary | None]) -> CostSummary:
    """Several summaries as one (a stage's cells, a sweep's stages)."""
    present = [s for s in summaries if s is not None]
    by_component: dict[str, float | None] = {}
    total: float | None = None
    for summary in present:
        total = _plus(total, summary.total)
        for component, amount in summary.by_component.items():
            by_component[component] = _plus(by_component.get(component), amount)
    unpriced = _unpriced_union(s.unpriced for s in present)
    if total is None and not unpriced:
        total = 0.0
    return CostSummary(
        currency=next((s.currency for s in present if s.currency), None), total=total,
        by_component={c: by_component[c] for c in COMPONENTS if c in by_component},
        trials=sum(s.trials for s in present), unpriced=unpriced,
        estimated=any(s.estimated for s in present))
