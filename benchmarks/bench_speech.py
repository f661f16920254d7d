"""Speech benchmark: piper TTS, eSpeak NG and pocketsphinx ASR real-time factors, the speech cache's effect
on a 10-trial loop, and the cost of the per-turn speech metrics on this machine.

    python benchmarks/bench_speech.py            # prints readable tables

Real-time factor (RTF) = processing seconds / audio seconds (below 1 is faster than real time).
"""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
import time

SENTENCES = [
    "Hello, I would like to book a table for two people tonight.",
    "My name is John Smith and my phone number ends in four two seven.",
    "Can you tell me whether the kitchen is open after ten o'clock?",
    "Yes, that works for me. Thank you very much for your help.",
    "Actually, could we move the reservation to tomorrow evening instead?",
]
TRIAL_LINES = SENTENCES[:3]
TRIALS = 10


def table(title: str, header: list[str], rows: list[list[object]]) -> str:
    cells = [header] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [f"\n{title}", line]
    for index, row in enumerate(cells):
        out.append(" | ".join(cell.rjust(widths[i]) if index and i else cell.ljust(widths[i])
                              for i, cell in enumerate(row)))
        if index == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def bench_piper():
    from voicelab.speech._piper import PiperSpeechProvider, load_voice

    provider = PiperSpeechProvider({})
    started = time.perf_counter()
    load_voice(provider.model_path, provider.config_path)
    load_seconds = time.perf_counter() - started
    provider.synthesize_sync("Warm up.")
    rows, clips = [], []
    for text in SENTENCES:
        started = time.perf_counter()
        audio = provider.synthesize_sync(text)
        elapsed = time.perf_counter() - started
        clips.append((text, audio))
        rows.append([text[:40] + "...", audio.duration_seconds, elapsed,
                     elapsed / audio.duration_seconds])
    total_audio = sum(r[1] for r in rows)
    total_time = sum(r[2] for r in rows)
    rows.append(["TOTAL", total_audio, total_time, total_time / total_audio])
    print(table(f"piper synthesis (voice load {load_seconds:.2f} s, once per process)",
                ["sentence", "audio s", "synth s", "RTF"], rows))
    return clips


def bench_asr(clips):
    from voicelab.metrics._speech import input_wer
    from voicelab.speech._asr import recognize

    started = time.perf_counter()
    recognize(clips[0][1])  # loads the decoder
    first_seconds = time.perf_counter() - started
    rows = []
    for text, audio in clips:
        started = time.perf_counter()
        heard = recognize(audio)
        elapsed = time.perf_counter() - started
        rows.append([text[:40] + "...", audio.duration_seconds, elapsed,
                     elapsed / audio.duration_seconds, input_wer(text, heard)])
    total_audio = sum(r[1] for r in rows)
    total_time = sum(r[2] for r in rows)
    mean_wer = sum(r[4] for r in rows) / len(rows)
    rows.append(["TOTAL / mean WER", total_audio, total_time, total_time / total_audio, mean_wer])
    print(table(f"pocketsphinx recognition of piper speech (first call incl. decoder load "
                f"{first_seconds:.2f} s)", ["sentence", "audio s", "asr s", "RTF", "WER"], rows))


async def trial_loop(synthesize) -> float:
    started = time.perf_counter()
    for trial in range(TRIALS):
        for line in TRIAL_LINES:
            await synthesize(line, voice=None, seed=trial)
    return time.perf_counter() - started


async def bench_cache():
    from voicelab.speech._cache import SpeechService
    from voicelab.speech._piper import PiperSpeechProvider

    rows = []
    provider = PiperSpeechProvider({})
    await provider.synthesize("Warm up.", voice=None, seed=0)
    calls = 0

    async def uncached(text, *, voice, seed):
        nonlocal calls
        calls += 1
        return await provider.synthesize(text, voice=voice, seed=seed)

    elapsed = await trial_loop(uncached)
    rows.append(["no cache (provider every time)", elapsed, calls])

    with tempfile.TemporaryDirectory() as cache_dir:
        service = SpeechService(PiperSpeechProvider({}), cache_dir=cache_dir)
        elapsed = await trial_loop(service.synthesize)
        rows.append(["SpeechService, cold (memory + disk)", elapsed, service.stats.provider_calls])
        await service.aclose()
        warm = SpeechService(PiperSpeechProvider({}), cache_dir=cache_dir)
        elapsed = await trial_loop(warm.synthesize)
        rows.append(["SpeechService, new process-like (disk warm)", elapsed,
                     warm.stats.provider_calls])
        await warm.aclose()
    print(table(f"{TRIALS} trials x {len(TRIAL_LINES)} lines with piper",
                ["mode", "wall s", "provider calls"], rows))


def bench_metrics(clips):
    import numpy as np

    from voicelab.audio import PcmAudio
    from voicelab.metrics._speech import speech_metrics_for_turn

    text, clean = clips[0]
    rng = np.random.default_rng(0)
    noisy = PcmAudio(np.clip(clean.samples + rng.normal(0, 1500, clean.num_samples),
                             -32768, 32767).astype(np.int16))
    rows = []
    for label, kwargs in [
        ("user: input_wer + STOI/ESTOI + PESQ", dict(role="user", text=text, audio=noisy,
                                                     clean_audio=clean, heard_as=text)),
        ("assistant: completeness (ASR) + DNSMOS", dict(role="assistant", text=text,
                                                        audio=clean)),
    ]:
        started = time.perf_counter()
        speech_metrics_for_turn(**kwargs)
        first = time.perf_counter() - started
        started = time.perf_counter()
        speech_metrics_for_turn(**kwargs)
        rows.append([label, clean.duration_seconds, first, time.perf_counter() - started])
    print(table("speech metrics per turn (first call loads models / JIT-compiles librosa)",
                ["turn", "audio s", "first s", "steady s"], rows))


async def bench_espeak() -> None:
    """eSpeak NG: one child process per utterance, in three voices."""
    from voicelab.config import PersonaSpeech
    from voicelab.speech import SpeechContext
    from voicelab.speech._espeak import EspeakSpeechProvider, espeak_voices

    started = time.perf_counter()
    espeak_voices()
    list_seconds = time.perf_counter() - started
    rows = []
    for language, voice in (("en-US", None), ("en-GB", "en-gb-scotland"), ("de", None)):
        provider = EspeakSpeechProvider({}, SpeechContext(
            persona_speech=PersonaSpeech(voice=voice), language=language))
        text = SENTENCES[0] if language != "de" else "Ich möchte heute einen Tisch reservieren."
        await provider.synthesize(text, voice=None, seed=0)  # voice resolved once
        started = time.perf_counter()
        audio = await provider.synthesize(text, voice=None, seed=0)
        elapsed = time.perf_counter() - started
        rows.append([voice or language, audio.duration_seconds, elapsed,
                     elapsed / audio.duration_seconds])
    print(table(f"eSpeak NG synthesis, a child process per utterance (voice list "
                f"{list_seconds:.2f} s, once per process)",
                ["voice", "audio s", "synth s", "RTF"], rows))


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    clips = bench_piper()
    bench_asr(clips)
    asyncio.run(bench_cache())
    bench_metrics(clips)
    asyncio.run(bench_espeak())


if __name__ == "__main__":
    main()
