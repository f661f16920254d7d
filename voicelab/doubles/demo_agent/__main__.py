"""Run the local demo agent as its own server.

    python -m voicelab.doubles.demo_agent --host 127.0.0.1 --port 8765 \
        --settings '{"audio_pacing": "realtime"}'

``--settings`` takes the agent's settings as JSON (or ``@path`` to a JSON file). Once
listening, one JSON line goes to stdout: ``{"uri": ..., "port": ..., "database_path": ...}``.
Connect with ``adapter: websocket`` and ``uri`` set to that URI; read outcomes with
``LocalAgentProbe({"database_path": ...})``. Stops on SIGINT or SIGTERM; a temporary database
is removed at exit, so probe before stopping it or pass ``--database-path`` to keep it.
"""

from __future__ import annotations

from ..product import serve_product_main
from ._server import LocalAgent


def main(argv: list[str] | None = None) -> int:
    return serve_product_main(argv, product=LocalAgent, name="demo_agent",
                              prog="python -m voicelab.doubles.demo_agent",
                              description="The voicelab local demo agent (protocol v1).",
                              settings_help="agent settings as JSON, or @file.json",
                              database_path_option=True)


if __name__ == "__main__":
    raise SystemExit(main())
