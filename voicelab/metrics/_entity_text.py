"""Whether a key entity (an account number, a time, a name, a date) occurs in a text, however
it is written or recognized.

A recognizer writes numbers as words ("four four seven one", "four thousand four hundred
seventy one", "forty four seventy one"), a product's transcript as digits ("4471", "44-71");
all of them are the digits 4471. A run of number tokens is read as a cardinal where its words
compose ("seventy one": 71) and as consecutive groups where they do not ("four four": 4 then 4),
and the groups' digits are joined. Words a recognizer confuses with digits ("for", "to", "won",
"ate", "oh") count only next to a real number word, and may be dropped at a run's edges ("my
number is for four seven one" still says 4471; "4417" never does).

Kinds: ``number`` (the digits), ``time`` (a clock time: "16:00", "4 pm", "sixteen hundred",
"four o'clock" for 04:00 or 16:00), and ``text`` / ``name`` / ``date`` (the words, case,
punctuation and number words aside: "March 3rd" is "march third").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
          "seven": 7, "eight": 8, "nine": 9, "nought": 0}
_TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
          "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
             "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
             "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
             "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
             "twentieth": 20, "thirtieth": 30}
#: words a recognizer writes for a digit it heard (or a speaker says for zero)
_WEAK = {"oh": 0, "o": 0, "for": 4, "fore": 4, "to": 2, "too": 2, "won": 1, "ate": 8}
_SCALES = {"hundred": 100, "thousand": 1000}

#: script markup such as ``{pause: 1.2}`` is not what anyone said
_MARKUP = re.compile(r"\{[^{}]*\}")
_TOKEN = re.compile(r"\d+(?:st|nd|rd|th)?|[a-z]+")
_OCLOCK = re.compile(r"o'?\s?clock")


@dataclass(frozen=True)
class _Token:
    word: str
    #: ``digits`` (written digits), ``unit``, ``teen``, ``tens``, ``scale``, ``and``, ``word``
    kind: str
    value: int = 0
    weak: bool = False
    digits: str = ""


def _classify(word: str) -> _Token:
    if word[0].isdigit():
        return _Token(word, "digits", digits=word.rstrip("stndrh"))
    for table, kind in ((_UNITS, "unit"), (_TEENS, "teen"), (_TENS, "tens")):
        if word in table:
            return _Token(word, kind, table[word])
    if word in _ORDINALS:
        value = _ORDINALS[word]
        return _Token(word, "unit" if value < 10 else "teen" if value < 20 else "tens", value)
    if word in _SCALES:
        return _Token(word, "scale", _SCALES[word])
    if word in _WEAK:
        return _Token(word, "unit", _WEAK[word], weak=True)
    return _Token(word, "and" if word == "and" else "word")


def tokens_of(text: str) -> list[str]:
    """The lowercased word and digit tokens of ``text`` (markup, punctuation, hyphens and the
    apostrophe of "o'clock" aside)."""
    cleaned = _OCLOCK.sub(" oclock ", _MARKUP.sub(" ", text.casefold()))
    return _TOKEN.findall(cleaned.replace("'", ""))


def _is_number(token: _Token) -> bool:
    return token.kind in ("digits", "unit", "teen", "tens", "scale")


def _runs(tokens: list[_Token]) -> Iterator[tuple[int, int]]:
    """[start, end) of each run of number tokens: weak words only beside a strong number
    token, "and" only inside a cardinal ("four hundred and two")."""
    def strong(i: int) -> bool:
        return 0 <= i < len(tokens) and _is_number(tokens[i]) and not tokens[i].weak

    def member(i: int) -> bool:
        token = tokens[i]
        if token.kind == "and":
            return i > 0 and tokens[i - 1].kind == "scale" and strong(i + 1)
        if token.weak:
            return strong(i - 1) or strong(i + 1) or (
                (i > 0 and tokens[i - 1].weak and strong(i - 2))
                or (i + 1 < len(tokens) and tokens[i + 1].weak and strong(i + 2)))
        return _is_number(token)

    start = None
    for index in range(len(tokens) + 1):
        inside = index < len(tokens) and member(index)
        if inside and start is None:
            start = index
        elif not inside and start is not None:
            yield start, index
            start = None


def _digits(tokens: list[_Token]) -> str:
    """The digits a run says: its cardinals' and its digit groups' digits, joined."""
    groups: list[str] = []
    total = group = 0
    started = False
    last = ""

    def flush() -> None:
        nonlocal total, group, started
        if started:
            groups.append(str(total + group))
        total = group = 0
        started = False

    for token in tokens:
        kind = token.kind
        if kind == "digits":
            flush()
            groups.append(token.digits)
            last = kind
            continue
        if kind == "and":
            continue
        composes = last in ("scale", "and") or (kind == "unit" and last == "tens")
        if kind == "scale":
            if not started:
                started, group = True, 1
            if token.value == 1000:
                total, group = (total + group) * 1000, 0
            elif group % 100 and group < 100:
                group *= 100
            else:
                flush()
                started, group = True, 100
        elif started and composes:
            group += token.value
        else:
            flush()
            started, group = True, token.value
        last = kind
    flush()
    return "".join(groups)


@dataclass(frozen=True)
class NumberRun:
    """A run of number tokens in a text: every digit string it may say (its weak edge words
    dropped or kept), and the word after it (``pm``, ``oclock``: a time's marker)."""

    readings: frozenset[str]
    #: what it says with every word kept (the reading a report shows)
    full: str
    after: tuple[str, ...]


def number_runs(text: str) -> list[NumberRun]:
    words = tokens_of(text)
    tokens = [_classify(word) for word in words]
    runs = []
    for start, end in _runs(tokens):
        run = tokens[start:end]
        lead = next((i for i, t in enumerate(run) if not t.weak), len(run))
        trail = next((i for i, t in enumerate(reversed(run)) if not t.weak), len(run))
        readings = {_digits(run[a:len(run) - b]) for a in range(lead + 1)
                    for b in range(trail + 1) if a + b < len(run)}
        runs.append(NumberRun(frozenset(r for r in readings if r), _digits(run),
                              tuple(words[end:end + 2])))
    return runs


def _normalized_words(text: str) -> list[str]:
    """``text``'s tokens with each run of number words as its digits (for text entities)."""
    words = tokens_of(text)
    tokens = [_classify(word) for word in words]
    out: list[str] = []
    position = 0
    for start, end in _runs(tokens):
        out += words[position:start]
        out.append(_digits(tokens[start:end]))
        position = end
    return out + words[position:]


def _clock(digits: str, after: tuple[str, ...]) -> list[tuple[int, int]]:
    """The clock times (hour, minute) ``digits`` followed by ``after`` may say."""
    if not digits.isdigit() or len(digits) > 4:
        return []
    hour, minute = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
    if hour > 24 or minute > 59:
        return []
    marker = "".join(after[:2]) if after[:1] == ("p",) or after[:1] == ("a",) else \
        (after[0] if after else "")
    if marker.startswith("pm") and hour < 12:
        return [(hour + 12, minute)]
    if marker.startswith("am"):
        return [(hour % 12, minute)]
    if hour <= 12:  # "four o'clock", "4:00": either half of the day
        return [(hour % 12, minute), (hour % 12 + 12, minute)]
    return [(hour % 24, minute)]


def clock_times(text: str) -> list[tuple[int, int]]:
    """Every clock time ``text`` may say."""
    return [time for run in number_runs(text) for digits in run.readings
            for time in _clock(digits, run.after)]


def entity_value(value: str, kind: str) -> str | tuple[int, int] | tuple[str, ...] | None:
    """A configured entity value in the form it is compared in: a number's digits, a time's
    (hour, minute), a text's words. None: ``value`` says no such thing."""
    if kind == "number":
        runs = number_runs(value)
        digits = "".join(run.full for run in runs)
        return digits or None
    if kind == "time":
        runs = number_runs(value)
        if len(runs) != 1:
            return None
        times = _clock(runs[0].full, runs[0].after)
        if len(times) == 2:  # no "am" / "pm": the hour as written ("04:00", "12:30")
            digits = runs[0].full
            return int(digits if len(digits) <= 2 else digits[:-2]) % 24, times[0][1]
        return times[0] if times else None
    words = tuple(_normalized_words(value))
    return words or None


def occurs(value: str, kind: str, text: str) -> bool:
    """``value`` (an entity of ``kind``) is said in ``text``."""
    wanted = entity_value(value, kind)
    if wanted is None:
        return False
    if kind == "number":
        return any(wanted in run.readings for run in number_runs(text))
    if kind == "time":
        assert isinstance(wanted, tuple)
        return wanted in clock_times(text)
    words = _normalized_words(text)
    size = len(wanted)
    return any(tuple(words[i:i + size]) == wanted for i in range(len(words) - size + 1))


def numbers_in(text: str) -> list[str]:
    """The numbers ``text`` says, each run as its full reading (what a report shows as heard)."""
    return [run.full for run in number_runs(text) if run.full]
