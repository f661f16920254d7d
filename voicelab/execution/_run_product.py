"""The product a run launches once for all its trials (``launch.per: run``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..artifacts import PRODUCT_LOG, Redacts, RunFolder, RunReport, filter_member
from ..config import LoadedRun
from ..endpoints import EndpointError, ProductProcess
from ..runner import Failure


async def launch_run_product(loaded: LoadedRun) -> tuple[
        ProductProcess | None, Mapping[str, Any] | None, Failure | None]:
    """The product started for the run, the settings it filled (its port), or why it could not
    start (every trial then fails with it); nothing when the run launches none per run."""
    launch = loaded.run.endpoint.launch
    if launch is None or launch.per != "run":
        return None, None, None
    product = ProductProcess(launch, settings=loaded.run.endpoint.settings,
                             base_dir=loaded.base_dir, scrubber=loaded.scrubber)
    try:
        await product.start()
        return product, product.settings, None
    except EndpointError as error:
        return product, None, Failure("endpoint", loaded.scrubber.scrub_text(str(error)),
                                      error.code)


async def stop_run_product(product: ProductProcess, folder: RunFolder[RunReport],
                           words: Redacts) -> str | None:
    """Stop it and keep its log in the bundle (filtered as every text the run writes); the
    problem writing it, if any."""
    await product.stop()
    return folder.write_member(PRODUCT_LOG, filter_member(
        PRODUCT_LOG, product.log_text().encode(), words))
