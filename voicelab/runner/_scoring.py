"""Scoring a finished call: from what the call left (:class:`Call`) to the trial's bundle.

Everything after the call is a pure function of the recording, the call's ending (exit reason,
failures, outcome) and the run's configuration: evidence, verdicts, the trial report and every
file of the bundle. An in-process run sends its finished calls to the *scoring process* (one
per Python process, at a low priority) while its event loop goes on with the next calls:
the loop that timestamps arrivals no longer spends a third of its time on placement, metrics
and serialization, nor waits for the GIL behind the threads that write the files. Measured on
two cores (``benchmarks/bench_runner.py``, seed example unpaced): 21 to 28 trials/s at
concurrency 1, 19 to 32 at 4, 17 to 29 at 8. The bundle is the same, byte for byte, wherever
it is scored.

A trial is scored on the event loop instead (:func:`score_on_loop`) when its run has judges
(LLM calls: concurrent on the loop, not one after another in one process), in a worker process
(``--workers``, Dask: the worker is already off the parent's loop), when the caller asks
(``arun(..., scoring="loop")``), and when the scoring process is lost (a warning says so; the
recording is still in the parent, so nothing is lost).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .._steps import Steps, arun_steps, run_steps
from ..artifacts import (
    RESOLVED_KINDS,
    SCHEMA_VERSION,
    TRIAL_REPORT,
    ExecutionFailure,
    JudgeResult,
    LoopLag,
    ProbeOutcome,
    TrialReport,
    TurnMetrics,
    resolved_document,
    trial_folder,
)
from ..artifacts._bundle import EncodedFile, write_json, write_trial_files
from ..config import LoadedRun
from ..errors import ConfigError
from ..metrics import loop_lag_of
from ..recording import USER_CLEAN, PcmStream, Recording
from ._child import start_child
from ._evidence import Evidence, assemble, assemble_now, evidence_files, score_of
from ._report import CallEnding, CallTiming, TrialIdentity, trial_report
from ._report import utc_iso as utc_iso  # the execution modules take it from here
from ._transcription import ProductTranscription

logger = logging.getLogger(__name__)

#: Where a run's calls are scored (``arun(..., scoring=...)``).
SCORING_MODES = ("process", "loop")


@dataclass
class Call:
    """What a trial's call left: the input of scoring (picklable: it crosses to the scoring
    process). How the call ended is in its recording (:attr:`ending`)."""

    recording: Recording
    index: int
    seed: int
    trial_dir: Path
    speech_metrics: bool
    #: files of the bundle the call made (``product.log``, ``persona-session.json``)
    texts: dict[str, str] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    #: the run was interrupted during the call
    cancelled: bool = False

    @property
    def trial_id(self) -> str:
        return trial_folder(self.index)

    @property
    def started_wall(self) -> float:
        """When the call started (``time.time()``): its recording's start."""
        return self.recording.start_utc_ns / 1e9

    @property
    def ending(self) -> CallEnding:
        return CallEnding.of_recording(self.recording)

    @property
    def loop_lag(self) -> LoopLag | None:
        """The event loop's lag while the conversation ran (recorded with its end)."""
        return loop_lag_of(self.recording)


@dataclass
class Scored:
    """A scored trial: its final report (after the bundle write) and what the run report
    aggregates."""

    report: TrialReport
    turn_metrics: list[TurnMetrics]
    probes: list[ProbeOutcome]


# --- the scoring itself (the same code on the loop and in the scoring process) -----------------

def _assemble_options(loaded: LoadedRun, call: Call) -> dict[str, Any]:
    return {"adapter": loaded.run.endpoint.adapter, "speech_metrics": call.speech_metrics,
            "measurement": loaded.run.measurement,
            "transcription": ProductTranscription.of_run(loaded)}


