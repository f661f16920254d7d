"""The Azure Speech provider against the local Azure TTS REST server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import time
from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import pytest

from voicelab.audio import tone_speech
from voicelab.config import Providers, SecretScrubber
from voicelab.doubles.azure_tts import AzureTtsServer
from voicelab.doubles.azure_tts._server import _voice_seed
from voicelab.speech import SpeechContext
from voicelab.speech._azure import AzureSpeechError, AzureSpeechProvider
from voicelab.speech._cache import SpeechService

API_KEY = "local-test-speech-key-1234567890"
TIMEOUT_SECONDS = 10.0


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, TIMEOUT_SECONDS))


@pytest.fixture
def server():
    with AzureTtsServer(api_key=API_KEY, bearer_token="entra-token-abc",
                        resource_id="/subscriptions/s/resourceGroups/g/providers/x/y") as running:
        yield running


def provider_for(server: AzureTtsServer, settings=None, *, credential=None, **config):
    azure_speech = {"endpoint": server.endpoint, "api_key": API_KEY, **config}
    context = SpeechContext(providers=Providers(azure_speech=azure_speech),
                            scrubber=SecretScrubber([API_KEY]))
    return AzureSpeechProvider({"backoff_seconds": 0.01, **(settings or {})}, context,
                               credential=credential)


async def synthesize_once(provider, text, voice="en-US-AvaNeural"):
    try:
        return await provider.synthesize(text, voice=voice, seed=0)
    finally:
        await provider.aclose()


def test_success_returns_canonical_pcm_and_sends_the_contract(server):
    text = "Table for 2 & a high-chair <please>"
    audio = run(synthesize_once(provider_for(server), text, voice="en-GB-SoniaNeural"))

    expected = tone_speech(text, seed=_voice_seed("en-GB-SoniaNeural"))
    assert audio.sample_rate_hz == 24_000
    np.testing.assert_array_equal(audio.samples, expected.samples)
    [request] = server.requests
    assert request.status == 200 and request.path == "/cognitiveservices/v1"
    assert request.voice == "en-GB-SoniaNeural" and request.language == "en-GB"
    assert request.text == text
    assert "&amp;" in request.ssml and "&lt;please&gt;" in request.ssml
    assert request.auth == "key"
    assert request.headers["Ocp-Apim-Subscription-Key"] == "***"
    assert request.headers["X-Microsoft-OutputFormat"] == "raw-24khz-16bit-mono-pcm"
    assert request.headers["Content-Type"] == "application/ssml+xml"
    assert request.headers["User-Agent"].startswith("voicelab/")
    assert API_KEY not in repr(server.requests)


def test_default_voice_is_ava(server):
    run(synthesize_once(provider_for(server), "hello", voice=None))
    assert server.requests[0].voice == "en-US-AvaNeural"


def test_empty_text_is_short_silence_without_a_request(server):
    audio = run(synthesize_once(provider_for(server), "  \n "))
    assert audio.num_samples > 0 and not audio.samples.any()
    assert server.requests == []


def test_wrong_key_is_a_clear_error_without_the_key(server):
    wrong_key = "wrong-key-0987654321-abcdef"
    provider = provider_for(server, api_key=wrong_key)
    with pytest.raises(AzureSpeechError) as caught:
        run(synthesize_once(provider, "hello"))
    message = str(caught.value)
    assert caught.value.status_code == 401
    assert "HTTP 401" in message and "api_key" in message
    assert wrong_key not in message and API_KEY not in message
    assert len(server.requests) == 1  # auth failures are not retried


def retry_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the provider chose before its retries, as it logged them."""
    return [record.args[1] for record in caplog.records
            if record.msg.startswith("azure speech HTTP")]


def test_429_is_retried_honoring_retry_after(server, caplog):
    caplog.set_level(logging.INFO, logger="voicelab.speech._azure")
    server.fail_next(429, times=2, retry_after=0.2)
    audio = run(synthesize_once(provider_for(server), "after the throttle"))
    assert [r.status for r in server.requests] == [429, 429, 200]
    assert retry_waits(caplog) == [0.2, 0.2]  # the server's Retry-After, not the 0.01 s backoff
    # and it waited so: the server's own arrival stamps are at least that far apart (a lower
    # bound, which a busy machine only makes larger; 1 ms for the loop's wake-up rounding)
    arrivals = [r.received_at for r in server.requests]
    assert all(later - earlier >= 0.2 - 0.001 for earlier, later in pairwise(arrivals))
    assert audio.num_samples > 0


def test_retry_after_is_capped_by_the_setting(server, caplog):
    caplog.set_level(logging.INFO, logger="voicelab.speech._azure")
    server.fail_next(503, retry_after=60)
    run(synthesize_once(provider_for(server, {"max_retry_wait_seconds": 0.05}), "capped"))
    assert retry_waits(caplog) == [0.05]  # (an uncapped 60 s wait would end in run's timeout)
    assert [r.status for r in server.requests] == [503, 200]


