"""Secrets are masked as mapping keys, in the encodings a product echoes them in, and wherever
the run file's handshake headers and URL credentials end up."""

from __future__ import annotations

import base64
import binascii
import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml

from voicelab.config import MASK, SecretScrubber, load_run, url_secret_values
from voicelab.config._secrets import PUBLIC_QUERY_PARAMETERS, mask_url
from voicelab.endpoints._settings import secret_values

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
#: Characters every encoding treats differently: '/', '+', '=', '&', ' ', '"', non-ASCII.
SECRET = 'tok/4d+2f=9a&b "q" é'
PLAIN = "tok-3f9a81c2e7"


def seed_run(tmp_path: Path) -> Path:
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / "run-workload-neutral-voice.yaml"


def set_endpoint(run_file: Path, settings: dict) -> None:
    document = yaml.safe_load(run_file.read_text())
    document["endpoint"] = {"adapter": "fake", "settings": settings}
    run_file.write_text(yaml.safe_dump(document, sort_keys=False))


def recoverable(secret: str, text: str) -> bool:
    """Whether ``secret``'s bytes decode out of any base64 run left in ``text``, at any offset."""
    raw = secret.encode()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
    runs, current = [], ""
    for char in text + " ":
        if char in alphabet:
            current += char
        else:
            runs.append(current)
            current = ""
    for run in runs:
        standard = run.replace("-", "+").replace("_", "/")
        for offset in range(4):
            chunk = standard[offset:]
            if len(chunk) % 4 == 1:
                chunk = chunk[:-1]
            chunk += "=" * (-len(chunk) % 4)
            try:
                if raw in base64.b64decode(chunk):
                    return True
            except (binascii.Error, ValueError):
                continue
    return False


# --- keys ---------------------------------------------------------------------------------------

def test_a_secret_used_as_a_key_is_masked_at_every_depth() -> None:
    scrubber = SecretScrubber([PLAIN])
    cleaned = scrubber.scrub({PLAIN: 1, "nested": [{f"id-{PLAIN}": PLAIN, "plain": "x"}]})
    assert cleaned == {MASK: 1, "nested": [{f"id-{MASK}": MASK, "plain": "x"}]}


def test_keys_that_mask_to_the_same_text_are_all_kept() -> None:
    scrubber = SecretScrubber([PLAIN, "second-value-77"])
    cleaned = scrubber.scrub({PLAIN: 1, "second-value-77": 2, MASK: 3})
    assert cleaned == {MASK: 1, f"{MASK} (2)": 2, f"{MASK} (3)": 3}


def test_a_secret_named_key_still_masks_its_value_and_non_string_keys_pass() -> None:
    scrubber = SecretScrubber([PLAIN])
    assert scrubber.scrub({"api_key": "short", 7: PLAIN, None: "x"}) == {
        "api_key": MASK, 7: MASK, None: "x"}


# --- encodings ----------------------------------------------------------------------------------

ENCODINGS = {
    "quote": quote(SECRET),
    "quote safe none": quote(SECRET, safe=""),
    "quote_plus": quote_plus(SECRET),
    "quote_plus keeping slashes": quote_plus(SECRET, safe="/"),
    "lowercase percent hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                                    quote(SECRET, safe="")),
    "json escaped": json.dumps(SECRET)[1:-1],
    "json escaped ascii only": json.dumps(SECRET, ensure_ascii=True)[1:-1],
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "base64 unpadded": base64.b64encode(SECRET.encode()).decode().rstrip("="),
    "base64 url-safe": base64.urlsafe_b64encode(SECRET.encode()).decode(),
    "base64 url-safe unpadded": base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
}


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_an_encoded_copy_of_a_secret_is_masked(encoding: str) -> None:
    encoded = ENCODINGS[encoding]
    assert encoded != SECRET or encoding == "json escaped"
    text = f"product says [{encoded}] twice [{encoded}]"
    assert SecretScrubber([SECRET]).scrub_text(text) == f"product says [{MASK}] twice [{MASK}]"


