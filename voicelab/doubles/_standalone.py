"""A bot double as its own process (``python -m voicelab.doubles.<wire>``), the same way for
every wire: ``--host``, ``--port`` (0: a free one) and ``--settings`` (JSON or ``@file``); once
it listens, one JSON line with its address and port, then one JSON line per thing it did (its
``on_event``); it stops on SIGINT or SIGTERM. Exit codes: 0 stopped, 1 cannot listen, 2 bad
settings."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Protocol

from pydantic import JsonValue

from ..errors import ConfigError
from ._json import JsonObject
from .product._main import settings_argument


class ServedDouble(Protocol):
    """What a bot double offers its process: start (returning its address), stop."""

    async def start(self) -> str: ...

    async def stop(self) -> None: ...


#: makes the double from its settings, host, port and event sink
DoubleFactory = Callable[[Mapping[str, JsonValue], str, int, Callable[[JsonObject], None]],
                         ServedDouble]


def print_line(entry: JsonObject) -> None:
    print(json.dumps(entry), flush=True)


def _port_of(address: str) -> int:
    """The port of ``ws://127.0.0.1:8765/``, ``http://127.0.0.1:8765`` or
    ``sip:agent@127.0.0.1:5070``."""
    return int(address.rsplit(":", 1)[1].split("/", 1)[0])


async def _serve(double: ServedDouble, address_key: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    address = await double.start()
    print_line({address_key: address, "port": _port_of(address)})
    try:
        await stop.wait()
    finally:
        await double.stop()


def run_standalone(make: DoubleFactory, *, name: str, prog: str, description: str,
                   address_key: str = "uri", argv: list[str] | None = None) -> int:
    """Parse the command line, make the double, serve it until a signal; the exit code."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="the double's settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        double = make(settings_argument(args.settings), args.host, args.port, print_line)
    except (ValueError, OSError, ConfigError) as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(double, address_key))
    except OSError as error:
        print(f"{name}: cannot listen on {args.host}:{args.port}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    return 0
