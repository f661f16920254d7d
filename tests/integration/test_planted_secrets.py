"""Secrets never reach an output: a unique secret is planted in a store URL (user info and a
query signature) and on a launch command line (after ``--api-key``, in ``--token=``, in an env
value declared secret), and every output is searched for it: stdout, stderr, JUnit XML and every
file of the bundle, as written, percent-encoded and in base64 at any alignment."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from voicelab.cli import main
from voicelab.config._secrets import encoded_forms

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"

STORE_USER = "planteduser7c1d"
STORE_SECRET = "pl4nted/st0re+s3cret=9f2e"
STORE_SIGNATURE = "plantedsig0a4b8e"
ARGUMENT_SECRET = "planted-argument-5d3c"
FLAG_SECRET = "planted-flag-value-7e21"
ENV_SECRET = "planted-env-value-b6f0"


def assert_clean(texts: dict[str, str], secrets: list[str]) -> None:
    """No secret as written, percent-encoded, JSON-escaped or in base64 (whole, or the part of
    its encoding that depends on the secret alone, at each of the three byte alignments)."""
    for where, text in texts.items():
        for secret in secrets:
            for form in encoded_forms(secret):
                assert form not in text, (where, form)


def bundle_texts(folder: Path) -> dict[str, str]:
    return {str(path): path.read_bytes().decode("utf-8", errors="replace")
            for path in folder.rglob("*") if path.is_file() and not path.is_symlink()}


@pytest.fixture()
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    return folder


def test_a_store_urls_credentials_reach_no_output(suite, tmp_path, capsys):
    import fsspec

    root = f"memory://{STORE_USER}:{quote(STORE_SECRET, safe='')}@store/runs?sig={STORE_SIGNATURE}"
    junit = tmp_path / "junit.xml"
    code = main(["run", str(suite / RUN), "--artifacts-dir", root, "--junit", str(junit),
                 "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "memory://***@store/runs?sig=***" in captured.out  # the bundle is named, masked
    memory = fsspec.filesystem("memory")
    stored = {path: memory.cat_file(path).decode("utf-8", errors="replace")
              for path in memory.find("/") if STORE_USER in path}
    assert any(path.endswith("run-report.json") for path in stored)
    texts = {"stdout": captured.out, "stderr": captured.err, "junit": junit.read_text(),
             **stored}
    assert_clean(texts, [STORE_SECRET, STORE_SIGNATURE])
    # a store error quoting the URL is masked too
    code = main(["rescore", root.replace("runs?", "missing?")])
    captured = capsys.readouterr()
    assert code == 2
    assert_clean({"stderr": captured.err, "stdout": captured.out},
                 [STORE_SECRET, STORE_SIGNATURE])


def _wrapped_product(*, exit_code: int | None) -> list[str]:
    """A shell that echoes its arguments and environment (as a careless product would) and
    then runs the protocol-v1 product double (or exits with ``exit_code``)."""
    tail = f"exit {exit_code}" if exit_code is not None else \
        'exec "$0" -m voicelab.doubles.product --port "$1"'
    script = f'echo "started with: $*"; echo "session: $SESSION_ARG" >&2; {tail}'
    return ["/bin/sh", "-c", script, sys.executable, "{port}", "--api-key", ARGUMENT_SECRET,
            f"--token={FLAG_SECRET}"]


@pytest.mark.parametrize("exit_code", [None, 3], ids=["runs", "fails-to-start"])
def test_a_launch_command_lines_secrets_reach_no_output(suite, tmp_path, capsys, exit_code):
    launch = {"command": _wrapped_product(exit_code=exit_code), "ready_pattern": '"uri"',
              "ready_timeout_seconds": 30, "env": {"SESSION_ARG": ENV_SECRET},
              "secret_env": ["SESSION_ARG"]}
    junit = tmp_path / "junit.xml"
    code = main(["run", str(suite / RUN), "--artifacts-dir", str(tmp_path / "runs"),
                 "--junit", str(junit), "--quiet",
                 "--set", "endpoint.adapter=websocket",
                 "--set", "endpoint.settings={uri: 'ws://127.0.0.1:{port}/'}",
                 "--set", f"endpoint.launch={json.dumps(launch)}"])
    captured = capsys.readouterr()
    assert code == (0 if exit_code is None else 4), captured.out + captured.err
    bundle = next(p.parent for p in (tmp_path / "runs").glob("*/run-report.json")
                  if p.parent.name != "latest")
    log = (bundle / "trial-001" / "product.log").read_text()
    assert "started with:" in log and "session: ***" in log  # kept, masked
    settings = json.loads((bundle / "trial-001" / "resolved-settings.json").read_text())
    assert "--api-key" in settings["resolved"]["endpoint"]["launch"]["command"]
    texts = {"stdout": captured.out, "stderr": captured.err, "junit": junit.read_text(),
             **bundle_texts(bundle)}
    assert_clean(texts, [ARGUMENT_SECRET, FLAG_SECRET, ENV_SECRET])
