"""Run the SIP double as its own process (e.g. launched by a run's ``endpoint.launch``).

    python -m voicelab.doubles.sip --port 5070 --settings '{"mode": "agent"}'

``--settings`` takes :class:`~voicelab.doubles.sip.SipDoubleSettings` as JSON (or ``@path``
to a JSON file). Once listening (UDP and TCP on the same port), one JSON line goes to stdout:
``{"uri": "sip:agent@127.0.0.1:PORT", "port": PORT}``; then one JSON line per thing the
double did (``invite_received``, ``answered``, ``prompt_started``, ``prompt_stopped``,
``key_received``, ``caller_speech_ended``, ``reply_sent``, ``barge_in_stopped``,
``bye_sent``, ``bye_received``, ``violation``, ``call_ended``...), each with ``call`` and
``ns``, the double's ``time.perf_counter_ns``. Stops on SIGINT or SIGTERM. Exit codes: 0
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
from ._server import SipDouble

NAME = "sip_double"


def _print_line(entry: JsonObject) -> None:
    print(json.dumps(entry), flush=True)


async def _serve(double: SipDouble) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await double.start()
    _print_line({"uri": double.uri, "port": double.port})
    try:
        await stop.wait()
    finally:
        await double.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicelab.doubles.sip",
                                     description="A SIP product double: an IVR and an agent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--settings", help="double settings as JSON, or @file.json")
    args = parser.parse_args(argv)
    try:
        double = SipDouble(settings_argument(args.settings), host=args.host, port=args.port,
                           on_event=_print_line)
    except (ValueError, OSError, ConfigError) as error:
        print(f"{NAME}: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(double))
    except OSError as error:
        print(f"{NAME}: cannot listen on {args.host}:{args.port}: {error.strerror or error}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
