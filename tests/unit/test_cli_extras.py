"""A missing optional extra is exit 2 and the exact pip line, never an internal error; the
global flags are accepted before and after the sub-command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from voicelab._extras import OPTIONAL_MODULES, REPORT_MODULES, missing_dependency
from voicelab.cli import _main, build_parser, main


def _cli_without(blocked: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where ``blocked`` cannot be imported (as on the core install)."""
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from voicelab.cli import main\n"
            f"sys.exit(main({list(argv)!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("blocked", ["papermill", "jinja2", "matplotlib"])
def test_report_without_the_notebooks_extra_is_exit_2_and_the_pip_line(blocked, tmp_path):
    result = _cli_without(blocked, "report", str(tmp_path), "--output", str(tmp_path / "r.html"))
    assert result.returncode == 2, result.stdout + result.stderr
    package = OPTIONAL_MODULES[blocked][0]
    assert result.stderr.strip().splitlines() == [
        f"voice-evaluator: error: report needs the '{package}' package: "
        "pip install 'voicelab[notebooks]'"]
    assert not (tmp_path / "r.html").exists()


def test_compare_html_without_the_notebooks_extra_is_refused_before_comparing(tmp_path):
    result = _cli_without("nbconvert", "compare", str(tmp_path), str(tmp_path), "--html",
                          str(tmp_path / "c.html"))
    assert result.returncode == 2
    assert "compare --html needs the 'nbconvert' package: pip install 'voicelab[notebooks]'" \
        in result.stderr


def test_a_stray_import_error_of_an_optional_package_is_the_pip_line(monkeypatch, capsys):
    def command(args):
        raise ModuleNotFoundError("No module named 'openai'", name="openai")

    monkeypatch.setattr(_main, "_command", lambda name: command)
    assert main(["init", "somewhere"]) == 2
    assert capsys.readouterr().err.strip() == (
        "voice-evaluator: error: init needs the 'openai' package: pip install 'voicelab[azure]'")


def test_an_import_error_of_anything_else_stays_an_internal_error(monkeypatch, capsys):
    def command(args):
        raise ModuleNotFoundError("No module named 'voicelab.nowhere'", name="voicelab.nowhere")

    monkeypatch.setattr(_main, "_command", lambda name: command)
    assert main(["init", "somewhere"]) == 4
    assert "internal error: ModuleNotFoundError" in capsys.readouterr().err
    assert missing_dependency(ModuleNotFoundError(name="numpy"), purpose="x") is None


def test_every_report_module_names_its_extra():
    assert {OPTIONAL_MODULES[m][1] for m in REPORT_MODULES} == {"notebooks"}


@pytest.mark.parametrize("argv", [["--debug", "init", "x"], ["init", "--debug", "x"],
                                  ["init", "x", "--debug"]])
def test_debug_is_accepted_before_and_after_the_sub_command(argv):
    args = build_parser().parse_args(argv)
    assert args.debug is True and args.command == "init"


def test_a_sub_command_without_debug_keeps_false():
    assert build_parser().parse_args(["init", "x"]).debug is False
    assert build_parser().parse_args(["run", "--version"]).version is True


def test_debug_after_the_sub_command_shows_the_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "voicelab", "validate",
                             str(tmp_path / "missing.yaml"), "--debug"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
