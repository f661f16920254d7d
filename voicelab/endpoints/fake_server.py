"""Run the fake product as its own process, e.g. for benchmarks.

    python -m voicelab.endpoints.fake_server --host 127.0.0.1 --port 8765 \
        --settings '{"audio_pacing": "realtime"}'

``--settings`` takes the fake's behaviour settings as JSON (or ``@path`` to a JSON file). Once
listening, one JSON line goes to stdout: ``{"uri": ..., "port": ..., "database_path": ...}``.
Connect with ``adapter: websocket`` and ``uri`` set to that URI; read outcomes with
``FakeProductProbe({"database_path": ...})``. Stops on SIGINT or SIGTERM; a temporary
database is removed at exit, so probe before stopping it or pass ``database_path`` to keep it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._fake_product import FakeProduct


def _settings(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("--settings must be a JSON object")
    return value


async def serve_until_stopped(product: FakeProduct) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await product.start()
    print(json.dumps({"uri": product.uri, "port": product.port,
                      "database_path": str(product.database_path)}), flush=True)
    try:
        await stop.wait()
    finally:
        await product.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.endpoints.fake_server",
                                     description="The voicelab fake product (protocol v1).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="behaviour settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        product = FakeProduct(_settings(args.settings), host=args.host, port=args.port)
    except (ValueError, OSError, ConfigError) as error:
        print(f"fake_server: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_until_stopped(product))
    except OSError as error:
        print(f"fake_server: cannot listen on {args.host}:{args.port}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
