"""A child process (the scoring process, a Dask trial process) imports the parent's modules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import voicelab
from voicelab.runner._child import start_child

REPORT = ("import json, sys, voicelab\n"
          "from multiprocessing.connection import Connection\n"
          "Connection(int(sys.argv[1])).send_bytes(json.dumps(voicelab.__file__).encode())")


def test_a_child_started_in_a_folder_with_another_voicelab_imports_the_parents(tmp_path: Path,
                                                                               monkeypatch):
    shadow = tmp_path / "voicelab"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadowing copy was imported')\n")
    monkeypatch.chdir(tmp_path)
    process, connection = start_child(REPORT)
    try:
        imported = json.loads(connection.recv_bytes())
    finally:
        connection.close()
        process.wait(30)
    assert process.returncode == 0
    assert os.path.samefile(imported, voicelab.__file__)
