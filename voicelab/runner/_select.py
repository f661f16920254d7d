"""Choosing and stopping trials as pytest does: ``--only`` (like ``-k``) and ``--fail-fast``
(like ``--maxfail``), for a run and for every cell of a sweep.

An ``--only`` expression is words joined by ``and``, ``or``, ``not`` and parentheses; a word
matches a trial when it is a case-insensitive substring of one of the trial's names: its
scenario id, persona name, environment name, cell id (``scenario__persona__environment``) or
trial id (``trial-003``). ``booking and not noisy``, ``trial-001 or trial-002``. Several
``--only`` are alternatives (``or``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_OPERATORS = ("and", "or", "not")

Match = Callable[[tuple[str, ...]], bool]


class _Parser:
    """A recursive-descent parser of one expression: or > and > not > word | ( expr )."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _TOKEN.findall(text)
        self.position = 0

    def fail(self, problem: str) -> ConfigError:
        return ConfigError(f"{problem} in {self.text!r} (words joined by and, or, not and "
                           "parentheses, as pytest -k)", source="CLI", key="--only")

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("an expression ends too early")
        self.position += 1
        return token

    def parse(self) -> Match:
        if not self.tokens:
            raise self.fail("nothing to match")
        match = self.either()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r}")
        return match

    def either(self) -> Match:
        terms = [self.both()]
        while self.peek() == "or":
            self.take()
            terms.append(self.both())
        return lambda names: any(term(names) for term in terms)

    def both(self) -> Match:
        factors = [self.negated()]
        while self.peek() == "and":
            self.take()
            factors.append(self.negated())
        return lambda names: all(factor(names) for factor in factors)

    def negated(self) -> Match:
        if self.peek() == "not":
            self.take()
            inner = self.negated()
            return lambda names: not inner(names)
        token = self.take()
        if token == "(":
            inner = self.either()
            if self.take() != ")":
                raise self.fail("a '(' without its ')'")
            return inner
        if token == ")" or token in _OPERATORS:
            raise self.fail(f"unexpected {token!r}")
        word = token.lower()
        return lambda names: any(word in name for name in names)


@dataclass(frozen=True)
class TrialSelection:
    """The trials ``--only`` chooses (:meth:`parse`); ``everything`` when none was given."""

    expressions: tuple[str, ...] = ()
    _matches: tuple[Match, ...] = ()

    @classmethod
    def parse(cls, expressions: Sequence[str] | str | None) -> TrialSelection:
        if expressions is None:
            return cls()
        given = (expressions,) if isinstance(expressions, str) else tuple(expressions)
        return cls(given, tuple(_Parser(text).parse() for text in given))

    @property
    def everything(self) -> bool:
        return not self.expressions

    def selects(self, *, scenario: str, persona: str, environment: str, trial: int,
                cell_id: str | None = None) -> bool:
        if self.everything:
            return True
        from ..artifacts import trial_folder

        names = tuple(name.lower() for name in (scenario, persona, environment,
                                                cell_id or "", trial_folder(trial)) if name)
        return any(match(names) for match in self._matches)

    def trials(self, *, scenario: str, persona: str, environment: str, count: int,
               cell_id: str | None = None) -> list[int]:
        """The trial numbers (1..count) it selects of one run (or cell)."""
        return [index for index in range(1, count + 1)
                if self.selects(scenario=scenario, persona=persona, environment=environment,
                                trial=index, cell_id=cell_id)]

    def nothing_selected(self, what: str) -> ConfigError:
        return ConfigError(f"{' or '.join(repr(e) for e in self.expressions)} selects no "
                           f"trial of {what} (it matches scenario ids, persona and environment "
                           "names, cell ids and trial ids such as trial-002)", source="CLI",
                           key="--only")


class FailFast:
    """``--fail-fast N``: once ``limit`` trials did not pass, no further trial starts (those in
    flight finish and are kept). One object may be shared by every cell of a sweep. A trial
    still inconclusive counts only once it has no retry left."""

    def __init__(self, limit: int):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"must be a whole number of at least 1, got {limit!r}",
                              source="CLI", key="--fail-fast")
        self.limit = limit
        self.not_passed = 0

    @property
    def stopped(self) -> bool:
        return self.not_passed >= self.limit

    def finished(self, *, passed: bool, final: bool) -> None:
        """A trial ended; ``final``: it will not be run again (no inconclusive retry left)."""
        if not passed and final:
            self.not_passed += 1

    def message(self, not_run: int) -> str:
        return (f"stopped after {self.not_passed} trial(s) did not pass (--fail-fast "
                f"{self.limit}): {not_run} planned trial(s) did not run")
