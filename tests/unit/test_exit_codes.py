"""Every exit code is decided by voicelab._exit_codes, and no other module decides one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import voicelab
from voicelab._exit_codes import (
    EXIT_EXECUTION,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_QUALITY,
    EXIT_TERMINATED,
    exit_code_after_writing,
    run_exit_code,
    sweep_exit_code,
    worst_exit_code,
)

PACKAGE_DIR = Path(voicelab.__file__).parent


@pytest.mark.parametrize(("passed", "executed", "planned", "gates", "interrupted", "code"), [
    ([True, True], [True, True], 2, False, False, EXIT_OK),
    ([True, False], [True, True], 2, False, False, EXIT_QUALITY),
    ([True, True], [True, True], 2, True, False, EXIT_QUALITY),
    ([True, True], [True, False], 2, False, False, EXIT_EXECUTION),
    ([True], [True], 2, False, False, EXIT_EXECUTION),  # a planned trial did not run
    ([], [], 0, False, False, EXIT_QUALITY),  # nothing passed
    ([True], [True], 1, False, True, EXIT_INTERRUPTED),
])
def test_a_run_s_code(passed, executed, planned, gates, interrupted, code):
    assert run_exit_code(passed=passed, executed=executed, planned=planned,
                         gates_blocked=gates, interrupted=interrupted) == code


@pytest.mark.parametrize(("cells", "planned", "interrupted", "code"), [
    ([EXIT_OK, EXIT_OK], 2, False, EXIT_OK),
    ([EXIT_OK, EXIT_QUALITY], 2, False, EXIT_QUALITY),
    ([EXIT_EXECUTION, EXIT_QUALITY], 2, False, EXIT_EXECUTION),
    ([EXIT_OK], 2, False, EXIT_EXECUTION),  # a planned cell did not run
    ([EXIT_OK, EXIT_TERMINATED], 2, False, EXIT_TERMINATED),
    ([EXIT_OK, EXIT_OK], 2, True, EXIT_INTERRUPTED),
])
def test_a_sweep_s_code_is_its_worst_cell_s(cells, planned, interrupted, code):
    assert sweep_exit_code(cells, planned_cells=planned, interrupted=interrupted) == code
    if not interrupted and len(cells) == planned:
        assert sweep_exit_code(cells, planned_cells=planned) == worst_exit_code(cells)


@pytest.mark.parametrize(("code", "failed", "expected"), [
    (EXIT_OK, True, EXIT_EXECUTION), (EXIT_QUALITY, True, EXIT_EXECUTION),
    (EXIT_INTERRUPTED, True, EXIT_INTERRUPTED), (EXIT_OK, False, EXIT_OK),
])
def test_a_report_that_could_not_be_written_is_an_execution_failure(code, failed, expected):
    assert exit_code_after_writing(code, write_failed=failed) == expected


def test_no_other_module_compares_or_picks_exit_codes():
    """Outside _exit_codes.py (and the CLI, which returns its own fixed codes), an EXIT_*
    constant is never compared with or chosen between: that is a decision."""
    offenders = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        if relative == "_exit_codes.py" or relative.startswith("cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare | ast.IfExp | ast.If) and any(
                    isinstance(name, ast.Name) and name.id.startswith("EXIT_")
                    for name in ast.walk(node)):
                offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []
