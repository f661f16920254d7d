"""The parser, the dispatch to one module per command group, and errors as exit codes.

Library errors become one line on stderr and an exit code (see :mod:`voicelab._exit_codes`);
the traceback is one ``--debug`` away.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from .._exit_codes import EXIT_CONFIG, EXIT_EXECUTION, EXIT_INTERRUPTED, EXIT_OK
from .._extras import missing_dependency
from ..config import mask_known
from ..errors import ConfigError, ExecutionError, VoicelabError
from ._output import PROG, quiet_when_reader_leaves, relative
from ._parser import build_parser

#: Library keys that stand for a command-line option when the value came from the command line.
_OPTION_FOR_KEY = {"trials": "--trials", "concurrency": "--concurrency",
                   "artifacts_dir": "--artifacts-dir", "output": "--output",
                   "resume": "--resume",
                   "executor": "--executor", "workers": "--workers", "scheduler": "--scheduler",
                   "retry_inconclusive": "--retry-inconclusive", "turn_gap_ms": "--turn-gap-ms",
                   "max_cost": "--max-cost", "ramp_seconds": "--ramp",
                   "arrival_rate": "--arrival-rate", "max_concurrency": "--max-concurrency"}


def _error_line(error: BaseException) -> str:
    if isinstance(error, ConfigError):
        if error.source is None and error.key in _OPTION_FOR_KEY:
            error = ConfigError(error.message, source="CLI", key=_OPTION_FOR_KEY[error.key])
        line = error.one_line()
    else:
        line = " ".join(str(error).split()) or type(error).__name__
    # a store URL's credentials, wherever the message quotes the URL; a redacted run's words
    return relative(mask_known(line))


#: command -> (module of this package, function taking the parsed arguments). Imported when the
#: command runs, so `validate` does not pay for the runner's imports.
COMMANDS = {
    "validate": ("_validate", "validate_command"),
    "run": ("_run", "run_command"),
    "sweep": ("_run", "sweep_command"),
    "plan": ("_validate", "plan_command"),
    "report": ("_report", "report_command"),
    "rescore": ("_rescore", "rescore_command"),
    "compare": ("_compare", "compare_command"),
    "replay": ("_replay", "replay_command"),
    "ingest": ("_ingest", "ingest_command"),
    "init": ("_init", "init_command"),
    "check": ("_check", "check_command"),
}


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    module_name, function = COMMANDS[name]
    return getattr(importlib.import_module(f"{__package__}.{module_name}"), function)


class _ScrubbingFormatter(logging.Formatter):
    """Log lines with the secrets this process met masked (a store URL's credentials), and
    redacted as the bundle of a redacted run is."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_known(super().format(record))


class _OneLineFormatter(_ScrubbingFormatter):
    """Log lines without tracebacks (they are one ``--debug`` away, and in evaluator.log)."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text
        record.exc_info = record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text = saved


#: The loggers of store libraries that log their retries with tracebacks (gcsfs logs each
#: exhausted retry at ERROR): their failure reaches the user as one line of ours instead.
_STORE_LOGGERS = ("gcsfs", "s3fs", "adlfs", "fsspec", "aiobotocore", "botocore",
                  # the OTLP exporter logs every retry against a collector that is down; the
                  # run's one warning and its summary line say it instead
                  "opentelemetry")


def _configure_logging(debug: bool) -> None:
    if not debug:
        for name in _STORE_LOGGERS:
            store_logger = logging.getLogger(name)
            if not store_logger.handlers:  # no handler: Python's last resort prints them
                store_logger.addHandler(logging.NullHandler())
    logger = logging.getLogger("voicelab")
    if not any(getattr(h, "_voicelab_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        formatter = _ScrubbingFormatter if debug else _OneLineFormatter
        handler.setFormatter(formatter("%(levelname)s %(name)s: %(message)s"))
        handler._voicelab_cli = True  # type: ignore[attr-defined]
        handler.setLevel(logging.DEBUG if debug else logging.WARNING)
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exited:  # --help, or a usage error already printed in one line
        return exited.code if isinstance(exited.code, int) else EXIT_CONFIG
    if args.version:
        from .._version import __version__

        print(f"{PROG} {__version__}")
        return EXIT_OK
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_CONFIG
    _configure_logging(args.debug)
    with quiet_when_reader_leaves():
        return _run_command(args)


#: the commands that hold conversations: their process runs voicelab's loop of choice
CONVERSING_COMMANDS = frozenset({"run", "sweep", "replay", "check", "ingest"})


def _run_command(args: argparse.Namespace) -> int:
    policy = asyncio.get_event_loop_policy()
    try:
        command = _command(args.command)
        if args.command in CONVERSING_COMMANDS:
            from ..execution import use_chosen_event_loop

            use_chosen_event_loop()
        return command(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - every failure ends as one line and an exit code
        if args.debug:
            raise
        if isinstance(error, ModuleNotFoundError):  # an optional package not installed
            error = missing_dependency(error, purpose=args.command) or error
        if isinstance(error, ConfigError):
            print(f"{PROG}: error: {_error_line(error)}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(error, VoicelabError):
            label = "execution failed" if isinstance(error, ExecutionError) else "error"
            print(f"{PROG}: {label}: {_error_line(error)}", file=sys.stderr)
        else:  # a bug, not bad input: still one line, the traceback is one --debug away
            print(f"{PROG}: internal error: {type(error).__name__}: {_error_line(error)} "
                  f"(run with --debug for the traceback)", file=sys.stderr)
        return EXIT_EXECUTION
    finally:  # the loop of choice was the command's: a caller of main() keeps its own
        asyncio.set_event_loop_policy(policy)

