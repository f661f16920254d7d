"""How many ``Any`` the public signatures hold: a number to watch falling.

Public means what a package's ``__init__`` exports (``__all__``): functions (parameters and
return), classes (their fields and the public methods they define) and annotated constants.
Each ``Any`` in an annotation counts once (``dict[str, Any]`` is one). The test fails when a
package holds more than its ceiling below: lower a ceiling when the count falls.

``python tests/unit/test_public_any.py`` prints the count of every package.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path

_ANY = re.compile(r"\bAny\b")
#: The packages mypy checks strictly (pyproject.toml), whose counts are held to a ceiling.
CORE = ("config", "recording", "metrics", "scoring", "artifacts", "execution", "analysis",
        "audio", "cost", "doubles", "history", "personas", "providers", "speech", "telemetry")
#: The count each core package may not exceed (its count when the ceiling was last lowered);
#: a core package without a ceiling yet is only reported.
CEILINGS = {"config": 1, "recording": 0, "metrics": 0, "scoring": 2, "artifacts": 3,
            "execution": 5, "analysis": 0, "audio": 0, "cost": 0, "doubles": 0, "history": 0,
            "personas": 0, "providers": 2, "speech": 0, "telemetry": 0}


def _annotations(obj: object) -> Iterator[str]:
    try:
        found = inspect.get_annotations(obj)  # type: ignore[arg-type]
    except TypeError:
        return
    for value in found.values():
        yield value if isinstance(value, str) else repr(value)


def _callables(cls: type) -> Iterator[object]:
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if not getattr(member, "__module__", "voicelab").startswith("voicelab"):
            continue  # made by a library (pydantic's own methods)
        if isinstance(member, staticmethod | classmethod):
            yield member.__func__
        elif isinstance(member, property):
            if member.fget is not None:
                yield member.fget
        elif inspect.isfunction(member):
            yield member


def count_any(package: str) -> int:
    """``Any`` in the public signatures of ``voicelab.<package>``."""
    module = importlib.import_module(f"voicelab.{package}")
    total = 0
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        texts: list[str] = []
        if inspect.isclass(value):
            texts += _annotations(value)
            for member in _callables(value):
                texts += _annotations(member)
        elif inspect.isfunction(value):
            texts += _annotations(value)
        else:  # a constant: its annotation where it is defined
            for source in sys.modules.values():
                if getattr(source, "__name__", "").startswith(module.__name__) and \
                        name in getattr(source, "__annotations__", {}):
                    texts.append(str(source.__annotations__[name]))
                    break
        total += sum(len(_ANY.findall(text)) for text in texts)
    return total


def packages() -> list[str]:
    import voicelab

    return sorted(info.name for info in pkgutil.iter_modules(voicelab.__path__)
                  if info.ispkg and not info.name.startswith("_"))


def test_the_core_packages_hold_no_more_any_than_their_ceilings():
    present = set(packages())
    counts = {name: count_any(name) for name in CORE if name in present and name in CEILINGS}
    over = {name: (count, CEILINGS[name]) for name, count in counts.items()
            if count > CEILINGS[name]}
    assert not over, f"more Any in public signatures than the ceiling (count, ceiling): {over}"


def test_the_counter_sees_an_any():
    # the artifacts package's public models carry JSON documents typed with Any
    assert count_any("artifacts") > 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    rows = [(name, count_any(name)) for name in packages()]
    width = max(len(name) for name, _ in rows)
    for name, count in rows:
        mark = "  (core)" if name in CORE else ""
        print(f"{name:<{width}}  {count:4d}{mark}")
    print(f"{'core':<{width}}  {sum(c for n, c in rows if n in CORE):4d}")
    print(f"{'all':<{width}}  {sum(c for _, c in rows):4d}")