def _report_steps(loaded: LoadedRun, call: Call, evidence: Evidence,
                  judges: list[JudgeResult]) -> Steps[tuple[TrialReport, list[EncodedFile]]]:
    """The trial report and every other file of the bundle, serialized, in steps."""
    recording = call.recording
    ending = call.ending
    identity = TrialIdentity.of_run(loaded, index=call.index, seed=call.seed,
                                    session_id=recording.session_id)
    report = trial_report(
        identity, ending, CallTiming.between(call.started_wall, time.time()),
        score=score_of(evidence, ending, judges, scenario=loaded.scenario,
                       persona=loaded.persona),
        trace_id=recording.trace_id)
    yield
    resolved = loaded.resolved_documents()
    documents: dict[str, Any] = {}
    for kind in RESOLVED_KINDS:
        source = loaded.sources.get("run" if kind == "settings" else kind)
        documents[resolved_document(kind)] = {"schema_version": SCHEMA_VERSION, "kind": kind,
                                              "source": str(source) if source else None,
                                              "resolved": resolved[kind]}
    documents.update(call.documents)
    title = f"{loaded.scenario.id} — {report.trial_id} (seed {report.seed})"
    files = yield from evidence_files(call.recording, evidence, report, title=title,
                                      keep_clean_speech=call.speech_metrics,
                                      extra_documents=documents, extra_texts=call.texts)
    return report, files


def write_bundle(trial_dir: Path, files: list[EncodedFile], report: TrialReport, *,
                 side_by_side: bool = True) -> TrialReport:
    """Write the trial's files, its report last; the report the trial ends with (the same, or
    one saying which files could not be written). I/O only."""
    try:
        write_trial_files(trial_dir, files, report, side_by_side=side_by_side)
        return report
    except OSError as error:
        return write_unfinished_bundle(trial_dir, report, error)


def write_unfinished_bundle(trial_dir: Path, report: TrialReport, error: OSError) -> TrialReport:
    """The bundle could not be written (disk full, permissions): the trial failed to execute.

    Keeps whatever files made it to disk and tries to write the (small) trial report saying
    what is missing; returns that report (also when even it could not be written)."""
    reason = error.strerror or type(error).__name__
    where = f" ({Path(error.filename).name})" if error.filename else ""
    failures = [*report.failures, ExecutionFailure(
        kind="artifacts", code="bundle_write_failed",
        message=f"could not write the trial's bundle{where}: {reason}")]
    logger.error("%s: %s", report.trial_id, failures[-1].message)
    # Without its report the trial is unknown to every reader: on a full disk the trial's own
    # files make room for it (audio first, then the rest, largest first), and the report says
    # what was removed.
    removable = _removable_by_size(trial_dir)
    while True:
        try:
            present = sorted(p.name for p in trial_dir.iterdir() if not p.name.startswith("."))
        except OSError:
            present = []
        failed = report.model_copy(update={
            "execution_status": "failed", "passed": False, "failures": failures,
            "files": [*present, TRIAL_REPORT]})
        try:
            write_json(trial_dir / TRIAL_REPORT, failed)
            return failed
        except OSError as second:
            if second.errno != errno.ENOSPC or not removable:
                logger.error("%s: the trial report could not be written either: %s",
                             report.trial_id, second.strerror or type(second).__name__)
                return failed
        victim, size = removable.pop(0)
        try:
            victim.unlink()
        except OSError:
            continue
        failures = [*failures, ExecutionFailure(
            kind="artifacts", code="bundle_file_removed",
            message=f"{victim.name} ({size} bytes) was removed to make room for the trial "
                    f"report on a full disk")]
        logger.error("%s: %s", report.trial_id, failures[-1].message)


def _removable_by_size(trial_dir: Path) -> list[tuple[Path, int]]:
    """The trial's files but its report: audio first (the bulk), then the others; largest
    first within each."""
    try:
        sizes = [(path, path.stat().st_size) for path in trial_dir.iterdir()
                 if path.is_file() and path.name != TRIAL_REPORT]
    except OSError:
        return []
    return sorted(sizes, key=lambda item: (item[0].suffix != ".wav", -item[1]))


