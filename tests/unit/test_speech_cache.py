"""SpeechService: memory and disk cache layers, keys, request coalescing, failures."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from voicelab.audio import PcmAudio, tone_speech
from voicelab.errors import ExecutionError
from voicelab.speech import Synthesis, ToneSpeechProvider
from voicelab.speech._cache import SpeechService

TIMEOUT_SECONDS = 5.0


class CountingProvider:
    """A real provider (tone speech) that counts calls and can be held or made to fail."""

    name = "counting"
    cacheable = True

    def __init__(self, *, seed_dependent: bool = False, sample_rate_hz: int = 24_000):
        self.seed_dependent = seed_dependent
        self.sample_rate_hz = sample_rate_hz
        self.calls: list[tuple[str, str | None, int]] = []
        self.gate: asyncio.Event | None = None
        self.fail_with: Exception | None = None
        self.closed = 0

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        self.calls.append((text, voice, seed))
        if self.gate is not None:
            await asyncio.wait_for(self.gate.wait(), TIMEOUT_SECONDS)
        if self.fail_with is not None:
            raise self.fail_with
        return tone_speech(f"{voice} {text}", seed=seed, sample_rate_hz=self.sample_rate_hz)

    async def aclose(self) -> None:
        self.closed += 1


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, TIMEOUT_SECONDS))


def test_second_request_is_a_memory_hit_with_identical_audio():
    provider = CountingProvider()
    service = SpeechService(provider)

    async def scenario():
        first = await service.synthesize("Hello there", voice="v1", seed=1)
        second = await service.synthesize("Hello there", voice="v1", seed=2)
        return first, second

    first, second = run(scenario())
    assert isinstance(first, Synthesis)
    assert (first.cached, second.cached) == (False, True)
    assert first.metadata["cache"] == "provider" and second.metadata["cache"] == "memory"
    assert first.metadata["cache_key"] == second.metadata["cache_key"]
    assert "synthesis_ms" in first.metadata
    assert first.provider == "counting" and first.voice == "v1" and first.text == "Hello there"
    np.testing.assert_array_equal(first.audio.samples, second.audio.samples)
    assert len(provider.calls) == 1
    assert service.stats.to_dict() == {"requests": 2, "provider_calls": 1, "memory_hits": 1,
                                       "disk_hits": 0, "shared_hits": 0}


def test_key_covers_text_voice_settings_and_seed_only_when_seed_dependent():
    provider = CountingProvider()
    service = SpeechService(provider, settings={"rate": 1.0})
    key = service.cache_key("hi", voice="a", seed=1)
    assert key == service.cache_key("hi", voice="a", seed=99)
    assert key != service.cache_key("hi ", voice="a", seed=1)
    assert key != service.cache_key("hi", voice="b", seed=1)
    assert key != service.cache_key("hi", voice=None, seed=1)
    assert key != SpeechService(provider, settings={"rate": 1.1}).cache_key("hi", voice="a",
                                                                             seed=1)
    seeded = SpeechService(CountingProvider(seed_dependent=True))
    assert seeded.cache_key("hi", voice="a", seed=1) != seeded.cache_key("hi", voice="a", seed=2)
    assert len(key) == 64 and int(key, 16) >= 0


def test_provider_cache_identity_replaces_settings_in_the_key():
    provider = CountingProvider()
    provider.cache_identity = {"model": "m1"}
    one = SpeechService(provider, settings={"ignored": 1}).cache_key("x", voice=None, seed=0)
    two = SpeechService(provider, settings={"ignored": 2}).cache_key("x", voice=None, seed=0)
    assert one == two
    provider.cache_identity = {"model": "m2"}
    assert SpeechService(provider).cache_key("x", voice=None, seed=0) != one


def test_concurrent_requests_for_one_key_synthesize_once():
    provider = CountingProvider()
    service = SpeechService(provider)

    async def scenario():
        provider.gate = asyncio.Event()
        tasks = [asyncio.create_task(service.synthesize("same line", voice=None, seed=0))
                 for _ in range(5)]
        await asyncio.sleep(0.01)
        assert len(provider.calls) == 1  # the others wait for the first synthesis
        provider.gate.set()
        return await asyncio.gather(*tasks)

    results = run(scenario())
    assert len(provider.calls) == 1
    assert sorted(r.cached for r in results) == [False, True, True, True, True]
    assert sum(r.metadata["cache"] == "shared" for r in results) == 4
    assert service.stats.shared_hits == 4
    for result in results[1:]:
        np.testing.assert_array_equal(result.audio.samples, results[0].audio.samples)


def test_a_cancelled_first_caller_does_not_cancel_the_shared_synthesis():
    provider = CountingProvider()
    service = SpeechService(provider)

    async def scenario():
        provider.gate = asyncio.Event()
        first = asyncio.create_task(service.synthesize("line", voice=None, seed=0))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(service.synthesize("line", voice=None, seed=0))
        await asyncio.sleep(0.01)
        first.cancel()
        provider.gate.set()
        return await second

    result = run(scenario())
    assert result.cached and result.audio.num_samples > 0
    assert len(provider.calls) == 1


def test_failure_reaches_every_waiter_and_a_later_request_retries():
    provider = CountingProvider()
    service = SpeechService(provider)

    async def scenario():
        provider.gate = asyncio.Event()
        provider.fail_with = ExecutionError("provider down")
        tasks = [asyncio.create_task(service.synthesize("x", voice=None, seed=0))
                 for _ in range(2)]
        await asyncio.sleep(0.01)
        provider.gate.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        provider.fail_with = None
        retry = await service.synthesize("x", voice=None, seed=0)
        return outcomes, retry

    outcomes, retry = run(scenario())
    assert all(isinstance(o, ExecutionError) for o in outcomes)
    assert retry.cached is False and len(provider.calls) == 2


def test_disk_cache_persists_across_services(tmp_path):
    first_provider = CountingProvider()

    async def fill():
        service = SpeechService(first_provider, cache_dir=tmp_path)
        result = await service.synthesize("Persist me", voice="v", seed=3)
        await service.aclose()
        return result

    stored = run(fill())
    key = stored.metadata["cache_key"]
    pcm_path = tmp_path / key[:2] / f"{key}.pcm"
    meta = json.loads((tmp_path / key[:2] / f"{key}.json").read_text())
    assert pcm_path.read_bytes() == stored.audio.to_bytes()
    assert meta["text"] == "Persist me" and meta["byte_count"] == stored.audio.byte_count
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporaries

    second_provider = CountingProvider()
    service = SpeechService(second_provider, cache_dir=tmp_path)
    again = run(service.synthesize("Persist me", voice="v", seed=3))
    assert again.cached and again.metadata["cache"] == "disk"
    assert second_provider.calls == [] and service.stats.disk_hits == 1
    np.testing.assert_array_equal(again.audio.samples, stored.audio.samples)


def test_corrupt_disk_entry_is_a_miss_and_is_rewritten(tmp_path):
    provider = CountingProvider()
    service = SpeechService(provider, cache_dir=tmp_path)
    stored = run(service.synthesize("fragile", voice=None, seed=0))
    key = stored.metadata["cache_key"]
    pcm_path = tmp_path / key[:2] / f"{key}.pcm"
    pcm_path.write_bytes(pcm_path.read_bytes()[:-10])

    fresh_provider = CountingProvider()
    fresh = SpeechService(fresh_provider, cache_dir=tmp_path)
    result = run(fresh.synthesize("fragile", voice=None, seed=0))
    assert result.cached is False and len(fresh_provider.calls) == 1
    assert pcm_path.read_bytes() == stored.audio.to_bytes()


def test_non_cacheable_provider_is_called_every_time():
    service = SpeechService(ToneSpeechProvider())

    async def scenario():
        return [await service.synthesize("tone", voice=None, seed=1) for _ in range(3)]

    results = run(scenario())
    assert [r.cached for r in results] == [False, False, False]
    assert service.stats.provider_calls == 3
    assert results[0].metadata["cache_key"] is None


def test_memory_layer_evicts_least_recently_used_by_bytes():
    provider = CountingProvider()
    one_entry_bytes = tone_speech("v a", seed=0).byte_count
    service = SpeechService(provider, max_memory_bytes=int(one_entry_bytes * 2.5))

    async def scenario():
        for text in ("a", "a", "b", "a", "c", "b"):
            await service.synthesize(text, voice="v", seed=0)

    run(scenario())
    # a (miss), a (hit), b (miss), a (hit), c (miss, evicts b), b (miss again)
    assert [call[0] for call in provider.calls] == ["a", "b", "c", "b"]


def test_wrong_sample_rate_from_a_provider_is_an_execution_error():
    service = SpeechService(CountingProvider(sample_rate_hz=16_000))
    with pytest.raises(ExecutionError, match="expected canonical 24 kHz"):
        run(service.synthesize("x", voice=None, seed=0))


def test_aclose_closes_the_provider_once_and_refuses_new_work():
    provider = CountingProvider()
    service = SpeechService(provider)

    async def scenario():
        await service.aclose()
        await service.aclose()
        with pytest.raises(ExecutionError, match="closed"):
            await service.synthesize("x", voice=None, seed=0)

    run(scenario())
    assert provider.closed == 1


def test_the_disk_cache_is_its_owners_alone(tmp_path):
    """It holds the script's spoken lines (people's names, numbers): 0700 folders, 0600 files,
    whatever the umask would give."""
    import os
    import stat

    cache = tmp_path / "runs" / ".speech-cache"
    service = SpeechService(CountingProvider(), cache_dir=cache)
    run(service.synthesize("Call me at 555 0100", voice="v1", seed=1))
    modes = {path.relative_to(tmp_path): stat.S_IMODE(os.stat(path).st_mode)
             for path in [cache, *cache.rglob("*")]}
    assert modes and all(mode == (0o700 if (tmp_path / path).is_dir() else 0o600)
                         for path, mode in modes.items()), modes