@pytest.mark.parametrize("prefix", [b"", b"u", b"us", b"usr", b"user:", b'{"token": "'])
@pytest.mark.parametrize("suffix", [b"", b"!", b"!!", b'"}'])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_of_a_secret_inside_a_longer_value_is_masked_in_every_alignment(
        prefix: bytes, suffix: bytes, encode) -> None:
    for secret in (SECRET, PLAIN):
        blob = encode(prefix + secret.encode() + suffix).decode()
        assert recoverable(secret, blob)  # the check itself finds the secret before scrubbing
        scrubbed = SecretScrubber([secret]).scrub_text(f"Basic {blob}")
        assert MASK in scrubbed and not recoverable(secret, scrubbed), scrubbed


def test_ordinary_text_and_short_values_are_left_alone() -> None:
    scrubber = SecretScrubber([PLAIN, "abc"])
    text = "Please record the plan and save the reminder at 16:00 (abc)."
    assert scrubber.scrub_text(text) == text


# --- URL credentials and handshake headers ------------------------------------------------------

def test_url_credentials_are_the_user_info_and_every_non_public_query_value() -> None:
    url = "wss://ops:p%40ss-9@agent.example:8443/voice?sig=abc%2B123&model=gpt-4o&se=2030#k=frag-77"
    assert url_secret_values(url) == {"ops:p%40ss-9", "ops:p@ss-9", "p%40ss-9", "p@ss-9",
                                      "abc%2B123", "abc+123", "2030", "frag-77"}
    assert mask_url(url) == (f"wss://{MASK}@agent.example:8443/voice?sig={MASK}&model=gpt-4o"
                             f"&se={MASK}#k={MASK}")
    assert "model" in PUBLIC_QUERY_PARAMETERS
    assert url_secret_values("wss://agent.example/voice") == set()
    assert url_secret_values("a sentence with ?x=1 in it") == set()


def test_adapter_secret_values_include_the_uri_credentials() -> None:
    values = secret_values({"X-Tenant": "tenant-42"}, "tok-1234",
                           uri="wss://h/voice?sig=sig-secret-9")
    assert {"tenant-42", "tok-1234", "Bearer tok-1234", "sig-secret-9"} <= set(values)
    assert secret_values({}, None) == []


def test_headers_and_uri_credentials_are_masked_in_resolved_settings_and_scrubbed_everywhere(
        tmp_path: Path) -> None:
    run_file = seed_run(tmp_path)
    set_endpoint(run_file, {
        "uri": "wss://ops:pw-5150@agent.example/voice?sig=sig-8c1f77&model=gpt-4o",
        "headers": {"X-Tenant": "tenant-4411", "X-Api-Key": "hdr-SECRET-77c1e0"},
        "echo": "tenant-4411 sig-8c1f77 pw-5150"})
    loaded = load_run(run_file, environ={})
    assert "sig-8c1f77" in loaded.run.endpoint.settings["uri"]  # the adapter gets the real URI

    settings = loaded.resolved_documents()["settings"]["endpoint"]["settings"]
    assert settings["uri"] == f"wss://{MASK}@agent.example/voice?sig={MASK}&model=gpt-4o"
    assert settings["headers"] == {"X-Tenant": MASK, "X-Api-Key": MASK}
    assert settings["echo"] == f"{MASK} {MASK} {MASK}"
    for secret in ("tenant-4411", "sig-8c1f77", "pw-5150", "ops:pw-5150"):
        assert loaded.scrubber.scrub_text(f"said {secret}") == f"said {MASK}"


def test_rotating_a_header_or_uri_credential_keeps_the_suite_hash(tmp_path: Path) -> None:
    run_file = seed_run(tmp_path)
    hashes = []
    for tenant, sig, model in [("t-1111", "s-1111", "m1"), ("t-2222", "s-2222", "m1"),
                               ("t-2222", "s-2222", "m2")]:
        set_endpoint(run_file, {"uri": f"wss://h/voice?sig={sig}&model={model}",
                                "headers": {"X-Tenant": tenant}})
        hashes.append(load_run(run_file, environ={}).suite_hash())
    assert hashes[0] == hashes[1]  # secrets rotated
    assert hashes[1] != hashes[2]  # a public parameter changed what is tested