async def score_on_loop(loaded: LoadedRun, call: Call, *,
                        write_lock: asyncio.Lock | None = None) -> Scored:
    """Score on the event loop, in steps (judges run here); the files are written from a
    thread, under ``write_lock`` when given (one bundle at a time)."""
    evidence = await assemble(call.recording, **_assemble_options(loaded, call))
    judges: list[JudgeResult] = []
    if call.ending.executed and loaded.run.quality_evaluation is not None:
        from ..scoring import run_judges

        judges = await run_judges(loaded, evidence.transcript.turns,
                                  evidence.tool_calls.tool_calls)
    report, files = await arun_steps(_report_steps(loaded, call, evidence, judges))
    async with write_lock or contextlib.nullcontext():
        report = await asyncio.to_thread(write_bundle, call.trial_dir, files, report)
    return Scored(report, evidence.metrics.turns, evidence.metrics.probes)


def score_now(loaded: LoadedRun, call: Call) -> Scored:
    """Score and write synchronously, the files one after another (the scoring process; no
    judges)."""
    evidence = assemble_now(call.recording, **_assemble_options(loaded, call))
    report, files = run_steps(_report_steps(loaded, call, evidence, []))
    report = write_bundle(call.trial_dir, files, report, side_by_side=False)
    return Scored(report, evidence.metrics.turns, evidence.metrics.probes)


# --- the scoring process -------------------------------------------------------------------------

#: The scoring process's niceness. CFS weighs nice 10 at a tenth of nice 0: a waking event loop
#: takes the core from it at once, and beside a busy process it still gets ~10 % of a core.
#: Nice 19 (~1.5 %) made a 3-trial run take 60 s beside two busy loops (its imports alone).
SCORING_NICENESS = 10
#: The command the scoring process runs (:func:`._child.start_child`). Its priority is lowered
#: first, so even its imports yield the cores (see :func:`_yield_the_cores`).
SERVE = (f"import os, sys\nos.nice({SCORING_NICENESS})\n"
         "from voicelab.runner._scoring import serve\nserve(int(sys.argv[1]))")


class ScoringProcessLost(Exception):
    """The scoring process ended while it scored a trial."""


class ScoringProcessUnavailable(ScoringProcessLost):
    """No scoring process can be started here (the run scores on its loop from then on)."""


class _Collected(logging.Handler):
    """The scoring process's log records, sent back with the result and logged by the parent
    (its evaluator.log and console)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self.records.append(record)


def serve(fd: int) -> None:
    """The scoring process: score each call it is sent, one at a time, until its parent's end of
    the socket closes."""
    # Ctrl-C reaches the whole process group: the parent decides (the trials in flight are
    # still scored and written); a SIGINT here would lose them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _yield_the_cores()
    package = logging.getLogger("voicelab")
    package.setLevel(logging.DEBUG)  # the parent's handlers filter
    package.propagate = False
    connection = Connection(fd)
    raw = socket.fromfd(fd, socket.AF_UNIX, socket.SOCK_STREAM)
    loaded: LoadedRun | None = None
    while True:
        try:  # the run (when it changed), then the call
            blob = pickle.loads(connection.recv_bytes())
            call = _receive_pickled(connection, raw)
        except (EOFError, OSError):
            return
        if blob is not None:
            loaded = pickle.loads(blob)
        handler = _Collected()
        package.addHandler(handler)
        try:
            assert loaded is not None
            reply: tuple[Any, ...] = ("scored", score_now(loaded, call), handler.records)
        except Exception as error:  # noqa: BLE001 - the parent fails the trial, not the run
            logging.getLogger(__name__).debug("scoring failed", exc_info=True)
            reply = ("failed", f"{type(error).__name__}: {error}", handler.records)
        finally:
            package.removeHandler(handler)
        try:
            connection.send(reply)
        except (OSError, pickle.PicklingError):
            return


class CannotSend(Exception):
    """A call that cannot be pickled (an adapter's object in its events): scored on the loop."""


def _yield_the_cores() -> None:
    """Score at a low priority (its writer threads inherit it): the event loop that stamps
    arrivals, and a product on this machine, must not wait for a core behind scoring.
    Measured with 50 concurrent paced trials on 2 cores: at normal priority the scoring process
    delayed arrival stamps by up to 50 ms (first-audio |p99| 34 ms against 19 ms on the loop).
    Not ``SCHED_IDLE``: on a machine kept busy by other work it starved the scoring for as long
    as that work ran (a 3-trial run took 100 s beside two busy loops)."""
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) < SCORING_NICENESS:
            os.setpriority(os.PRIO_PROCESS, 0, SCORING_NICENESS)


