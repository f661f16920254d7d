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

from .._standalone import run_standalone
from ._bot import WebRtcBot


def main(argv: list[str] | None = None) -> int:
    return run_standalone(
        lambda settings, host, port, on_event: WebRtcBot(
            settings, host=host, port=port, on_event=on_event),
        name="webrtc_bot", prog="python -m voicelab.doubles.webrtc",
        description="A voice bot served over WebRTC.", address_key="url", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
