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

from .._standalone import run_standalone
from ._server import SipDouble


def main(argv: list[str] | None = None) -> int:
    return run_standalone(
        lambda settings, host, port, on_event: SipDouble(
            settings, host=host, port=port, on_event=on_event),
        name="sip_double", prog="python -m voicelab.doubles.sip",
        description="A SIP product double: an IVR and an agent.", address_key="uri", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