@dataclass
class _Pickled:
    """A pickle and its out-of-band buffers: a call's PCM streams, each joined once and not
    copied into the pickle. Made on the loop; the sending thread only hands
    ``header`` and ``parts`` to the kernel."""

    header: bytes  # the pickle's size, then the buffers' count and sizes
    parts: list[memoryview]  # the pickle, then the buffers (empty ones left out)

    @classmethod
    def of(cls, data: bytes, buffers: list[pickle.PickleBuffer]) -> _Pickled:
        views = [buffer.raw() for buffer in buffers]
        sizes = [view.nbytes for view in views]
        header = struct.pack(f"<QI{len(sizes)}Q", len(data), len(sizes), *sizes)
        return cls(header, [view for view in (memoryview(data), *views) if view.nbytes])


def _pickled(call: Call) -> _Pickled:
    """``call`` as the scoring process receives it: without the clean speech when there are
    no speech metrics (only they read it; a fifth of the bytes)."""
    buffers: list[pickle.PickleBuffer] = []

    def dumps() -> _Pickled:
        data = pickle.dumps(call, protocol=5, buffer_callback=buffers.append)
        return _Pickled.of(data, buffers)

    streams = call.recording.streams
    clean = streams.get(USER_CLEAN)
    if call.speech_metrics or clean is None:
        return dumps()
    streams[USER_CLEAN] = PcmStream()
    try:
        return dumps()
    finally:
        streams[USER_CLEAN] = clean


#: Buffers per ``sendmsg`` (Linux takes up to 1024).
_PARTS_PER_SEND = 512


def _send_parts(raw: socket.socket, parts: list[memoryview]) -> None:
    """Send every part, in order, with as few system calls as the kernel allows (the GIL is
    released during each)."""
    at = 0
    while at < len(parts):
        sent = raw.sendmsg(parts[at:at + _PARTS_PER_SEND])
        while sent:
            size = parts[at].nbytes
            if sent < size:
                parts[at] = parts[at][sent:]
                break
            sent -= size
            at += 1


def _receive_pickled(connection: Connection, raw: socket.socket) -> Any:
    """The object a :class:`_Pickled` was made of: its header (a message of ``connection``),
    then the pickle and its buffers, read from ``raw`` (the same socket) into one buffer."""
    header = connection.recv_bytes()
    size, count = struct.unpack_from("<QI", header)
    sizes = struct.unpack_from(f"<{count}Q", header, struct.calcsize("<QI"))
    data = bytearray(size + sum(sizes))
    view = memoryview(data)
    received = 0
    while received < len(data):
        got = raw.recv_into(view[received:])
        if not got:
            raise EOFError("the parent closed the socket mid-call")
        received += got
    buffers, at = [], size
    for length in sizes:
        buffers.append(view[at:at + length])
        at += length
    return pickle.loads(view[:size], buffers=buffers)


class ScoringFailed(Exception):
    """Scoring raised in the scoring process (a bug): the message names the error."""


