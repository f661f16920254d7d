"""`voice-evaluator validate` as a subprocess: exit 0 with a summary, or exit 2 with one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml

from voicelab.audio import PcmAudio, wav_bytes, write_wav

REPO = Path(__file__).parents[2]
SEED = REPO / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"
SCENARIO = "scenario-workload-neutral-voice.yaml"
PERSONA = "persona-workload-neutral-voice.yaml"
SCRIPT = "script-workload-neutral-voice.yaml"
SECRET = "sk-live-7f3a9c2e51b04d"


def cli() -> list[str]:
    script = Path(sys.executable).parent / "voice-evaluator"
    return [str(script)] if script.exists() else [sys.executable, "-m", "voicelab"]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.splitlines()


def validate(folder: Path, run_file: str = RUN, *options: str,
             environ: dict[str, str] | None = None) -> Outcome:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("VOICE_AGENT_", "AZURE_OPENAI_"))}
    environment.update(environ or {})
    completed = subprocess.run([*cli(), "validate", run_file, *options], cwd=folder,
                               capture_output=True, text=True, env=environment, timeout=60)
    return Outcome(completed.returncode, completed.stdout, completed.stderr)


def edit_yaml(path: Path, **changes: object) -> None:
    document = yaml.safe_load(path.read_text())
    document.update(changes)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def seed_folder(folder: Path) -> Path:
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def with_environment(folder: Path) -> Path:
    """The seed's environment snippet beside the run, with its audio generated."""
    shutil.copy(SEED / "environment-seed.yaml", folder / "environment.yaml")
    rng = np.random.default_rng(0)
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav"):
        write_wav(folder / "audio" / name,
                  PcmAudio(rng.integers(-3_000, 3_000, 4_800).astype(np.int16)))
    edit_yaml(folder / RUN, environment_path="environment.yaml")
    return folder


ADAPTER_MODULE = '''
class Base:
    async def connect(self): ...
    async def send_audio(self, audio): ...
    async def commit_turn(self): ...
    async def events(self):
        if False:
            yield
    async def interrupt(self): ...
    async def close(self): ...


class Batch(Base):
    capabilities = {"streaming_input": False, "streaming_output": False}


class NoSend:
    capabilities = {"streaming_input": True, "streaming_output": True}
    async def connect(self): ...
'''


# --- the error cases: each exits 2 with one line naming the file and the key path ------------

def setup_missing_run_file(folder: Path) -> tuple[str, list[str]]:
    return "missing-run.yaml", []


def setup_missing_referenced_file(folder: Path) -> tuple[str, list[str]]:
    edit_yaml(folder / RUN, scenario_path="scenarios/nope.yaml")
    return RUN, []


def setup_yaml_syntax_error(folder: Path) -> tuple[str, list[str]]:
    (folder / PERSONA).write_text("name: Jordan\nsession_behavior: {conclude_quickly: true\n")
    return RUN, []


def setup_unknown_key(folder: Path) -> tuple[str, list[str]]:
    path = folder / SCENARIO
    path.write_text(path.read_text().replace("  max_turns: 4\n  required", "  max_turnz: 4\n"
                                             "  required"))
    return RUN, []


def setup_wrong_type(folder: Path) -> tuple[str, list[str]]:
    path = folder / SCRIPT
    path.write_text(path.read_text().replace("post_script_completion_wait_seconds: 0",
                                             "post_script_completion_wait_seconds: soon"))
    return RUN, []


def setup_missing_environment_variable(folder: Path) -> tuple[str, list[str]]:
    return "run-custom-adapter.yaml", []  # VOICE_AGENT_URL is not set


def setup_bad_set_unknown_key(folder: Path) -> tuple[str, list[str]]:
    return RUN, ["--set", "scenario.eval_spec.limits.max_turnz=3"]


def setup_bad_set_wrong_type(folder: Path) -> tuple[str, list[str]]:
    return RUN, ["--set", "trials=several"]


def setup_corrupt_audio(folder: Path) -> tuple[str, list[str]]:
    with_environment(folder)
    (folder / "audio" / "office-hum.wav").write_bytes(b"RIFF\x00\x10\x00\x00WAVEjunkjunkjunk")
    return RUN, []


def setup_empty_audio(folder: Path) -> tuple[str, list[str]]:
    with_environment(folder)
    (folder / "audio" / "door-close.wav").write_bytes(b"")
    return RUN, []


