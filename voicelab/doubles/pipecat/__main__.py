"""Run the pipecat-protocol bot as its own process (e.g. launched by ``endpoint.launch``).

    python -m voicelab.doubles.pipecat --port 8765 --settings '{"greeting": ""}'

``--settings`` takes the bot's settings as JSON (or ``@path`` to a JSON file). Once listening,
one JSON line goes to stdout: ``{"uri": ..., "port": ...}``. Stops on SIGINT or SIGTERM.
Exit codes: 0 stopped, 1 cannot listen, 2 bad settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from ...errors import ConfigError
from ..product._main import settings_argument
from ._bot import PipecatBot


async def serve(bot: PipecatBot) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await bot.start()
    print(json.dumps({"uri": bot.uri, "port": bot.port}), flush=True)
    try:
        await stop.wait()
    finally:
        await bot.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.doubles.pipecat",
                                     description="A pipecat-protocol bot (protobuf frames).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="bot settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        bot = PipecatBot(settings_argument(args.settings), host=args.host, port=args.port)
    except (ValueError, OSError, ConfigError) as error:
        print(f"pipecat_bot: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(bot))
    except OSError as error:
        print(f"pipecat_bot: cannot listen on {args.host}:{args.port}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
