"""The standalone entry of a local protocol-v1 product (``python -m ...``).

Once listening, one JSON line goes to stdout: ``{"uri": ..., "port": ..., "database_path": ...}``.
Stops on SIGINT or SIGTERM. Exit codes: 0 stopped, 1 cannot listen, 2 bad settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from pydantic import JsonValue

from ...errors import ConfigError
from ._server import ProductServer


class _ProductOptions(TypedDict, total=False):
    host: str
    port: int
    database_path: str | None


def settings_argument(text: str | None) -> dict[str, JsonValue]:
    """``--settings``: a JSON object, or ``@path`` to a JSON file holding one."""
    if not text:
        return {}
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("--settings must be a JSON object")
    return value


async def serve_until_stopped(product: ProductServer, *, announce_early: float = 0.0,
                              address: str = "") -> None:
    """Serve until SIGINT/SIGTERM. ``announce_early`` > 0: first log a uvicorn-style ready line
    to stderr, then bind that many seconds later (as servers that log before they bind do)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if announce_early > 0:
        print(f"INFO:     Uvicorn running on {address} (Press CTRL+C to quit)", file=sys.stderr,
              flush=True)
        await asyncio.sleep(announce_early)
    await product.start()
    print(json.dumps({"uri": product.uri, "port": product.port,
                      "database_path": str(product.database_path)}), flush=True)
    try:
        await stop.wait()
    finally:
        await product.stop()


def serve_product_main(argv: list[str] | None, *, product: Callable[..., ProductServer],
                       name: str, prog: str, description: str, settings_help: str,
                       database_path_option: bool = False) -> int:
    """Parse ``--host``, ``--port``, ``--settings`` (and ``--database-path`` when asked), build
    ``product(settings, host=, port=[, database_path=])`` and serve it until stopped. Errors
    are one line on stderr prefixed ``name:``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help=settings_help)
    parser.add_argument("--announce-early", type=float, default=0.0, metavar="SECONDS",
                        help="log a ready line to stderr this long before binding the port")
    if database_path_option:
        parser.add_argument("--database-path", help="SQLite file (default: a temporary one)")
    args = parser.parse_args(argv)
    options: _ProductOptions = {"host": args.host, "port": args.port}
    if database_path_option:
        options["database_path"] = args.database_path
    try:
        server = product(settings_argument(args.settings), **options)
    except (ValueError, OSError, ConfigError) as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_until_stopped(server, announce_early=args.announce_early,
                                        address=f"ws://{args.host}:{args.port}"))
    except OSError as error:
        print(f"{name}: cannot listen on {args.host}:{args.port}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    return 0