def setup_truncated_audio(folder: Path) -> tuple[str, list[str]]:
    with_environment(folder)
    content = wav_bytes(PcmAudio(np.full(4_800, 1_000, dtype=np.int16)))
    (folder / "audio" / "distant-conversation.wav").write_bytes(content[:2_000])
    return RUN, []


def setup_unsupported_audio(folder: Path) -> tuple[str, list[str]]:
    with_environment(folder)
    mp3 = folder / "audio" / "door-close.mp3"
    if "MPEG_LAYER_III" in soundfile.available_subtypes("MP3"):
        soundfile.write(mp3, np.zeros(2_400), 24_000, format="MP3")
    else:
        mp3.write_text("not audio at all\n")
    path = folder / "environment.yaml"
    path.write_text(path.read_text().replace("audio/door-close.wav", "audio/door-close.mp3"))
    return RUN, []


def setup_corrupt_script_audio(folder: Path) -> tuple[str, list[str]]:
    (folder / "hello.wav").write_text("hello")
    path = folder / SCRIPT
    path.write_text(path.read_text() + "  - audio_path: hello.wav\n")
    return RUN, []


def setup_unimportable_adapter(folder: Path) -> tuple[str, list[str]]:
    return RUN, ["--set", "endpoint.adapter=no_such_package.adapters.Voice"]


def setup_adapter_missing_methods(folder: Path) -> tuple[str, list[str]]:
    (folder / "lab_adapters.py").write_text(ADAPTER_MODULE)
    return RUN, ["--set", "endpoint.adapter=lab_adapters.NoSend"]


def setup_capability_mismatch(folder: Path) -> tuple[str, list[str]]:
    (folder / "lab_adapters.py").write_text(ADAPTER_MODULE)
    return RUN, ["--set", "endpoint.adapter=lab_adapters.Batch"]


def setup_unimportable_probe(folder: Path) -> tuple[str, list[str]]:
    return RUN, ["--set", "outcome_probe={probe: my_voice_eval.probes.Missing}"]


def setup_unknown_persona_mode(folder: Path) -> tuple[str, list[str]]:
    return RUN, ["--set", "persona_mode=telepathic"]


def setup_secret_in_bad_value(folder: Path) -> tuple[str, list[str]]:
    edit_yaml(folder / RUN, trial_seed="${VOICE_AGENT_ACCESS_TOKEN}")
    return RUN, []


#: case -> (set-up, file named in the line, key path named in the line, other words expected)
ERROR_CASES = {
    "missing run file": (setup_missing_run_file, "missing-run.yaml", None, "not found"),
    "missing referenced file": (setup_missing_referenced_file, RUN, "scenario_path",
                                "scenarios/nope.yaml"),
    "yaml syntax error": (setup_yaml_syntax_error, PERSONA, None, "line 3"),
    "unknown key": (setup_unknown_key, SCENARIO, "conversation.max_turnz", "unknown key"),
    "wrong type": (setup_wrong_type, SCRIPT, "post_script_completion_wait_seconds", "number"),
    "missing environment variable": (setup_missing_environment_variable,
                                     "run-custom-adapter.yaml", "endpoint.settings.uri",
                                     "VOICE_AGENT_URL"),
    "bad --set unknown key": (setup_bad_set_unknown_key, SCENARIO,
                              "eval_spec.limits.max_turnz", "--set"),
    "bad --set wrong type": (setup_bad_set_wrong_type, RUN, "trials", "--set trials=several"),
    "corrupt audio": (setup_corrupt_audio, "environment.yaml", "base_noise", "office-hum.wav"),
    "empty audio": (setup_empty_audio, "environment.yaml", "transient_events[0].type", "empty"),
    "truncated audio": (setup_truncated_audio, "environment.yaml", "background_voices",
                        "truncated"),
    "unsupported audio": (setup_unsupported_audio, "environment.yaml",
                          "transient_events[0].type", "door-close.mp3"),
    "corrupt script audio": (setup_corrupt_script_audio, SCRIPT, "turns[1].audio_path",
                             "hello.wav"),
    "unimportable adapter": (setup_unimportable_adapter, RUN, "endpoint.adapter",
                             "no_such_package"),
    "adapter missing methods": (setup_adapter_missing_methods, RUN, "endpoint.adapter",
                                "send_audio"),
    "capability mismatch": (setup_capability_mismatch, SCENARIO,
                            "conversation.required_capabilities", "streaming_input"),
    "unimportable outcome probe": (setup_unimportable_probe, RUN, "outcome_probe.probe",
                                   "my_voice_eval.probes.Missing"),
    "unknown persona mode": (setup_unknown_persona_mode, RUN, "persona_mode", "telepathic"),
    "secret in a bad value": (setup_secret_in_bad_value, RUN, "trial_seed", "***"),
}


