"""The demo agent's understanding and dialogue: pure functions over recognized words.

The agent hears the user through pocketsphinx, which produces lowercase words ("please record my
plan for today set a reminder at sixteen hundred"). These rules decide what the agent
understood and what it does next. They are deliberately small, and they take the recognizer's
output literally: a misrecognized word (``planet`` for ``plan``) is not understood.

Times are spoken forms: ``four p m``, ``four thirty in the afternoon``, ``sixteen hundred``,
``sixteen thirty``, ``oh nine hundred``, ``four o'clock``, ``half past four``, ``quarter to
five``, ``noon``, ``at four``, and written ``16:00`` or ``4 pm``. Without ``a m`` / ``p m`` or a
time of day, the hours 1 to 7 mean the afternoon (a working day's reminders): ``four o'clock``
is 16:00. A military form (``sixteen hundred``, ``oh nine thirty``) is always on the 24-hour
clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_TOPIC = "daily planning"
DEFAULT_REMINDER_TEXT = "Follow up on the daily plan"

OPENING_TEXT = "Good morning. Please tell me your daily plan and the reminder you want saved."
REPEAT_TEXT = ("Sorry, I did not catch that. Please tell me your daily plan and the reminder "
               "again.")

PLAN_WORDS = frozenset({"plan", "plans", "planned", "planning", "schedule", "agenda"})
REMINDER_WORDS = frozenset({"reminder", "reminders", "remind", "reminded", "reminding"})

_UNITS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9}
_TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
          "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_ZERO = ("oh", "o", "zero")
_NUMBER_WORDS = {**_UNITS, **_TEENS, **_TENS}
_WORD_OF = {value: word for word, value in _NUMBER_WORDS.items()}
_AFTERNOON_HOURS = range(1, 8)  # without a m / p m, "four" is 16:00

_TOKEN = re.compile(r"\d{1,2}:\d{2}|\d+|[a-z]+(?:'[a-z]+)?")
_PM = (("p", "m"), ("pm",), ("in", "the", "afternoon"), ("in", "the", "evening"), ("tonight",))
_AM = (("a", "m"), ("am",), ("in", "the", "morning"))
_OCLOCK = (("o'clock",), ("oclock",), ("o", "clock"))


def words_of(text: str | None) -> list[str]:
    """Lowercase word and number tokens: ``"Set it for 4 p.m., please"`` -> set it for 4 p m
    please."""
    return _TOKEN.findall((text or "").casefold().replace("\u2019", "'"))


@dataclass(frozen=True)
class SpokenTime:
    """A time of day found in speech: ``time`` as ``HH:MM`` and the ``words`` that said it."""

    time: str
    words: str


def _number(tokens: list[str], index: int, *, limit: int) -> tuple[int, int] | None:
    """A number below ``limit`` spoken at ``index`` (``forty five``, ``16``) and the next index."""
    if index >= len(tokens):
        return None
    token = tokens[index]
    if token.isdigit():
        value = int(token)
        return (value, index + 1) if value < limit else None
    if token in _TENS:
        value, end = _TENS[token], index + 1
        if end < len(tokens) and tokens[end] in _UNITS:
            value, end = value + _UNITS[tokens[end]], end + 1
        return (value, end) if value < limit else None
    single = _UNITS.get(token, _TEENS.get(token))
    return (single, index + 1) if single is not None and single < limit else None


def _phrase_at(tokens: list[str], index: int, phrases: tuple[tuple[str, ...], ...]) -> int:
    """The index after the first of ``phrases`` starting at ``index``, else ``index``."""
    for phrase in phrases:
        if tuple(tokens[index:index + len(phrase)]) == phrase:
            return index + len(phrase)
    return index


def _minutes(tokens: list[str], index: int) -> tuple[int, int] | None:
    """Minutes after an hour: ``thirty``, ``forty five``, ``fifteen``, ``oh five``, ``30``."""
    if index < len(tokens) and tokens[index] in _ZERO:
        unit = _number(tokens, index + 1, limit=10)
        return (unit[0], unit[1]) if unit and tokens[index + 1] in _UNITS else None
    found = _number(tokens, index, limit=60)
    if found is None or (found[0] < 10 and not tokens[index].isdigit()):
        return None  # "four five" is not 4:05
    return found


def _clock(hour: int, minute: int, meridiem: str | None) -> str | None:
    if meridiem == "pm" and 1 <= hour < 12:
        hour += 12
    elif meridiem == "am" and hour == 12:
        hour = 0
    elif meridiem is None and hour in _AFTERNOON_HOURS:
        hour += 12
    if not (0 <= hour < 24 and 0 <= minute < 60):
        return None
    return f"{hour:02d}:{minute:02d}"


def _meridiem(tokens: list[str], index: int) -> tuple[str | None, int]:
    end = _phrase_at(tokens, index, _PM)
    if end > index:
        return "pm", end
    end = _phrase_at(tokens, index, _AM)
    return ("am", end) if end > index else (None, index)


def _time_at(tokens: list[str], index: int) -> tuple[str, int] | None:
    """A time starting exactly at ``index``: its ``HH:MM`` and the index after its words."""
    token = tokens[index]
    if token in ("noon", "midday"):
        return "12:00", index + 1
    if token == "midnight":
        return "00:00", index + 1
    if ":" in token:
        hour, minute = (int(part) for part in token.split(":"))
        meridiem, end = _meridiem(tokens, index + 1)
        if meridiem is None and hour < 24:
            return (f"{hour:02d}:{minute:02d}", end) if minute < 60 else None
        clock = _clock(hour, minute, meridiem) if hour <= 12 else None
        return (clock, end) if clock else None
    if token in ("half", "quarter"):
        return _past_or_to(tokens, index)
    if token == "zero":
        hour, end, military = 0, index + 1, True
    elif token in _ZERO:  # oh nine hundred
        if index + 1 >= len(tokens) or tokens[index + 1] not in _UNITS:
            return None
        hour, end, military = _UNITS[tokens[index + 1]], index + 2, True
    else:
        found = _number(tokens, index, limit=24)
        if found is None:
            return None
        (hour, end), military = found, False
    if end < len(tokens) and tokens[end] == "hundred":  # sixteen hundred (hours)
        return f"{hour:02d}:00", _phrase_at(tokens, end + 1, (("hours",),))
    minute_found = _minutes(tokens, end)
    minute, end = minute_found if minute_found else (0, end)
    after_oclock = _phrase_at(tokens, end, _OCLOCK)
    meridiem, after = _meridiem(tokens, after_oclock)
    if after_oclock > end or meridiem is not None:
        clock = _clock(hour, minute, meridiem) if hour <= 12 or meridiem is None else None
        return (clock, after) if clock and not military else None
    after_hours = _phrase_at(tokens, end, (("hours",),))
    said_oh = minute_found is not None and tokens[end - 2] in _ZERO
    if minute_found and (military or hour >= 13 or after_hours > end or said_oh):
        return f"{hour:02d}:{minute:02d}", after_hours  # sixteen thirty, ten oh five
    if military or hour > 12 or not (index > 0 and tokens[index - 1] in ("at", "by")):
        return None
    clock = _clock(hour, minute, None)
    return (clock, end) if clock else None


def _past_or_to(tokens: list[str], index: int) -> tuple[str, int] | None:
    """``half past four``, ``quarter past four``, ``quarter to five`` (plus a m / p m)."""
    offset = 30 if tokens[index] == "half" else 15
    if index + 1 >= len(tokens) or tokens[index + 1] not in ("past", "to"):
        return None
    found = _number(tokens, index + 2, limit=13)
    if found is None or found[0] == 0 or tokens[index + 1] == "to" and offset == 30:
        return None
    hour, end = found
    minute = offset
    if tokens[index + 1] == "to":
        hour, minute = (hour - 1) or 12, 60 - offset
    meridiem, end = _meridiem(tokens, _phrase_at(tokens, end, _OCLOCK))
    clock = _clock(hour, minute, meridiem)
    return (clock, end) if clock else None


def parse_spoken_time(text: str | None) -> SpokenTime | None:
    """The first time of day said in ``text`` (see the module docstring), or None."""
    tokens = words_of(text)
    for index in range(len(tokens)):
        found = _time_at(tokens, index)
        if found is not None:
            clock, end = found
            return SpokenTime(clock, " ".join(tokens[index:end]))
    return None


def spoken_time(clock: str) -> str:
    """``HH:MM`` as the agent says it, in military words: 16:00 -> "sixteen hundred",
    09:05 -> "oh nine oh five", 16:30 -> "sixteen thirty", 10:30 -> "ten thirty hours".
    :func:`parse_spoken_time` reads every one back to the same time."""
    hour, minute = (int(part) for part in clock.split(":"))
    hour_words = "zero" if hour == 0 else _say(hour) if hour >= 10 else f"oh {_say(hour)}"
    if minute == 0:
        return f"{hour_words} hundred"
    if minute < 10:
        return f"{hour_words} oh {_say(minute)}"
    # "ten thirty" alone could be a number; "hours" marks the 24-hour clock
    suffix = " hours" if 10 <= hour <= 12 else ""
    return f"{hour_words} {_say(minute)}{suffix}"


def _say(number: int) -> str:
    if number in _WORD_OF:
        return _WORD_OF[number]
    tens, unit = divmod(number, 10)
    return f"{_WORD_OF[tens * 10]} {_WORD_OF[unit]}"


# --- the init request ---------------------------------------------------------------------

@dataclass(frozen=True)
class RequestedReminder:
    """The reminder the opaque init data asks for; ``time`` is None when it names none."""

    text: str
    time: str | None


def _from_request(request: Mapping[str, object], key: str) -> object:
    value = request.get(key)
    context = request.get("context")
    if value is None and isinstance(context, Mapping):
        value = context.get(key)
    return value


def topic_from_request(request: Mapping[str, object]) -> str:
    topic = _from_request(request, "topic")
    return topic.strip() if isinstance(topic, str) and topic.strip() else DEFAULT_TOPIC


def reminder_from_request(request: Mapping[str, object]) -> RequestedReminder:
    """``requested_reminder`` (top level or under ``context``): "Submit the weekly summary at
    16:00" -> ("Submit the weekly summary", "16:00")."""
    requested = _from_request(request, "requested_reminder")
    if not isinstance(requested, str) or not requested.strip():
        return RequestedReminder(DEFAULT_REMINDER_TEXT, None)
    found = parse_spoken_time(requested)
    text = requested
    if found is not None:
        text = re.sub(r"\s*\b(?:at|by)\s*$", "", requested[:_span_start(requested, found)])
    return RequestedReminder(text.strip(" .,") or DEFAULT_REMINDER_TEXT,
                             found.time if found else None)


