"""The error types library code raises; only the CLI turns them into exit codes.

Every configuration-side error renders as one line: ``file: key.path: message``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "os_reason",
    "AudioFileError",
    "ConfigError",
    "ExecutionError",
    "MissingDependencyError",
    "VoicelabError",
]


class VoicelabError(Exception):
    """Base of every error voicelab raises on purpose."""


class ConfigError(VoicelabError):
    """A configuration, asset or override problem: the CLI exits 2.

    ``source`` names where the problem is (a file path, ``--set key=value`` or
    ``CLI``) and ``key`` the dotted key path inside it, when there is one.
    """

    def __init__(self, message: str, *, source: str | Path | None = None, key: str | None = None):
        self.message = message
        self.source = str(source) if source is not None else None
        self.key = key or None
        super().__init__(self.one_line())

    def one_line(self) -> str:
        # a source or key can hold a line break too (a --set argument, a YAML key)
        parts = [" ".join(p.splitlines()) for p in (self.source, self.key) if p]
        text = " ".join(self.message.split())
        return ": ".join([*parts, text])


class AudioFileError(ConfigError):
    """An audio asset that is missing, empty, corrupt or in an unsupported format."""


class MissingDependencyError(ConfigError):
    """An optional package a run selected is not installed.

    The message is the exact ``pip install`` line that fixes it.
    """

    def __init__(self, package: str, *, extra: str, purpose: str, source: str | None = None,
                 key: str | None = None):
        self.package = package
        self.extra = extra
        message = (f"{purpose} needs the '{package}' package: "
                   f"pip install 'voicelab[{extra}]'")
        super().__init__(message, source=source, key=key)


class ExecutionError(VoicelabError):
    """A trial, provider or endpoint failed while executing: the CLI exits 4."""


def os_reason(error: BaseException) -> str | None:
    """The operating system's words for ``error`` (``strerror``: "Permission denied"), when it
    is an ``OSError`` that has them."""
    return error.strerror if isinstance(error, OSError) else None