@pytest.fixture(scope="module")
def error_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every error case run once, a few subprocesses at a time (they are independent)."""
    # made here, one after another: pytest's temporary folders are not made safely from threads
    # (the first mktemp of an xdist worker creates its base folder, and two threads race there)
    roots = {case: tmp_path_factory.mktemp("case") for case in ERROR_CASES}

    def run_case(case: str) -> Outcome:
        folder = seed_folder(roots[case] / "suite")
        run_file, options = ERROR_CASES[case][0](folder)
        environ = {"VOICE_AGENT_ACCESS_TOKEN": SECRET} if case == "secret in a bad value" else {}
        return validate(folder, run_file, *options, environ=environ)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(ERROR_CASES, pool.map(run_case, ERROR_CASES), strict=True))


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_bad_input_exits_2_with_one_line_naming_the_file_and_key(
        error_outcomes: dict[str, Outcome], case: str) -> None:
    outcome = error_outcomes[case]
    _, file_name, key, words = ERROR_CASES[case]
    assert outcome.code == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert len(outcome.error_lines) == 1, outcome.stderr
    line = outcome.error_lines[0]
    assert line.startswith("voice-evaluator: error: ")
    assert file_name in line
    if key is not None:
        assert f": {key}: " in line
    assert words in line
    assert SECRET not in line
    assert outcome.stdout == ""


# --- success ----------------------------------------------------------------------------------

def test_the_seed_example_is_valid(tmp_path: Path) -> None:
    folder = seed_folder(tmp_path / "suite")
    outcome = validate(folder)
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr == ""
    lines = outcome.stdout.splitlines()
    assert lines[0] == f"{RUN}: valid"
    summary = "\n".join(lines)
    assert "workload-neutral-voice-exchange" in summary
    assert "streaming_input" in summary and "suite hash sha256:" in summary


#: Runs ``voice-evaluator validate RUN`` in-process in a fresh interpreter whose sockets refuse
#: to connect, then lists the heavy modules that got imported.
GUARDED_VALIDATE = """
import socket, sys
def refuse(*args, **kwargs):
    raise SystemExit('network used: %r' % (args,))
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
from voicelab.cli import main
code = main(['validate', sys.argv[1]])
heavy = ('pandas', 'librosa', 'numba', 'scipy', 'openai', 'azure', 'matplotlib')
print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in heavy))
sys.exit(code)
"""


def guarded_validate(folder: Path, run_file: str, environ: dict[str, str]) -> Outcome:
    completed = subprocess.run([sys.executable, "-c", GUARDED_VALIDATE, run_file], cwd=folder,
                               capture_output=True, text=True, env={**os.environ, **environ},
                               timeout=60)
    return Outcome(completed.returncode, completed.stdout, completed.stderr)


def test_the_office_example_decodes_audio_offline_without_heavy_modules() -> None:
    outcome = guarded_validate(REPO, "examples/run-office-noise.yaml", {})
    assert outcome.code == 0, outcome.stderr  # a connection attempt would exit non-zero
    assert "office (5 audio asset(s) decoded)" in outcome.stdout
    assert outcome.stdout.splitlines()[-1] == "HEAVY []"


def test_the_seed_custom_adapter_and_quality_evaluation_validate_offline(tmp_path: Path) -> None:
    folder = seed_folder(tmp_path / "suite")
    environ = {"VOICE_AGENT_URL": "wss://agent.example/voice", "VOICE_AGENT_ACCESS_TOKEN": SECRET,
               "AZURE_OPENAI_ENDPOINT": "https://judge.example.openai.azure.com"}
    custom = guarded_validate(folder, "run-custom-adapter.yaml", environ)
    assert custom.code == 0, custom.stderr
    assert "my_voice_eval.adapters.ExistingVoiceServiceAdapter" in custom.stdout
    assert SECRET not in custom.stdout + custom.stderr
    assert custom.stdout.splitlines()[-1] == "HEAVY []"
    quality = validate(folder, "run-quality-evaluation.yaml", environ=environ)
    assert quality.code == 0, quality.stderr
    assert "no_unsupported_commitments (critical)" in quality.stdout
