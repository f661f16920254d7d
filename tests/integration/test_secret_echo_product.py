"""A product that echoes every credential it was sent: no artifact may hold any of them.

The secret-echo product is a protocol-v1 WebSocket server on 127.0.0.1. It reads the
credentials from the handshake the evaluator actually sent (the bearer token, an ordinary
header's value, the URI's query value and its user info), then echoes each one back as JSON
keys and values, percent-encoded, in base64 (alone, in a ``Basic`` credential, inside an
encoded JSON blob), in transcripts, tool-call arguments and results, messages of unknown types
and the close reason. The CLI runs a trial against it as a subprocess; then every file of the
bundle (binary included) and the process output are searched for every secret in every encoding.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.config import MASK

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
RUN = "run-secret-echo.yaml"

#: What the run's environment holds. None of the variable names except the token's looks
#: secret, so the headers and URI rules alone must protect the tenant, signature and login.
TOKEN = "tok/Echo+4d2f=9a"
TENANT = "ten-ANT/77+cd=q"          # an ordinary header (X-Tenant), not a secret-named one
SIGNATURE = "s1g-7Hq/z+9w"          # ?sig=..., written percent-encoded in the URI
LOGIN = "pw-Basic-5150x"            # ws://agent:<login>@host/
ENVIRON = {"VOICELAB_TEST_TOKEN": TOKEN, "VOICELAB_TEST_TENANT": TENANT,
           "VOICELAB_TEST_SIG": quote(SIGNATURE, safe=""), "VOICELAB_TEST_LOGIN": LOGIN}
SECRETS = [TOKEN, TENANT, SIGNATURE, quote(SIGNATURE, safe=""), LOGIN, f"agent:{LOGIN}"]

RUN_YAML = """\
scenario_path: scenario-workload-neutral-voice.yaml
persona_path: persona-workload-neutral-voice.yaml
data_path: data-workload-neutral-voice.yaml
script_path: script-workload-neutral-voice.yaml
persona_mode: scripted
speech_provider: tone
trial_seed: 5
pace_audio: false
endpoint:
  adapter: websocket
  settings:
    uri: ws://agent:${{VOICELAB_TEST_LOGIN}}@127.0.0.1:{port}/voice?sig=${{VOICELAB_TEST_SIG}}&model=echo-1
    access_token: ${{VOICELAB_TEST_TOKEN}}
    headers:
      X-Tenant: ${{VOICELAB_TEST_TENANT}}
    receive_timeout_seconds: 10
