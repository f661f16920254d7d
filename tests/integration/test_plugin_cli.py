"""`voice-evaluator validate` of a run naming an adapter an installed distribution registers
(entry-point group ``voicelab.adapters``): exit 0; the same plug-in broken, exit 2, one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
SEED = REPO / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"

PHONE_ADAPTER = '''
class PhoneAdapter:
    capabilities = {"streaming_input": True, "streaming_output": True}

    def __init__(self, settings, context): ...
    async def connect(self): ...
    async def send_audio(self, audio): ...
    async def commit_turn(self): ...
    async def events(self):
        if False:
            yield
    async def interrupt(self): ...
    async def close(self): ...
'''


def cli() -> list[str]:
    script = Path(sys.executable).parent / "voice-evaluator"
    return [str(script)] if script.exists() else [sys.executable, "-m", "voicelab"]


def installed_plugin(site: Path, module_text: str) -> Path:
    """The distribution ``acme-voice``, registering ``acme_phone``, as pip installs it."""
    info = site / "acme_voice-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-voice\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[voicelab.adapters]\nacme_phone = acme_voice_plugin:PhoneAdapter\n")
    (site / "acme_voice_plugin.py").write_text(module_text)
    return site


def validate_with(tmp_path: Path, module_text: str) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite"
    shutil.copytree(SEED, suite, ignore=shutil.ignore_patterns("__pycache__"))
    site = installed_plugin(tmp_path / "site-packages", module_text)
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("VOICE_AGENT_", "AZURE_OPENAI_"))}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([*cli(), "validate", RUN, "--set", "endpoint.adapter=acme_phone"],
                          cwd=suite, capture_output=True, text=True, env=environment,
                          timeout=60)


def test_a_run_naming_an_installed_plug_in_adapter_is_valid(tmp_path: Path) -> None:
    completed = validate_with(tmp_path, PHONE_ADAPTER)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0] == f"{RUN}: valid"


@pytest.mark.parametrize("module_text", [
    "raise RuntimeError('the licence file is missing')\n",
    "import acme_sdk_that_is_not_installed\n",
])
def test_a_broken_plug_in_exits_2_with_one_line_naming_it(tmp_path: Path,
                                                           module_text: str) -> None:
    completed = validate_with(tmp_path, module_text)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("voice-evaluator: error: ")
    assert f"{RUN}: endpoint.adapter: " in lines[0] and "'acme-voice'" in lines[0]
