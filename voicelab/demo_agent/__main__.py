"""Run the local demo agent as its own server.

    python -m voicelab.demo_agent --host 127.0.0.1 --port 8765 \
        --settings '{"audio_pacing": "realtime"}'

``--settings`` takes the agent's settings as JSON (or ``@path`` to a JSON file). Once
listening, one JSON line goes to stdout: ``{"uri": ..., "port": ..., "database_path": ...}``.
Connect with ``adapter: websocket`` and ``uri`` set to that URI; read outcomes with
``LocalAgentProbe({"database_path": ...})``. Stops on SIGINT or SIGTERM; a temporary database
is removed at exit, so probe before stopping it or pass ``--database-path`` to keep it.
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
from ._server import LocalAgent


def _settings(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("--settings must be a JSON object")
    return value


async def serve_until_stopped(agent: LocalAgent) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await agent.start()
    print(json.dumps({"uri": agent.uri, "port": agent.port,
                      "database_path": str(agent.database_path)}), flush=True)
    try:
        await stop.wait()
    finally:
        await agent.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.demo_agent",
                                     description="The voicelab local demo agent (protocol v1).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="agent settings as JSON, or @file.json")
    parser.add_argument("--database-path", help="SQLite file (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        agent = LocalAgent(_settings(args.settings), host=args.host, port=args.port,
                           database_path=args.database_path)
    except (ValueError, OSError, ConfigError) as error:
        print(f"demo_agent: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_until_stopped(agent))
    except OSError as error:
        print(f"demo_agent: cannot listen on {args.host}:{args.port}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