def test_persistent_500_fails_after_bounded_retries(server):
    server.fail_next(500, times=10, body=f"internal error near {API_KEY}")
    with pytest.raises(AzureSpeechError) as caught:
        run(synthesize_once(provider_for(server, {"max_retries": 2}), "doomed"))
    assert caught.value.status_code == 500
    assert "HTTP 500" in str(caught.value) and "3 attempt(s)" in str(caught.value)
    assert API_KEY not in str(caught.value)  # the server's body is scrubbed
    assert len(server.requests) == 3


def test_bad_request_is_not_retried(server):
    provider = provider_for(server, output_format="raw-24khz-16bit-mono-pcm")
    server.fail_next(400, body="voice not found")
    with pytest.raises(AzureSpeechError, match="HTTP 400") as caught:
        run(synthesize_once(provider, "x"))
    assert "voice not found" in str(caught.value) and len(server.requests) == 1


class SyncCredential:
    def __init__(self, token: str):
        self.token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str):
        self.scopes.append(scopes)
        return SimpleNamespace(token=self.token, expires_on=int(time.time()) + 3600)


class AsyncCredential(SyncCredential):
    async def get_token(self, *scopes: str):
        return super().get_token(*scopes)


@pytest.mark.parametrize("credential_type", [SyncCredential, AsyncCredential])
def test_entra_token_auth_with_resource_id(server, credential_type):
    credential = credential_type("entra-token-abc")
    provider = provider_for(server, credential=credential, auth="default_credential",
                            api_key=None, resource_id=server.resource_id)

    async def twice():
        try:
            await provider.synthesize("one", voice=None, seed=0)
            await provider.synthesize("two", voice=None, seed=0)
        finally:
            await provider.aclose()

    run(twice())
    assert [r.auth for r in server.requests] == ["bearer", "bearer"]
    assert server.requests[0].headers["Authorization"] == "***"
    assert credential.scopes == [("https://cognitiveservices.azure.com/.default",)]  # cached


def test_entra_token_without_resource_id_is_a_plain_bearer():
    with AzureTtsServer(api_key=None, bearer_token="plain-token") as server:
        provider = provider_for(server, credential=SyncCredential("plain-token"),
                                auth="default_credential", api_key=None)
        audio = run(synthesize_once(provider, "plain bearer"))
        assert audio.num_samples > 0 and server.requests[0].auth == "bearer"

        rejected = provider_for(server, credential=SyncCredential("other-token"),
                                auth="default_credential", api_key=None)
        with pytest.raises(AzureSpeechError, match="Cognitive Services User") as caught:
            run(synthesize_once(rejected, "rejected"))
        assert "other-token" not in str(caught.value)


def test_failing_credential_is_an_execution_error(server):
    class Broken:
        def get_token(self, *scopes):
            raise RuntimeError("no identity available")

    provider = provider_for(server, credential=Broken(), auth="default_credential",
                            api_key=None)
    with pytest.raises(AzureSpeechError, match="Microsoft Entra token.*no identity"):
        run(synthesize_once(provider, "x"))
    assert server.requests == []


def test_other_output_formats_are_resampled_to_canonical(server):
    for output_format in ("raw-16khz-16bit-mono-pcm", "riff-16khz-16bit-mono-pcm"):
        audio = run(synthesize_once(provider_for(server, output_format=output_format),
                                    "resample me"))
        reference = tone_speech("resample me", seed=_voice_seed("en-US-AvaNeural"),
                                sample_rate_hz=16_000)
        assert audio.sample_rate_hz == 24_000
        assert abs(audio.duration_seconds - reference.duration_seconds) < 0.01
    assert [r.headers["X-Microsoft-OutputFormat"] for r in server.requests] == [
        "raw-16khz-16bit-mono-pcm", "riff-16khz-16bit-mono-pcm"]


def test_unreachable_endpoint_fails_after_retries():
    stopped = AzureTtsServer(api_key=API_KEY).start()
    endpoint = stopped.endpoint
    stopped.stop()
    context = SpeechContext(providers=Providers(azure_speech={"endpoint": endpoint,
                                                              "api_key": API_KEY}))
    provider = AzureSpeechProvider({"max_retries": 1, "backoff_seconds": 0.01}, context)
    with pytest.raises(AzureSpeechError, match="unreachable.*2 attempt") as caught:
        run(synthesize_once(provider, "x"))
    assert caught.value.status_code is None and API_KEY not in str(caught.value)


def test_speech_service_pays_azure_once_for_repeated_trials(server, tmp_path):
    service = SpeechService(provider_for(server), cache_dir=tmp_path)

    async def trials():
        try:
            return [await service.synthesize("Same line every trial", voice=None, seed=seed)
                    for seed in range(3)]
        finally:
            await service.aclose()

    results = run(trials())
    assert [r.cached for r in results] == [False, True, True]
    assert len(server.requests) == 1
