"""The names of a bundle's members, spelled once: every writer and reader uses these.

A run folder holds its report, its log and one folder per trial; a sweep's folder holds a
matrix report and one run folder per cell. A trial folder holds the documents derived from its
recording, the recording itself (voice events and each direction's audio in arrival order),
the configuration it ran with, and its report, written last.
"""

from __future__ import annotations

import re
from pathlib import Path

# --- a run, a sweep ---------------------------------------------------------------------------

#: A run folder's report: its trials, pass rates, gates and exit code.
RUN_REPORT = "run-report.json"
#: A sweep's report: its cells (one run folder each) and their pooled pass rate.
MATRIX_REPORT = "matrix-report.json"
EVALUATOR_LOG = "evaluator.log"
#: A run's or sweep's cells classified against earlier runs (``--history``).
FLAKINESS = "flakiness.json"
#: The link (a local folder) or the name (a store URL) of an artifacts folder's newest run.
LATEST = "latest"
#: Where a run folder keeps the earlier attempts of its retried trials.
ATTEMPTS_FOLDER = "attempts"
#: An earlier attempt's trial report, renamed so only the final attempt reads as the trial.
ATTEMPT_REPORT = "attempt-report.json"

# --- a trial ----------------------------------------------------------------------------------

#: Written last: a trial folder holding it is complete.
TRIAL_REPORT = "trial-report.json"
#: A trial's ordered voice-event timeline, every event with its clock stamps (the raw facts).
VOICE_EVENTS = "voice-events.jsonl"
#: A trial's per-response timing and signal metrics and its probe outcomes.
VOICE_METRICS = "voice-metrics.json"
#: A trial's transcript, both sides, turn by turn.
TRANSCRIPT_JSON = "transcript.json"
TRANSCRIPT_MD = "transcript.md"
TOOL_CALLS = "tool-calls.json"
RAW_ENDPOINT_EVENTS = "raw-endpoint-events.json"
INTEROPERABILITY = "interoperability.json"
#: A persona's own evidence of its session (only when it kept some).
PERSONA_SESSION = "persona-session.json"
#: The output of a product the trial launched itself.
PRODUCT_LOG = "product.log"
#: An ingested call's provenance: the files it came from, its channel map, its turns.
CALL_SOURCE = "call.json"

#: The channels on the listener timeline: what the user said, what the product said, both.
USER_WAV = "user.wav"
PRODUCT_WAV = "product.wav"
MIXED_WAV = "mixed.wav"
#: Each direction's audio in arrival order (the recording's streams): what the user sent and
#: what was received from the product; the user's clean speech (with speech metrics) and what
#: the user heard through a ``to_user`` telephony line.
USER_SENT_WAV = "user-sent.wav"
PRODUCT_RECEIVED_WAV = "product-received.wav"
USER_CLEAN_WAV = "user-clean.wav"
USER_HEARD_WAV = "user-heard.wav"

#: Members an earlier bundle version named otherwise: the name now, and the names it had (a
#: reader looks for each in turn, :func:`member_path`).
LEGACY_NAMES: dict[str, tuple[str, ...]] = {USER_WAV: ("technician.wav",)}  # before 3.0

#: The kinds of configuration a trial keeps (``resolved-<kind>.json``), in writing order.
RESOLVED_KINDS = ("scenario", "persona", "data", "environment", "script", "settings")

_TRIAL_FOLDER = re.compile(r"^trial-\d+$")


def member_path(folder: Path, name: str) -> Path:
    """Where ``folder`` keeps the member ``name``: under its name, else under the name an
    earlier bundle version gave it (:data:`LEGACY_NAMES`), else (absent) its name."""
    for candidate in (name, *LEGACY_NAMES.get(name, ())):
        if (folder / candidate).is_file():
            return folder / candidate
    return folder / name


def resolved_document(kind: str) -> str:
    """The file of one kind of resolved configuration: ``resolved-scenario.json``."""
    return f"resolved-{kind}.json"


def trial_folder(index: int) -> str:
    """The folder of trial ``index`` in its run folder: ``trial-001``."""
    return f"trial-{index:03d}"


def is_trial_folder(name: str) -> bool:
    return _TRIAL_FOLDER.match(name) is not None


def running_marker(index: int, attempt: int | str) -> str:
    """The hidden marker of a trial in progress on a worker: ``.trial-001.1.running``."""
    return f".{trial_folder(index)}.{attempt}.running"


def running_markers(index: int) -> str:
    """A glob of every running marker of trial ``index``."""
    return f".{trial_folder(index)}.*.running"


#: A trial folder's members, in the order a trial writes them (its report last).
TRIAL_FILES = (
    TRANSCRIPT_JSON, TRANSCRIPT_MD, TOOL_CALLS, RAW_ENDPOINT_EVENTS, VOICE_EVENTS, VOICE_METRICS,
    INTEROPERABILITY, USER_WAV, PRODUCT_WAV, MIXED_WAV, USER_SENT_WAV, PRODUCT_RECEIVED_WAV,
    *(resolved_document(kind) for kind in RESOLVED_KINDS), TRIAL_REPORT,
)
