"""What every command's output shares: the program name, and paths shown relative to the
working directory (messages stay short and a CI log stays readable)."""

from __future__ import annotations

import os

PROG = "voice-evaluator"


def relative(text: str) -> str:
    cwd = os.getcwd().rstrip("/") + "/"
    return text.replace(cwd, "")
