"""docs/api.md lists every public name (each package's ``__all__``) with what its source says of
it: a name without words, or a page not regenerated after the public surface changed, fails."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("api_reference",
                                                  ROOT / "scripts" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["api_reference"] = module
    spec.loader.exec_module(module)
    return module


def test_every_public_name_says_what_it_is_and_the_page_is_current():
    text, silent = _script().page()
    assert silent == []
    assert (ROOT / "docs" / "api.md").read_text(encoding="utf-8") == text, \
        "docs/api.md is out of date: python scripts/api_reference.py --write"


def test_the_page_lists_the_public_names_only():
    text, _ = _script().page()
    assert "| `RunOptions` |" in text and "| `load_frames` |" in text
    assert "| `write_trial_files` |" not in text  # voicelab's own (artifacts, for the runner)