def _span_start(text: str, found: SpokenTime) -> int:
    first = found.words.split()[0]
    match = re.search(rf"\b{re.escape(first)}", text.casefold())
    return match.start() if match else len(text)


# --- one user turn ------------------------------------------------------------------------

@dataclass(frozen=True)
class Understanding:
    """What the rules took from one recognized utterance."""

    heard: str
    mentions_plan: bool
    mentions_reminder: bool
    time: SpokenTime | None

    @property
    def useful(self) -> bool:
        return self.mentions_plan or self.mentions_reminder or self.time is not None


def understand(heard: str) -> Understanding:
    tokens = set(words_of(heard))
    return Understanding(heard=heard, mentions_plan=bool(tokens & PLAN_WORDS),
                         mentions_reminder=bool(tokens & REMINDER_WORDS),
                         time=parse_spoken_time(heard))


@dataclass(frozen=True)
class DialogueState:
    plan_recorded: bool = False
    reminder_saved: bool = False
    awaiting_time: bool = False  # the user asked for a reminder; the agent asked when


@dataclass(frozen=True)
class ReminderToSave:
    text: str
    time: str
    time_source: str  # "speech" or "request"
    time_heard: str | None  # the words that said the time, when it came from speech


@dataclass(frozen=True)
class Decision:
    """What the agent does for one user turn."""

    record_plan: bool
    reminder: ReminderToSave | None
    reply_text: str
    state: DialogueState  # after this turn

    @property
    def completes(self) -> bool:
        return self.state.plan_recorded and self.state.reminder_saved


