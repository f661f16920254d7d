"""Disfluent caller speech: fillers, restarts and self-corrections applied to a turn's text.

A pure function of the profile, the trial's seed, the turn's place in the script and its text,
so the same seed always makes the same words (and, through the speech engine, the same
samples). What was applied is returned beside the text so the bundle can say it.

A self-correction is only made where the text has a word that can honestly be corrected: a
weekday, a month or a digit. The wrong word comes first and the turn's own word last, so the
meaning the script intends is what the caller ends up saying. Markers in braces (``{pause: 1.2}``)
are kept as they are and never counted as words.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field

from pydantic import JsonValue

from ..config import DisfluencyConfig

_TOKEN = re.compile(r"\{[^{}]*\}|\S+")
_WORD_CORE = re.compile(r"^(\W*)(.*?)(\W*)$", re.UNICODE)

#: the usual fillers by primary language subtag (``filler_words`` overrides them)
FILLERS: dict[str, tuple[str, ...]] = {
    "en": ("um", "uh", "you know", "er"),
    "de": ("äh", "ähm", "also"),
    "fr": ("euh", "ben", "bah"),
    "es": ("eh", "este", "pues"),
}
#: what a caller says between a wrong word and its correction
CORRECTION_CUES: dict[str, str] = {"en": "no", "de": "nein", "fr": "non", "es": "no"}

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
# "may" and "march" are ordinary English words too: only corrected when capitalized
_LOWERCASE_AMBIGUOUS = {"may", "march"}


@dataclass(frozen=True)
class DisfluentText:
    """A turn's text as spoken, and what was done to the script's text."""

    text: str
    #: each change made, as a JSON object (``kind`` and what it said)
    applied: list[JsonValue] = field(default_factory=list)

    def as_metadata(self, original: str) -> dict[str, JsonValue]:
        return {"script_text": original, "applied": self.applied}


def _rng(seed: int, turn_key: str, text: str) -> random.Random:
    digest = hashlib.sha256(f"disfluency\x00{seed}\x00{turn_key}\x00{text}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _primary(language: str) -> str:
    return language.split("-", 1)[0].lower()


def _is_word(token: str) -> bool:
    return not token.startswith("{") and any(char.isalnum() for char in token)


def _wrong_alternative(core: str, rng: random.Random) -> str | None:
    """A different word of the same kind as ``core`` (same capitalization), else None."""
    lowered = core.lower()
    for names in (_WEEKDAYS, _MONTHS):
        if lowered in names:
            if lowered in _LOWERCASE_AMBIGUOUS and not core[:1].isupper():
                return None
            wrong = rng.choice([name for name in names if name != lowered])
            return wrong.capitalize() if core[:1].isupper() else wrong
    if len(core) == 1 and core.isdigit():
        return rng.choice([digit for digit in "0123456789" if digit != core])
    return None


def _correctable(tokens: list[str], language: str) -> list[int]:
    """Indexes of the tokens a self-correction may replace."""
    english = _primary(language) == "en"
    found = []
    for index, token in enumerate(tokens):
        if not _is_word(token):
            continue
        core = _WORD_CORE.match(token).group(2)  # type: ignore[union-attr]
        if (len(core) == 1 and core.isdigit()) or (english and _wrong_alternative(
                core, random.Random(0)) is not None):
            found.append(index)
    return found


def make_disfluent(text: str, profile: DisfluencyConfig, *, seed: int, turn_key: str,
                   language: str = "en-US") -> DisfluentText:
    """``text`` with the profile's disfluencies, chosen by ``seed`` and ``turn_key`` (the
    turn's place in the script: the same sentence in two places may differ)."""
    if not profile.active or not text.strip():
        return DisfluentText(text)
    rng = _rng(seed, turn_key, text)
    # Every draw happens whatever the outcome, so one kind's probability never shifts the
    # choices of another.
    draw_restart, draw_filler, draw_correction = rng.random(), rng.random(), rng.random()
    tokens = _TOKEN.findall(text)
    words = [index for index, token in enumerate(tokens) if _is_word(token)]
    applied: list[dict[str, JsonValue]] = []
    prefix: dict[int, list[str]] = {}  # before token i: extra tokens

    targets = _correctable(tokens, language)
    target = rng.choice(targets) if targets else None
    if target is not None and draw_correction < profile.self_corrections:
        match = _WORD_CORE.match(tokens[target])
        assert match is not None
        lead, core, _ = match.groups()
        wrong = _wrong_alternative(core, rng)
        if wrong is not None:
            cue = CORRECTION_CUES.get(_primary(language), "no")
            prefix.setdefault(target, []).append(f"{lead}{wrong}, {cue},")
            tokens[target] = tokens[target][len(lead):]
            applied.append({"kind": "self_correction", "said": wrong, "corrected_to": core})

    boundaries = [words[0]] if words else []
    boundaries += [words[i + 1] for i in range(len(words) - 1)
                   if tokens[words[i]].endswith(",")]
    boundary = rng.choice(boundaries) if boundaries else None
    fillers = profile.filler_words or list(FILLERS.get(_primary(language), FILLERS["en"]))
    filler = rng.choice(fillers)
    if boundary is not None and draw_filler < profile.fillers:
        spoken = filler.capitalize() if boundary == words[0] and tokens[0][:1].isupper() \
            else filler
        prefix.setdefault(boundary, []).insert(0, f"{spoken},")
        applied.append({"kind": "filler", "word": filler, "before_word": words.index(boundary)})

    restart_length = 1 + rng.randrange(2)
    corrected_first = bool(words) and target == words[0] and any(
        item["kind"] == "self_correction" for item in applied)
    if len(words) >= 3 and draw_restart < profile.restarts and not corrected_first:
        first = [tokens[i] for i in words[:restart_length]]
        if all(not token.endswith((",", ".", "?", "!")) for token in first):
            said = " ".join(first)
            prefix.setdefault(words[0], []).append(f"{said}-")
            applied.append({"kind": "restart", "words": said})

    if not applied:
        return DisfluentText(text)
    spoken_tokens: list[str] = []
    for index, token in enumerate(tokens):
        spoken_tokens += prefix.get(index, [])
        spoken_tokens.append(token)
    return DisfluentText(" ".join(spoken_tokens), [*applied])


def disfluency_instructions(profile: DisfluencyConfig, *, language: str) -> list[str]:
    """What a language-model persona is asked for to speak with ``profile`` (none: nothing)."""
    if not profile.active:
        return []
    fillers = profile.filler_words or list(FILLERS.get(_primary(language), FILLERS["en"]))
    asks = []
    if profile.fillers:
        asks.append(f"in about {profile.fillers:.0%} of your replies, hesitate once with a "
                    f"filler such as {', '.join(repr(word) for word in fillers)}")
    if profile.restarts:
        asks.append(f"in about {profile.restarts:.0%} of your replies, start your first words "
                    f"twice (\"I want- I want to\")")
    if profile.self_corrections:
        asks.append(f"in about {profile.self_corrections:.0%} of the replies that say a day, "
                    f"month or number, say a wrong one first and correct yourself (\"Tuesday, "
                    f"no, Wednesday\"); the last one you say must be the right one")
    return ["Speak like a real caller, not a written text: " + "; ".join(asks) + "."]
