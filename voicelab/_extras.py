"""Which optional package belongs to which extra, and the one error a missing one becomes.

The core install (``pip install -e .``) runs trials; reports, notebooks, cloud clients, stores,
Dask and offline speech come with extras. Code that needs one calls :func:`require_modules`
before any work; the CLI also turns a stray ``ModuleNotFoundError`` of a module listed here into
the same message (:func:`missing_dependency`), so a missing extra is always exit 2 and the exact
``pip install`` line, never an internal error.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

from .errors import MissingDependencyError

#: top-level module -> (the package to install, the extra that brings it)
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "papermill": ("papermill", "notebooks"),
    "nbformat": ("nbformat", "notebooks"),
    "nbconvert": ("nbconvert", "notebooks"),
    "nbclient": ("nbclient", "notebooks"),
    "jinja2": ("jinja2", "notebooks"),
    "matplotlib": ("matplotlib", "notebooks"),
    "ipykernel": ("ipykernel", "notebooks"),
    "IPython": ("ipython", "notebooks"),
    "ipywidgets": ("ipywidgets", "notebooks"),
    "jupyter_client": ("jupyter-client", "notebooks"),
    "openai": ("openai", "azure"),
    "azure": ("azure-identity", "azure"),
    "distributed": ("distributed", "dask"),
    "s3fs": ("s3fs", "s3"),
    "gcsfs": ("gcsfs", "gcs"),
    "adlfs": ("adlfs", "azure-storage"),
    "piper": ("piper-tts", "speech"),
    "pocketsphinx": ("pocketsphinx", "speech"),
    "onnxruntime": ("onnxruntime", "speech"),
    "jiwer": ("jiwer", "speech"),
    "pystoi": ("pystoi", "speech"),
    "pesq": ("pesq", "speech"),
    "speechmos": ("speechmos", "speech"),
    "opuslib": ("opuslib-next-bundled", "telephony"),
    "webrtcvad": ("webrtcvad-wheels", "vad"),
    "aiortc": ("aiortc", "webrtc"),
    # opentelemetry-api alone may come with other packages: the SDK and exporter are checked
    "opentelemetry": ("opentelemetry-sdk", "telemetry"),
    "opentelemetry.sdk": ("opentelemetry-sdk", "telemetry"),
    "opentelemetry.exporter.otlp.proto.http": ("opentelemetry-exporter-otlp-proto-http",
                                               "telemetry"),
    "prometheus_client": ("prometheus-client", "telemetry"),
}

#: What ``voice-evaluator report`` and ``compare --html`` execute and export with.
REPORT_MODULES = ("papermill", "nbformat", "nbconvert", "jinja2", "matplotlib", "ipykernel",
                  "IPython")


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported (a ``None`` entry in ``sys.modules`` counts as absent)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_modules(modules: Iterable[str], *, purpose: str) -> None:
    """Raise :class:`MissingDependencyError` (the ``pip install`` line) for the first of
    ``modules`` that cannot be imported; each must be listed in :data:`OPTIONAL_MODULES`."""
    for module in modules:
        if not is_installed(module):
            package, extra = OPTIONAL_MODULES[module]
            raise MissingDependencyError(package, extra=extra, purpose=purpose)


def missing_dependency(error: ModuleNotFoundError, *,
                       purpose: str) -> MissingDependencyError | None:
    """The install message for a ``ModuleNotFoundError`` of an optional package (by its
    top-level module), None for any other module (a bug, not a missing extra)."""
    top = (error.name or "").split(".")[0]
    if top not in OPTIONAL_MODULES:
        return None
    package, extra = OPTIONAL_MODULES[top]
    return MissingDependencyError(package, extra=extra, purpose=purpose)


__all__ = ["OPTIONAL_MODULES", "REPORT_MODULES", "is_installed", "missing_dependency",
           "require_modules"]
