"""Run the WebRTC bot as its own process (e.g. launched by a run's ``endpoint.launch``).

    python -m voicelab.doubles.webrtc --port 7860 --settings '{"rtvi": true}'

``--settings`` takes :class:`~voicelab.doubles.webrtc.WebRtcBotSettings` as JSON (or ``@path``
to a JSON file). Once listening, one JSON line goes to stdout: ``{"url": ..., "port": ...}``;
then one JSON line per thing the bot did (``call_started``, ``media_started``,
``caller_speech_started``, ``caller_speech_ended``, ``reply_sent`` with its RTP send stamps,
``reply_stopped``, ``connection_state``, ``hang_up``, ``whip_deleted``, ``call_ended``), each
with ``ns``, the bot's ``time.perf_counter_ns``. Stops on SIGINT or SIGTERM. Exit codes: 0
stopped, 1 cannot listen, 2 bad settings.
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
from ._bot import WebRtcBot

NAME = "webrtc_bot"


def _print_line(entry: JsonObject) -> None:
    print(json.dumps(entry), flush=True)


async def _serve(bot: WebRtcBot) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    url = await bot.start()
    _print_line({"url": url, "port": int(url.rsplit(":", 1)[1])})
    try:
        await stop.wait()
    finally:
        await bot.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.doubles.webrtc",
                                     description="A voice bot served over WebRTC.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="bot settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        bot = WebRtcBot(settings_argument(args.settings), host=args.host, port=args.port,
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
