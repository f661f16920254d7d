"""Runner benchmarks: first-audio latency accuracy under load, and trial throughput.

    python benchmarks/bench_runner.py [--accuracy-trials 50] [--accuracy-rounds 3]
                                      [--throughput-trials 60] [--repeats 3]
                                      [--scoring process|loop]

Accuracy: the fake product runs in its own process with real-time paced audio and known
reply latencies; 50 trials run concurrently with ``pace_audio: true``, in 3 rounds so the p99
rests on ~300 responses rather than being the maximum of 100. For every response the
fake reports, on the shared system monotonic clock, when it sent the first audio frame; the
truth is that moment minus the evaluator's commit (or init) timestamp. The error is the
evaluator's measured ``first_audio_latency_ms`` minus the truth (what the receive path adds).

Throughput: the seed example with pacing off (voicelab: full evaluation, bundle written) next to
a bare websockets client doing the same exchange against the same in-process fake product with
no evaluation at all; same concurrency; trials per second and their ratio. The two are measured
alternately, 3 times each, and the medians compared (single runs vary by ±15 % on this machine).
``--scoring loop`` scores every call on the event loop (the runner before the scoring process)
for comparison. Each row also gives the CPU time a trial costs, medians: the event loop's
thread with voicelab and with the bare client (the loop is the bottleneck of an in-process run),
and the scoring process's (user + system, from ``/proc``; 0 off Linux). Work on one core slows
the other on this machine (a busy loop beside the bare client made its calls ~50 % slower), so
the scoring process's CPU costs the loop too.

The benchmark's process opts in to the process tuning the command line uses
(:func:`voicelab.execution.tuned_process`: a short GIL switch interval and older objects frozen
out of garbage collection while runs are in progress); ``--untuned`` measures a library call
that has not opted in (a notebook kernel's).

``VOICELAB_CODE=DIR`` measures the voicelab of another checkout (a worktree of an older commit)
with this script, so two versions are compared by one benchmark. ``--work N`` runs N trials and
nothing else, for an instruction count (``valgrind --tool=callgrind``) or a call count
(``python -m cProfile``) that a busy machine cannot disturb (docs/performance.md).

``--read-path ROUNDS`` runs only a WebSocket client's request/burst rounds against a server in
its own process: under callgrind, with 200 and 1200 rounds, the read path's instructions a round
(docs/performance.md, "Kernel receive stamps").

``VOICELAB_EVENT_LOOP=asyncio|uvloop`` runs the benchmark on that loop (unset: the standard
library's); ``VOICELAB_KERNEL_STAMPS=0`` reads ``ws://`` connections with the loop's own
transport instead of the kernel-stamped one, to measure what the stamps cost.

``--workdir DIR`` puts the bundles (and the temporary folder of the product double's databases:
``TMPDIR``) under ``DIR`` instead of the system's temporary folder. A trial's bundle is about
twenty new files, the bare client's only its double's database: a file system that creates
files slowly (this machine's ``/tmp``: ~300 us a file against ~16 us under ``/work``) weighs on
voicelab's side alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

# the accuracy sections' module, found also when this file is loaded by its path (as
# tests/unit/test_bench_cpu_meter.py does); it chooses the checkout measured (ROOT)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _runner_accuracy import EXAMPLE, ROOT, accuracy, listening_accuracy  # noqa: E402

import voicelab  # noqa: E402
from voicelab.audio import tone_speech  # noqa: E402

# --- throughput -----------------------------------------------------------------------------

async def bare_exchange(user_audio: bytes, chunk_bytes: int, data: dict) -> None:
    from websockets.asyncio.client import connect

    from voicelab.doubles.product import FakeProduct

    async with FakeProduct({}) as product, connect(product.uri, compression=None,
                                                  max_size=16 * 1024 * 1024) as ws:
        await ws.send(json.dumps({"type": "evaluator.init", "request": data}))
        async for message in ws:
            if isinstance(message, str) and json.loads(message)["type"] == "response.done":
                break
        for start in range(0, len(user_audio), chunk_bytes):
            await ws.send(user_audio[start:start + chunk_bytes])
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        await ws.send(json.dumps({"type": "response.create"}))
        async for message in ws:
            if isinstance(message, str) and json.loads(message)["type"] == \
                    "conversation.completed":
                break


async def bare_rate(trials: int, concurrency: int) -> float:
    loaded = voicelab.load_run(EXAMPLE)
    audio = tone_speech(loaded.script.turns[0].response, seed=42).to_bytes()
    semaphore = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with semaphore:
            await bare_exchange(audio, 4800, dict(loaded.data))

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(trials)))
    return trials / (time.perf_counter() - started)


async def voicelab_rate(trials: int, concurrency: int, workdir: Path, scoring: str = "process"
                        ) -> tuple[float, int]:
    loaded = voicelab.load_run(EXAMPLE)
    started = time.perf_counter()
    outcome = await voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        concurrency=concurrency,
        artifacts_dir=workdir / f"throughput-{concurrency}",
        scoring=scoring))
    return trials / (time.perf_counter() - started), outcome.report.passed_trials


def _process_cpu_seconds(pid: int | None) -> float:
    """User plus system CPU time of process ``pid`` (Linux; 0 elsewhere or when gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def cpu_meter() -> Iterator[dict[str, float]]:
    """CPU seconds spent inside the block by this thread (the event loop's: the bottleneck of
    an in-process run) and by the scoring process (its other core)."""
    from voicelab.execution._scoring_process import scoring_process

    used: dict[str, float] = {}
    loop_start = time.thread_time()
    pid = scoring_process().pid
    scoring_start = _process_cpu_seconds(pid)
    yield used
    used["loop"] = time.thread_time() - loop_start
    now = scoring_process().pid
    # a process started (or replaced) inside the block counts from its own start
    used["scoring"] = _process_cpu_seconds(now) - (scoring_start if now == pid else 0.0)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy-trials", type=int, default=50)
    parser.add_argument("--accuracy-rounds", type=int, default=3,
                        help="batches of --accuracy-trials concurrent trials, errors pooled")
    parser.add_argument("--throughput-trials", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating voicelab/bare measurements per row (medians)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--scoring", choices=("process", "loop"), default="process",
                        help="where voicelab scores its calls (arun's scoring=)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="folder for the bundles and temporary files (default: the "
                             "system's temporary folder)")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--listening-trials", type=int, default=50,
                        help="concurrent server_vad trials (0 skips the listening section)")
    parser.add_argument("--untuned", action="store_true",
                        help="do not opt in to the command line's process tuning")
    parser.add_argument("--work", type=int, default=None, metavar="N",
                        help="only run N trials (one at a time, scored on the loop, no retry) "
                             "and exit: a fixed workload to count instructions or calls of")
    parser.add_argument("--read-path", type=int, default=None, metavar="ROUNDS",
                        help="only run ROUNDS request/burst rounds over one WebSocket "
                             "connection and exit: the read path's instructions")
    args = parser.parse_args()
    if args.read_path is not None:
        await read_path(args.read_path)
        return
    if args.work is not None:
        await fixed_work(args.work)
        return
    from voicelab.execution import tuned_process

    with contextlib.nullcontext() if args.untuned else tuned_process():
        await measure(args)


async def fixed_work(trials: int) -> None:
    """``trials`` trials of the seed example in this process, nothing else: under
    ``valgrind --tool=callgrind`` (or ``python -m cProfile``) with N and N + 10 trials, the
    difference over 10 is what a trial costs in instructions (calls), start-up left out, and no
    other process on the machine changes the count."""
    logging_quiet()
    with tempfile.TemporaryDirectory() as tmp:
        outcome = await voicelab.arun(voicelab.load_run(EXAMPLE), voicelab.RunOptions(
            trials=trials, concurrency=1, artifacts_dir=Path(tmp), scoring="loop",
            retry_inconclusive=0))
    from voicelab.execution import running_event_loop

    print(f"{outcome.report.passed_trials}/{trials} trials passed ({ROOT}; "
          f"{running_event_loop()} loop, VOICELAB_KERNEL_STAMPS="
          f"{os.environ.get('VOICELAB_KERNEL_STAMPS', '')!r})")


READ_PATH_SERVER = """
import asyncio
from websockets.asyncio.server import serve
async def burst(ws):
    async for _ in ws:
        for _ in range(3):
            await ws.send(bytes(4800))
        await ws.send('{"type": "response.done"}')
async def main():
    async with serve(burst, "127.0.0.1", 0, compression=None) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"""


async def read_path(rounds: int) -> None:
    """``rounds`` times: send a message and receive a burst of three 4800-byte binary messages
    and a text message (an unpaced trial's shape) through voicelab's WebSocket connection, the
    server in a process of its own, so an instruction count is the client's read path."""
    from voicelab.config import SecretScrubber
    from voicelab.endpoints import MessageInbox, open_websocket
    from voicelab.execution import running_event_loop

    server = subprocess.Popen([sys.executable, "-c", READ_PATH_SERVER], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        inbox = MessageInbox()
        ws = await open_websocket(
            f"ws://127.0.0.1:{port}", headers={}, connect_timeout_seconds=10,
            max_message_bytes=1 << 20, clock_ns=time.perf_counter_ns, inbox=inbox,
            where="the read-path server", scrubber=SecretScrubber(), user_agent="bench")
        for _ in range(rounds):
            await ws.send("go")
            for _ in range(4):
                await inbox.get()
        await ws.close()
    finally:
        server.terminate()
        server.wait(10)
    print(f"{rounds} rounds ({ROOT}; {running_event_loop()} loop, kernel stamps "
          f"{'on' if ws.kernel_stamps else 'off'})")


async def measure(args: argparse.Namespace) -> None:
    logging_quiet()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        os.environ["TMPDIR"] = str(args.workdir.resolve())
        tempfile.tempdir = None  # read TMPDIR again
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        workdir = Path(tmp)
        print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, "
              f"{'untuned' if args.untuned else 'tuned'} process")
        print("\nthroughput: seed example, pace_audio false "
              f"({args.throughput_trials} trials per measurement, median of {args.repeats} "
              "alternating measurements)")
        print(f"{'concurrency':>11} {'voicelab/s':>11} {'bare/s':>9} {'ratio':>7}"
              f"   CPU ms a trial: {'loop':>5} {'bare':>5} {'scoring':>7}")
        for concurrency in ([] if args.skip_throughput else args.concurrency):
            await voicelab_rate(4, concurrency, workdir, args.scoring)  # warm up imports, caches
            rates, bares, passed = [], [], 0
            loop_cpu, bare_cpu, scoring_cpu = [], [], []
            for _ in range(args.repeats):
                trials = args.throughput_trials
                with cpu_meter() as used:
                    rate, ok = await voicelab_rate(trials, concurrency, workdir, args.scoring)
                loop_cpu.append(used["loop"] / trials)
                scoring_cpu.append(used["scoring"] / trials)
                rates.append(rate)
                passed += ok
                with cpu_meter() as used:
                    bares.append(await bare_rate(trials, concurrency))
                bare_cpu.append(used["loop"] / trials)
            rate, bare = float(np.median(rates)), float(np.median(bares))
            print(f"{concurrency:>11} {rate:>11.1f} {bare:>9.1f} {rate / bare:>7.2f}"
                  f"   {'':>15} {np.median(loop_cpu) * 1e3:>5.1f} "
                  f"{np.median(bare_cpu) * 1e3:>5.1f} {np.median(scoring_cpu) * 1e3:>7.1f}"
                  f"   ({passed}/{args.throughput_trials * args.repeats} passed; voicelab "
                  f"{min(rates):.1f}-{max(rates):.1f}, bare {min(bares):.1f}-{max(bares):.1f})")
        print("targets: voicelab >= 10 trials/s and >= 1/2 of the bare rate")
        if not args.skip_accuracy:
            results = [await accuracy(args.accuracy_trials, workdir / f"round-{r}",
                                     args.scoring)
                       for r in range(args.accuracy_rounds)]
            errors = np.concatenate([r["errors"] for r in results])
            print(f"\naccuracy: {args.accuracy_rounds} rounds of {args.accuracy_trials} "
                  f"concurrent paced trials, fake product in its own process, {errors.size} "
                  f"responses, {sum(r['wall_seconds'] for r in results):.1f} s")
            print(f"|measured - true| first_audio_latency_ms: p50 "
                  f"{np.percentile(errors, 50):.3f} ms, p99 {np.percentile(errors, 99):.3f} ms, "
                  f"max {errors.max():.3f} ms ({sum(r['passed'] for r in results)}/"
                  f"{args.accuracy_trials * args.accuracy_rounds} trials passed)")
            print("target: p99 within 3 ms")
        if args.listening_trials:
            result = await listening_accuracy(args.listening_trials, workdir / "listening",
                                                args.scoring)
            print(f"\nlistening (server_vad): {args.listening_trials} concurrent paced trials, "
                  f"fake product in its own process, {result['wall_seconds']:.1f} s, "
                  f"{result['passed']}/{args.listening_trials} passed")
            for name, target in (("response_latency", 20.0), ("stop_latency", 40.0)):
                values = np.abs(np.asarray(result[name]))
                if not values.size:
                    print(f"  {name}: no samples")
                    continue
                verdict = "ok" if np.percentile(values, 99) <= target else "MISSES"
                print(f"  |measured - true| {name}_ms over {values.size}: p50 "
                      f"{np.percentile(values, 50):.2f}, p99 {np.percentile(values, 99):.2f}, "
                      f"max {values.max():.2f} (target p99 <= {target:g}) {verdict}")
            stalls = np.asarray(result["stall"])
            print(f"  playback_stall_ms of a product with no stalls over {stalls.size} "
                  f"responses: p99 {np.percentile(stalls, 99):.2f} (target 0)")


def logging_quiet() -> None:
    import logging

    logging.getLogger("voicelab").setLevel(logging.WARNING)


if __name__ == "__main__":
    if os.environ.get("VOICELAB_EVENT_LOOP"):  # else the standard library's, as before
        from voicelab.execution import use_chosen_event_loop

        use_chosen_event_loop()
    asyncio.run(main())
