"""``endpoint.launch``: how voicelab starts the product process itself before a trial or a run.

The model only validates what is written; starting, watching and stopping the process is
``voicelab.endpoints``' job (``ProductProcess``). ``cwd`` is kept as written: it is relative to
the run file, which the loader (or ``ProductProcess(base_dir=...)``) resolves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ._base import StrictModel

__all__ = ["LaunchConfig"]

#: a finite duration: ``.inf`` would turn a hang guard into a hang
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def _text(value: object) -> Any:
    """YAML reads ``--port 8080`` or ``PORT: 8080`` as numbers; a command line is text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


class LaunchConfig(StrictModel):
    """The product's start command, its readiness line and its stop sequence.

    ``{port}`` in ``command`` or an ``env`` value (and in ``endpoint.settings``) stands for a free
    TCP port on 127.0.0.1 chosen at launch; ``{{port}}`` is a literal ``{port}``.
    """

    #: argv, run without a shell; argv[0] is looked up on PATH (or relative to ``cwd``)
    command: Annotated[list[str], Field(min_length=1)]
    #: a regular expression searched in each line of stdout and stderr (uvicorn logs to stderr);
    #: the first match means "ready". Each line gets at most a quarter of a second of matching
    #: time: a pattern that backtracks catastrophically fails the launch, never hangs it
    ready_pattern: Annotated[str, Field(min_length=1)]
    #: a fresh process for every trial, or one for the whole run
    per: Literal["trial", "run"] = "trial"
    #: for the ready line, and then for the product to accept a connection on its port (a
    #: refused connection is retried while the server binds)
    ready_timeout_seconds: Seconds = 30.0
    #: SIGTERM, then this long for the process group to exit, then SIGKILL
    stop_grace_seconds: Seconds = 5.0
    #: added to (and overriding) the evaluator's own environment
    env: dict[str, str] = Field(default_factory=dict)
    #: names in ``env`` whose values are secrets whatever the name (masked in every artifact,
    #: log and message, like values under names that look secret and the argument after a
    #: ``--token``/``--api-key``-like flag in ``command``)
    secret_env: list[str] = Field(default_factory=list)
    cwd: Path | None = None

    @field_validator("command", mode="before")
    @classmethod
    def _command_is_text(cls, value: object) -> Any:
        return [_text(item) for item in value] if isinstance(value, list) else value

    @field_validator("command")
    @classmethod
    def _command_is_runnable(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("the program (the first item) is empty")
        if any("\0" in item for item in command):
            raise ValueError("an argument contains a NUL character")
        return command

    @field_validator("ready_pattern")
    @classmethod
    def _ready_pattern_compiles(cls, pattern: str) -> str:
        import regex

        try:
            regex.compile(pattern)
        except regex.error as error:
            raise ValueError(f"not a valid regular expression: {error}") from None
        return pattern

    @field_validator("env", mode="before")
    @classmethod
    def _env_is_text(cls, value: object) -> Any:
        if isinstance(value, dict):
            return {key: _text(item) for key, item in value.items()}
        return value

    @field_validator("env")
    @classmethod
    def _env_names_are_valid(cls, env: dict[str, str]) -> dict[str, str]:
        for name, item in env.items():
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if "\0" in item:
                raise ValueError(f"the value of {name} contains a NUL character")
        return env

    @property
    def ready_regex(self) -> Any:
        """The compiled ``ready_pattern`` (the ``regex`` module's, so matching can time out)."""
        import regex

        return regex.compile(self.ready_pattern)
