"""The life of the HTTP service doubles (Azure TTS, Azure Blob): a ``ThreadingHTTPServer`` on a
free port of 127.0.0.1, served from a daemon thread; ``start``/``stop``, a context manager, the
port. Each double gives its request handler class and its thread's name."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class DoubleHTTPServer(ThreadingHTTPServer):
    """A double's server: the handler reaches the double as ``self.server.owner`` (a double's
    server class names the double's own type)."""

    daemon_threads = True
    owner: ThreadedHttpDouble


class ThreadedHttpDouble:
    """Start and stop a double's HTTP server on 127.0.0.1 (port 0: a free one)."""

    #: the request handler class and the server class (a subclass may refine the server)
    handler: type[BaseHTTPRequestHandler]
    server_class: type[DoubleHTTPServer] = DoubleHTTPServer
    #: the serving thread's name
    thread_name = "http-double"

    _server: DoubleHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not started")
        return int(self._server.server_address[1])

    def start(self) -> Self:
        if self._server is None:
            server = self.server_class(("127.0.0.1", 0), self.handler)
            server.owner = self
            self._server = server
            self._thread = threading.Thread(target=server.serve_forever,
                                            kwargs={"poll_interval": 0.05},
                                            name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
