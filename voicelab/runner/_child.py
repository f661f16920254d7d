"""A Python child process on a socket pair (the scoring process, a Dask worker's trial process).

A plain ``python -c`` subprocess, not a :mod:`multiprocessing` child: spawning one re-runs the
caller's main script unless it is guarded by ``if __name__ == "__main__"`` (a script calling
``voicelab.run`` need not be), and a Dask nanny's daemonic worker may not have multiprocessing
children at all.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterable
from multiprocessing.connection import Connection


def start_child(command: str, *, drop_environment: Iterable[str] = ()
                ) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start ``python -c command FD``; the parent's end of the socket ``FD`` as a connection.

    The child imports what the parent imports: its import path is the parent's (a process
    started with PYTHONPATH or from a folder of plug-ins finds the same modules), and only that:
    ``-P`` keeps ``python -c`` from putting the working directory first, where another copy of
    a package (a checkout the user stands in) would shadow the parent's."""
    dropped = set(drop_environment)
    environment = {name: value for name, value in os.environ.items() if name not in dropped}
    environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", command, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=environment, stdin=subprocess.DEVNULL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, Connection(ours.detach())
