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

from .._standalone import run_standalone
from ._bot import TwilioBot


def main(argv: list[str] | None = None) -> int:
    return run_standalone(
        lambda settings, host, port, on_event: TwilioBot(
            settings, host=host, port=port, on_event=on_event),
        name="twilio_bot", prog="python -m voicelab.doubles.twilio",
        description="A voice bot behind Twilio Media Streams.", address_key="uri", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