class ScoringProcess:
    """The parent's end of one scoring process: started on first use, reused by every run of
    this Python process, replaced when it dies. Calls are pickled on the event loop and sent
    one at a time from a thread of its own, which waits for the reply."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="voicelab-scoring")
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self._raw: socket.socket | None = None  # the same socket, for the calls' buffers
        self._run_key: str | None = None

    @property
    def pid(self) -> int | None:
        """The process's id while it runs (``None`` before it is started), for a benchmark or
        a monitor that reads its CPU time."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def _start(self) -> Connection:
        try:
            return self._spawn()
        except (OSError, ValueError) as error:
            raise ScoringProcessUnavailable(
                f"it could not be started: {type(error).__name__}: {error}") from None

    def _spawn(self) -> Connection:
        self._process, self._connection = start_child(SERVE)
        self._raw = socket.fromfd(self._connection.fileno(), socket.AF_UNIX, socket.SOCK_STREAM)
        self._run_key = None
        return self._connection

    def warm(self) -> None:
        """Start the process now, from its thread (its imports overlap the first call)."""
        self._thread.submit(self._warm_now)

    def _warm_now(self) -> None:
        with self._lock, contextlib.suppress(ScoringProcessUnavailable):  # said when used
            if self._connection is None:
                self._start()

    def _roundtrip(self, run_key: str, loaded_blob: bytes, call: _Pickled,
                   claim: Callable[[], bool] | None) -> bytes | None:
        """Send one pickled call (with its run, when the process has another) and wait for
        the pickled reply: the thread holds the GIL only between the socket calls. ``None``:
        ``claim`` said the call was taken elsewhere (by the idle event loop) while it waited."""
        if claim is not None and not claim():
            return None
        with self._lock:
            connection = self._connection or self._start()
            run = pickle.dumps(loaded_blob if run_key != self._run_key else None,
                               protocol=pickle.HIGHEST_PROTOCOL)
            try:
                connection.send_bytes(run)
                connection.send_bytes(call.header)
                assert self._raw is not None
                _send_parts(self._raw, call.parts)
                self._run_key = run_key
                return connection.recv_bytes()
            except (EOFError, OSError) as error:
                raise ScoringProcessLost(self._lost(error)) from None

    def _lost(self, error: BaseException) -> str:
        process, self._process = self._process, None
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        code = None
        if process is not None:
            try:
                code = process.wait(5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        if code is not None and code < 0 and -code in signal.valid_signals():
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}" if code is not None else type(error).__name__

    async def score(self, run_key: str, loaded_blob: bytes, call: Call, *,
                    claim: Callable[[], bool] | None = None) -> Scored | None:
        """The call scored in the process; ``None`` when ``claim`` (asked by the sending thread
        when the call's turn comes) says it was taken elsewhere."""
        # pickled here, on the loop (~0.8-1.0 ms in place, the streams out of band): from the
        # sending thread it cost the loop ~2 ms a trial, the two threads handing the GIL back
        # and forth while it ran
        try:
            pickled = _pickled(call)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise CannotSend(f"{type(error).__name__}: {error}") from None
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self._thread, self._roundtrip, run_key,
                                           loaded_blob, pickled, claim)
        if reply is None:
            return None
        kind, value, records = pickle.loads(reply)
        for record in records:
            logging.getLogger(record.name).handle(record)
        if kind == "failed":
            raise ScoringFailed(value)
        return value  # type: ignore[no-any-return]


_PROCESS: ScoringProcess | None = None