def decide(state: DialogueState, understood: Understanding, *,
           requested: RequestedReminder) -> Decision:
    """The agent's next step: record the plan when it heard one, save the reminder when it
    heard one (with the spoken time, else the request's time, else it asks when), confirm
    what it did and ask for what is still missing, or ask the user to repeat."""
    wants_reminder = understood.mentions_reminder or (state.awaiting_time
                                                      and understood.time is not None)
    if not (understood.mentions_plan or wants_reminder):
        return Decision(False, None, REPEAT_TEXT, state)
    reminder = None
    awaiting_time = state.awaiting_time
    if wants_reminder:
        if understood.time is not None:
            reminder = ReminderToSave(requested.text, understood.time.time, "speech",
                                      understood.time.words)
        elif requested.time is not None:
            reminder = ReminderToSave(requested.text, requested.time, "request", None)
        awaiting_time = reminder is None
    after = DialogueState(plan_recorded=state.plan_recorded or understood.mentions_plan,
                          reminder_saved=state.reminder_saved or reminder is not None,
                          awaiting_time=awaiting_time)
    done = []
    if understood.mentions_plan:
        done.append("I recorded your daily plan")
    if reminder is not None:
        done.append(f"I saved the reminder for {spoken_time(reminder.time)}")
    sentences = [", and ".join(done) + "."] if done else []
    if after.awaiting_time:
        sentences.append("What time should I set the reminder for?")
    elif not after.reminder_saved:
        sentences.append("Which reminder do you want saved?")
    if not after.plan_recorded:
        sentences.append("What is your daily plan?")
    return Decision(understood.mentions_plan, reminder, " ".join(sentences), after)
