"""Run the Twilio bot as its own process (e.g. launched by a run's ``endpoint.launch``).

    python -m voicelab.doubles.twilio --port 8765 --settings '{"barge_in": false}'

``--settings`` takes :class:`~voicelab.doubles.twilio.TwilioBotSettings` as JSON (or ``@path``
to a JSON file). Once listening, one JSON line goes to stdout: ``{"uri": ..., "port": ...}``;
then one JSON line per thing the bot did (``call_started`` with the ``customParameters``,
``caller_speech_ended``, ``reply_sent`` with its send stamps, ``mark_echoed``, ``clear``,
``dtmf``, ``stop``, ``hang_up``, ``violation``, ``call_ended``), each with ``ns``, the bot's
``time.perf_counter_ns``. Stops on SIGINT or SIGTERM. Exit codes: 0 stopped, 1 cannot listen,
2 bad settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from ...errors import ConfigError
from .._json import JsonObject
from ..product._main import settings_argument
from ._bot import TwilioBot

NAME = "twilio_bot"


def _print_line(entry: JsonObject) -> None:
    print(json.dumps(entry), flush=True)


async def _serve(bot: TwilioBot) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await bot.start()
    _print_line({"uri": bot.uri, "port": bot.port})
    try:
        await stop.wait()
    finally:
        await bot.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.doubles.twilio",
                                     description="A voice bot behind Twilio Media Streams.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="bot settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        bot = TwilioBot(settings_argument(args.settings), host=args.host, port=args.port,
                        on_event=_print_line)
    except (ValueError, OSError, ConfigError) as error:
        print(f"{NAME}: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(bot))
    except OSError as error:
        print(f"{NAME}: cannot listen on {args.host}:{args.port}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