def scoring_process() -> ScoringProcess:
    """This Python process's scoring process."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = ScoringProcess()
    return _PROCESS


#: Calls in progress on each event loop (a sweep's runs share one); see :func:`live_call`.
_LIVE_CALLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = \
    weakref.WeakKeyDictionary()
#: How often a finishing run's scorer looks again whether the loop is free of calls.
HELP_POLL_SECONDS = 0.01


@contextlib.contextmanager
def live_call() -> Iterator[None]:
    """A call is in progress on this event loop: the loop scores no waiting call meanwhile."""
    loop = asyncio.get_running_loop()
    _LIVE_CALLS[loop] = _LIVE_CALLS.get(loop, 0) + 1
    try:
        yield
    finally:
        _LIVE_CALLS[loop] -= 1


class _Waiting:
    """A call waiting for the scoring process, until its sending thread or the idle loop takes
    it (whichever claims it first, under the scorer's lock)."""

    __slots__ = ("call", "taken", "on_loop")

    def __init__(self, call: Call, loop: asyncio.AbstractEventLoop):
        self.call = call
        self.taken: str | None = None  # "process" or "loop"
        #: the result, when the loop took it
        self.on_loop: asyncio.Future[Scored] = loop.create_future()


class Scorer:
    """Where one run's calls are scored: its scoring process, else the event loop.

    The scoring process takes the calls in the order they ended. Once the run starts no more
    calls (:meth:`finishing`) and no call is in progress on the loop, the loop scores waiting
    calls too, the newest first: the run's last calls no longer wait in one queue while a
    core sits idle (at concurrency 8 the run's end waited 60-280 ms for up to 7 calls)."""

    def __init__(self, loaded: LoadedRun, *, run_key: str, mode: str = "process"):
        self.loaded = loaded
        self.run_key = run_key
        self._write_lock = asyncio.Lock()
        self._process: ScoringProcess | None = None
        self._blob = b""
        self._waiting: list[_Waiting] = []
        self._claims = threading.Lock()  # the sending thread and the loop claim calls
        self._helper: asyncio.Task[None] | None = None
        if mode == "process" and loaded.run.quality_evaluation is None:
            try:
                self._blob = pickle.dumps(loaded)
                self._process = scoring_process()
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                logger.info("scoring on the event loop: the run's configuration cannot be "
                            "sent to a scoring process (%s)", error)

    @property
    def in_process(self) -> bool:
        return self._process is not None

    def warm(self) -> None:
        if self._process is not None:
            self._process.warm()

    async def score(self, call: Call) -> Scored:
        if self._process is not None:
            waiting = _Waiting(call, asyncio.get_running_loop())
            self._waiting.append(waiting)
            try:
                scored = await self._process.score(self.run_key, self._blob, call,
                                                   claim=lambda: self._claim(waiting, "process"))
                return scored if scored is not None else await waiting.on_loop
            except ScoringProcessUnavailable as unavailable:
                self._process = None
                logger.warning("%s: no scoring process (%s): this run's trials are scored on "
                               "the event loop", call.trial_id, unavailable)
            except ScoringProcessLost as lost:
                logger.warning("%s: the scoring process was lost (%s): scored on the event "
                               "loop instead", call.trial_id, lost)
            except CannotSend as error:
                logger.info("%s: scored on the event loop: its recording cannot be sent to the "
                            "scoring process (%s)", call.trial_id, error)
            finally:
                self._waiting.remove(waiting)
            if waiting.taken == "loop":  # the idle loop took it meanwhile
                return await waiting.on_loop
        return await score_on_loop(self.loaded, call, write_lock=self._write_lock)

    def _claim(self, waiting: _Waiting, by: str) -> bool:
        with self._claims:
            if waiting.taken is not None:
                return False
            waiting.taken = by
            return True

    def finishing(self) -> None:
        """The run starts no more calls (for now: a retry pass may start some again): the loop
        helps score the waiting ones when it is free."""
        if self._process is not None and (self._helper is None or self._helper.done()):
            self._helper = asyncio.create_task(self._help())

    async def _help(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            waiting = next((w for w in reversed(self._waiting) if not w.taken), None)
            if waiting is None:
                return
            if _LIVE_CALLS.get(loop, 0):  # another run's call (a sweep): its stamps come first
                await asyncio.sleep(HELP_POLL_SECONDS)
                continue
            if not self._claim(waiting, "loop"):
                continue
            try:
                waiting.on_loop.set_result(await score_on_loop(
                    self.loaded, waiting.call, write_lock=self._write_lock))
            except asyncio.CancelledError:
                waiting.on_loop.cancel()
                raise
            except Exception as error:  # noqa: BLE001 - the call's own scoring reports it
                waiting.on_loop.set_exception(error)


def scoring_mode(value: str, *, key: str = "scoring") -> str:
    if value not in SCORING_MODES:
        raise ConfigError(f"expected one of {', '.join(SCORING_MODES)}, got {value!r}", key=key)
    return value