"""


# --- the secret-echo product --------------------------------------------------------------------

def b64(text: str, *, url_safe: bool = False, padded: bool = True) -> str:
    encode = base64.urlsafe_b64encode if url_safe else base64.b64encode
    encoded = encode(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


def lowercase_hex(percent_encoded: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda match: match.group(0).lower(), percent_encoded)


def echoes(secret: str) -> dict:
    """``secret`` as a key and a value in every encoding the product uses."""
    return {
        secret: secret,
        quote(secret, safe=""): quote_plus(secret),
        b64(secret): b64(secret, url_safe=True, padded=False),
        "basic": f"Basic {b64('someone:' + secret)}",
        "blob": b64(json.dumps({"token": secret, "n": 1}), url_safe=True),
        "lower": lowercase_hex(quote(secret, safe="")),
        "sentence": f"you sent {secret} ({b64(secret, padded=False)}, {quote(secret)})",
    }


def handshake_secrets(ws: ServerConnection) -> list[str]:
    """The credentials as the product received them (not the test's constants)."""
    headers = ws.request.headers
    found = [headers["X-Tenant"]]
    for value in headers.get_all("Authorization"):
        scheme, _, credential = value.partition(" ")
        found.append(credential if scheme == "Bearer"
                     else base64.b64decode(credential).decode())  # Basic: "agent:<login>"
    found += [value for _, value in parse_qsl(urlsplit(ws.request.path).query)]
    return found


def pcm_frames(seconds: float) -> list[bytes]:
    samples = (3000 * np.sin(2 * np.pi * 220 * np.arange(int(seconds * 24_000)) / 24_000))
    data = samples.astype("<i2").tobytes()
    return [data[i:i + 4_800] for i in range(0, len(data), 4_800)]


async def respond(ws: ServerConnection, secrets: list[str], response_id: str, *,
                  closing: bool) -> None:
    everything = {f"s{index}": echoes(secret) for index, secret in enumerate(secrets)}
    sentence = " ".join(echoes(secret)["sentence"] for secret in secrets)
    if closing:
        await ws.send(json.dumps({"type": "conversation.item.input_audio_transcription.completed",
                                  "transcript": f"I heard {sentence}"}))
        call_id = f"call-{secrets[0]}"
        await ws.send(json.dumps({"type": "response.function_call_arguments.done",
                                  "response_id": response_id, "call_id": call_id,
                                  "name": "save_reminder", "arguments": json.dumps(everything)}))
        await ws.send(json.dumps({"type": "tool.result", "call_id": call_id,
                                  "output": everything}))
    await ws.send(json.dumps({"type": "secret.echo", "echo": everything, **everything["s0"]}))
    await ws.send(json.dumps({"type": secrets[0], "note": "a type named by a secret"}))
    for frame in pcm_frames(0.4):
        await ws.send(frame)
    await ws.send(json.dumps({"type": "response.output_audio_transcript.done",
                              "response_id": response_id,
                              "transcript": f"plan recorded, reminder saved. {sentence}"}))
    await ws.send(json.dumps({"type": "response.done", "echo": everything,
                              "response": {"id": response_id, "status": "completed"}}))
    if closing:
        await ws.send(json.dumps({"type": "conversation.completed", "echo": everything}))


async def secret_echo_product(ws: ServerConnection) -> None:
    secrets = handshake_secrets(ws)
    with contextlib.suppress(ConnectionClosed):
        init = json.loads(await ws.recv())
        assert init["type"] == "evaluator.init"
        await respond(ws, secrets, "resp_1", closing=False)  # the product speaks first
        async for message in ws:
            if isinstance(message, str) and json.loads(message)["type"] == "response.create":
                await respond(ws, secrets, "resp_2", closing=True)
                await ws.close(1000, f"bye {secrets[1]}"[:120])
                return


# --- what must not be found -------------------------------------------------------------------

def forbidden_forms(secret: str) -> set[bytes]:
    forms = {secret, quote(secret), quote(secret, safe=""), quote_plus(secret),
             lowercase_hex(quote(secret, safe="")), json.dumps(secret)[1:-1],
             b64(secret), b64(secret, padded=False), b64(secret, url_safe=True),
             b64(secret, url_safe=True, padded=False)}
    return {form.encode() for form in forms}


def base64_hides(secret: str, content: bytes) -> bool:
    """Whether ``secret`` decodes out of any base64 run in ``content``, at any offset."""
    raw = secret.encode()
    for run in _base64_runs(content.replace(b"-", b"+").replace(b"_", b"/")):
        for offset in range(4):
            chunk = run[offset:]
            if len(chunk) % 4 == 1:
                chunk = chunk[:-1]
            chunk += b"=" * (-len(chunk) % 4)
            with contextlib.suppress(binascii.Error, ValueError):
                if raw in base64.b64decode(chunk):
                    return True
    return False


def _base64_runs(content: bytes) -> list[bytes]:
    alphabet = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    runs, start = [], None
    for index, byte in enumerate(content + b" "):
        if byte in alphabet:
            start = index if start is None else start
        elif start is not None:
            if index - start >= 8:
                runs.append(content[start:index])
            start = None
    return runs


def leaks(content: bytes) -> list[str]:
    found = []
    for secret in SECRETS:
        found += [f"{secret!r} as {form!r}" for form in forbidden_forms(secret) if form in content]
        if base64_hides(secret, content):
            found.append(f"{secret!r} inside base64")
    return found


# --- the run ----------------------------------------------------------------------------------

def test_no_configured_secret_reaches_any_artifact_in_any_encoding(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    artifacts = tmp_path / "artifacts"

    async def scenario() -> tuple[int, int, bytes, bytes]:
        async with serve(secret_echo_product, "127.0.0.1", 0, compression=None) as server:
            port = server.sockets[0].getsockname()[1]
            (folder / RUN).write_text(RUN_YAML.format(port=port))
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "voicelab", "run", RUN, "--artifacts-dir", str(artifacts),
                "--quiet", cwd=folder, env={**os.environ, **ENVIRON},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
            return port, process.returncode, stdout, stderr

    port, code, stdout, stderr = asyncio.run(scenario())
    bundles = [path for path in artifacts.iterdir() if path.is_dir() and not path.is_symlink()]
    assert len(bundles) == 1, stderr.decode()
    bundle = bundles[0]
    report = json.loads((bundle / "run-report.json").read_text())
    assert code in (0, 3) and report["trials"], (code, stderr.decode()[-3000:])

    # the product really echoed: each place the echoes go holds masks
    trial = bundle / "trial-001"
    assert json.loads((trial / "trial-report.json").read_text())["execution_status"] == "succeeded"
    for name in ("transcript.json", "tool-calls.json", "raw-endpoint-events.json",
                 "voice-events.jsonl", "interoperability.json"):
        assert MASK in (trial / name).read_text(), name
    raw_types = [event["type"] for event in
                 json.loads((trial / "raw-endpoint-events.json").read_text())["events"]]
    assert "raw" in raw_types and "tool_call" in raw_types and "input_transcript" in raw_types
    assert (bundle / "evaluator.log").stat().st_size > 0

    files = [path for path in bundle.rglob("*") if path.is_file()]
    assert len(files) > 15
    found = {str(path.relative_to(bundle)): leaks(path.read_bytes()) for path in files}
    found["stdout"], found["stderr"] = leaks(stdout), leaks(stderr)
    assert {name: hits for name, hits in found.items() if hits} == {}

    # masked where they are configured, the public query parameter kept
    settings = json.loads((trial / "resolved-settings.json").read_text())["resolved"]
    assert settings["endpoint"]["settings"]["uri"] == (
        f"ws://{MASK}@127.0.0.1:{port}/voice?sig={MASK}&model=echo-1")
    assert settings["endpoint"]["settings"]["headers"] == {"X-Tenant": MASK}
