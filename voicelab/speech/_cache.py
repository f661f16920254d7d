"""The speech cache: repeated trials never pay twice for the same utterance.

:class:`SpeechService` wraps a provider instance. A request is keyed by (provider, voice, text,
the provider's settings, and the seed when the provider declares ``seed_dependent``), looked up
in an in-memory LRU, then in an optional cache directory (``<sha256>.pcm`` + ``<sha256>.json``,
written atomically), and synthesized once otherwise: concurrent requests for one key share a
single provider call. Providers that declare ``cacheable = False`` (tone: it is cheaper to
recompute) are called every time.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import JsonValue

from .._atomic import atomic_write, make_folder
from ..artifacts import Usage
from ..audio import CANONICAL_FORMAT, CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ..errors import ExecutionError
from ._protocol import (
    HasCacheIdentity,
    NamedProvider,
    SpeechProvider,
    Synthesis,
    cacheable,
    metered_synthesis,
    rendering_of,
    seed_dependent,
    synthesizes_ahead,
)

logger = logging.getLogger(__name__)

KEY_VERSION = 1
DEFAULT_MAX_MEMORY_BYTES = 64 * 1024 * 1024


@dataclass
class SpeechCacheStats:
    requests: int = 0
    provider_calls: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    shared_hits: int = 0  # waited for a concurrent request's synthesis

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _jsonable(value: object) -> JsonValue:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class SpeechService:
    """Caching front of one speech provider; the runner calls :meth:`synthesize`.

    ``settings`` (the run's ``speech_settings``) is part of the key unless the provider exposes
    a ``cache_identity`` mapping, which is used instead. ``cache_dir`` enables the disk layer.
    """

    def __init__(self, provider: SpeechProvider, *, settings: Mapping[str, object] | None = None,
                 cache_dir: str | Path | None = None,
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES):
        self.provider = provider
        self.provider_name = str(provider.name) if isinstance(provider, NamedProvider) \
            else type(provider).__name__
        self.cacheable = cacheable(provider)
        self.synthesize_ahead = synthesizes_ahead(provider)
        self.seed_dependent = seed_dependent(provider)
        identity = provider.cache_identity if isinstance(provider, HasCacheIdentity) else None
        self._identity = _jsonable(identity if isinstance(identity, Mapping) else settings or {})
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_memory_bytes = max_memory_bytes
        self.stats = SpeechCacheStats()
        self._memory: OrderedDict[str, PcmAudio] = OrderedDict()
        self._memory_bytes = 0
        self._inflight: dict[str, asyncio.Task[tuple[PcmAudio, str, float, list[Usage]]]] = {}
        self._closed = False

    # --- keys -----------------------------------------------------------------------------

    def cache_key(self, text: str, *, voice: str | None, seed: int) -> str:
        material = {"v": KEY_VERSION, "provider": self.provider_name, "voice": voice,
                    "text": text, "settings": self._identity,
                    "seed": seed if self.seed_dependent else None,
                    "format": CANONICAL_FORMAT.to_dict()}
        encoded = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(encoded.encode("utf-8")).hexdigest()

    # --- memory layer ---------------------------------------------------------------------

    def _remember(self, key: str, audio: PcmAudio) -> None:
        if audio.byte_count > self.max_memory_bytes:
            return
        previous = self._memory.pop(key, None)
        if previous is not None:
            self._memory_bytes -= previous.byte_count
        self._memory[key] = audio
        self._memory_bytes += audio.byte_count
        while self._memory_bytes > self.max_memory_bytes and self._memory:
            _, evicted = self._memory.popitem(last=False)
            self._memory_bytes -= evicted.byte_count

    def _recall(self, key: str) -> PcmAudio | None:
        audio = self._memory.get(key)
        if audio is not None:
            self._memory.move_to_end(key)
        return audio

    # --- disk layer -----------------------------------------------------------------------

    def _paths(self, key: str) -> tuple[Path, Path]:
        assert self.cache_dir is not None
        folder = self.cache_dir / key[:2]
        return folder / f"{key}.pcm", folder / f"{key}.json"

    def _read_disk(self, key: str) -> PcmAudio | None:
        pcm_path, meta_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            data = pcm_path.read_bytes()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            logger.warning("ignoring unreadable speech cache entry %s: %s", key, error)
            return None
        if (meta.get("byte_count") != len(data)
                or meta.get("sample_rate_hz") != CANONICAL_SAMPLE_RATE_HZ
                or meta.get("sha256") != hashlib.sha256(data).hexdigest()):
            logger.warning("ignoring corrupt speech cache entry %s", key)
            return None
        return PcmAudio.from_bytes(data, sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ)

    def _write_disk(self, key: str, audio: PcmAudio, meta: dict[str, JsonValue]) -> None:
        pcm_path, meta_path = self._paths(key)
        assert self.cache_dir is not None
        if not self.cache_dir.is_dir():  # it holds the spoken lines: its owner's alone
            self.cache_dir.parent.mkdir(parents=True, exist_ok=True)
            self.cache_dir.mkdir(mode=0o700, exist_ok=True)
        make_folder(pcm_path.parent)
        data = audio.to_bytes()
        meta = {**meta, "byte_count": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "sample_rate_hz": audio.sample_rate_hz, "encoding": "pcm_s16le",
                "channels": 1}
        # The meta file is written last: an entry without it is a miss, never half a hit.
        atomic_write(pcm_path, data, durable=True)
        atomic_write(meta_path, json.dumps(meta, ensure_ascii=False, indent=1).encode("utf-8"),
                     durable=True)

    # --- synthesis ------------------------------------------------------------------------

    async def _call_provider(self, text: str, voice: str | None,
                             seed: int) -> tuple[PcmAudio, list[Usage]]:
        self.stats.provider_calls += 1
        audio, usage = await metered_synthesis(self.provider, self.provider_name, text,
                                               voice=voice, seed=seed)
        if not isinstance(audio, PcmAudio) or audio.sample_rate_hz != CANONICAL_SAMPLE_RATE_HZ:
            raise ExecutionError(f"speech provider {self.provider_name!r} returned "
                                 f"{audio!r}; expected canonical 24 kHz PcmAudio")
        return audio, usage

    async def _fill(self, key: str, text: str, voice: str | None,
                    seed: int) -> tuple[PcmAudio, str, float, list[Usage]]:
        """(audio, source, provider milliseconds, what the provider spent): from disk when
        present (nothing spent), else synthesized."""
        if self.cache_dir is not None:
            audio = await asyncio.to_thread(self._read_disk, key)
            if audio is not None:
                self._remember(key, audio)
                return audio, "disk", 0.0, []
        started = time.perf_counter()
        audio, usage = await self._call_provider(text, voice, seed)
        synthesis_ms = (time.perf_counter() - started) * 1000.0
        self._remember(key, audio)
        if self.cache_dir is not None:
            meta = {"provider": self.provider_name, "voice": voice, "text": text,
                    "settings": self._identity,
                    "seed": seed if self.seed_dependent else None,
                    "synthesis_ms": round(synthesis_ms, 3)}
            try:
                await asyncio.to_thread(self._write_disk, key, audio, meta)
            except OSError as error:
                logger.warning("cannot write speech cache entry %s: %s", key, error)
        return audio, "provider", synthesis_ms, usage

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> Synthesis:
        """Canonical PCM for ``text``; ``cached`` tells whether the provider was spared and
        ``metadata["rendering"]`` what it applied to the text (voice, rate, pitch) when it says."""
        synthesis = await self._synthesize(text, voice=voice, seed=seed)
        rendering = rendering_of(self.provider, text, seed=seed)
        if rendering:
            synthesis.metadata["rendering"] = rendering
        return synthesis

    async def _synthesize(self, text: str, *, voice: str | None, seed: int) -> Synthesis:
        if self._closed:
            raise ExecutionError("the speech service is closed")
        self.stats.requests += 1
        if not self.cacheable:
            started = time.perf_counter()
            audio, usage = await self._call_provider(text, voice, seed)
            return self._result(audio, text, voice, cached=False, source="provider", key=None,
                                synthesis_ms=(time.perf_counter() - started) * 1000.0,
                                usage=usage)
        key = self.cache_key(text, voice=voice, seed=seed)
        remembered = self._recall(key)
        if remembered is not None:
            self.stats.memory_hits += 1
            return self._result(remembered, text, voice, cached=True, source="memory", key=key)
        task = self._inflight.get(key)
        owner = task is None
        if task is None:
            task = asyncio.ensure_future(self._fill(key, text, voice, seed))
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._forget, key))
        # shield: one caller's cancellation must not cancel the synthesis others await.
        audio, source, synthesis_ms, usage = await asyncio.shield(task)
        if not owner:  # the trial that asked first spent it
            self.stats.shared_hits += 1
            return self._result(audio, text, voice, cached=True, source="shared", key=key)
        if source == "disk":
            self.stats.disk_hits += 1
        return self._result(audio, text, voice, cached=source == "disk", source=source,
                            key=key, synthesis_ms=synthesis_ms, usage=usage)

    def _forget(self, key: str, task: asyncio.Task[object]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled() and task.exception() is not None:
            logger.debug("speech synthesis for %s failed", key)

    def _result(self, audio: PcmAudio, text: str, voice: str | None, *, cached: bool,
                source: str, key: str | None, synthesis_ms: float | None = None,
                usage: list[Usage] | None = None) -> Synthesis:
        metadata: dict[str, JsonValue] = {"cache": source, "cache_key": key}
        if synthesis_ms is not None and source == "provider":
            metadata["synthesis_ms"] = round(synthesis_ms, 3)
        return Synthesis(audio=audio, provider=self.provider_name, voice=voice, text=text,
                         cached=cached, metadata=metadata,
                         usage=list(usage or []) if source == "provider" else [])

    def clear_memory(self) -> None:
        self._memory.clear()
        self._memory_bytes = 0

    async def aclose(self) -> None:
        """Cancel unfinished syntheses and close the provider; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self.clear_memory()
        await self.provider.aclose()
