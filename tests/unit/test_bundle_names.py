"""A bundle's member names are spelled once (``voicelab.artifacts``: ``TRIAL_REPORT``,
``trial_folder(index)``...): no other module writes them as literals."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import voicelab
from voicelab import artifacts

PACKAGE_DIR = Path(voicelab.__file__).parent
NAMES_MODULE = PACKAGE_DIR / "artifacts" / "_names.py"
#: Every member name voicelab writes (the constants' values).
MEMBER_NAMES = {value for name, value in vars(artifacts).items()
                if name.isupper() and isinstance(value, str)
                and re.fullmatch(r"[\w-]+\.(json|jsonl|md|wav|log)", value)}
#: ``trial-`` followed by a formatted index: a trial folder's name built by hand.
TRIAL_FOLDER_FORMAT = re.compile(r"trial-\{[^}]*:03d\}")


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants and f-string texts of ``path`` (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_constants_name_every_member_of_a_trial():
    assert {"trial-report.json", "voice-events.jsonl", "user-sent.wav"} <= MEMBER_NAMES
    assert set(artifacts.TRIAL_FILES) <= MEMBER_NAMES | {
        artifacts.resolved_document(kind) for kind in artifacts.RESOLVED_KINDS}
    assert artifacts.trial_folder(7) == "trial-007"
    assert artifacts.is_trial_folder("trial-1234") and not artifacts.is_trial_folder("trial-x")


def test_no_module_spells_a_member_name():
    offenders = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        if path == NAMES_MODULE or relative.startswith("doubles/"):
            continue
        for line, text in _literals(path):
            if text in MEMBER_NAMES or TRIAL_FOLDER_FORMAT.search(text):
                offenders.append(f"{relative}:{line}: {text}")
    assert offenders == []
