"""Run the fake product as its own process, e.g. for benchmarks.

    python -m voicelab.doubles.product --host 127.0.0.1 --port 8765 \
        --settings '{"audio_pacing": "realtime"}'

``--settings`` takes the fake's behaviour settings as JSON (or ``@path`` to a JSON file). Once
listening, one JSON line goes to stdout: ``{"uri": ..., "port": ..., "database_path": ...}``.
Connect with ``adapter: websocket`` and ``uri`` set to that URI; read outcomes with
``FakeProductProbe({"database_path": ...})``. Stops on SIGINT or SIGTERM; a temporary
database is removed at exit, so probe before stopping it or pass ``database_path`` to keep it.
"""

from __future__ import annotations

from ._fake_server import FakeProduct
from ._main import serve_product_main


def main(argv: list[str] | None = None) -> int:
    return serve_product_main(argv, product=FakeProduct, name="fake_product",
                              prog="python -m voicelab.doubles.product",
                              description="The voicelab fake product (protocol v1).",
                              settings_help="behaviour settings as JSON, or @file.json")


if __name__ == "__main__":
    raise SystemExit(main())
