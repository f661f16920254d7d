"""The pages a user opens, in a real browser with the network blocked: an HTML report, and
notebooks exported with ``jupyter nbconvert --execute --to html`` (their widget manager comes
from a CDN, so offline the widgets' static copies must carry the content).

Playwright drives the distribution's Chromium (``/usr/bin/chromium``, which .ci/run installs);
without either, the tests skip and say why: a missing browser is infrastructure, not a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import write_report

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
CHROMIUM = os.environ.get("VOICELAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
#: Chromium's own background traffic off: this machine's network is closed anyway
ARGS = ["--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-quic", "--disable-gpu"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install playwright)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    with sync_api.sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as error:  # noqa: BLE001 - a browser that cannot start is infrastructure
            pytest.skip(f"Chromium at {CHROMIUM} does not start: {error}")
        yield launched
        launched.close()


class OfflinePage:
    """A page whose every request but file: and data: URLs is refused (and counted)."""

    def __init__(self, browser, path: Path):
        self.blocked: list[str] = []
        self.page = browser.new_page()
        self.page.route("**/*", self._route)
        self.page.goto(path.as_uri(), wait_until="load")

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def images_loaded(self) -> list[int]:
        return self.page.evaluate("Array.from(document.images).map(i => i.naturalWidth)")

    def audio_seconds(self, selector: str = "audio") -> list[float]:
        """Each matching <audio> loaded and decoded by the browser: its duration."""
        return self.page.evaluate("""async (selector) => {
            const seconds = [];
            for (const audio of document.querySelectorAll(selector)) {
                audio.preload = "auto";
                audio.load();
                seconds.push(await new Promise((ok) => {
                    audio.onloadedmetadata = () => ok(audio.duration);
                    audio.onerror = () => ok(-1);
                    setTimeout(() => ok(-2), 20000);
                }));
            }
            return seconds;
        }""", selector)


def _report(tmp_path: Path) -> Path:
    loaded = voicelab.load_run(EXAMPLE, overrides=["endpoint.settings.claim_without_tool=true"])
    run = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path / "runs")))
    return write_report(run.bundle_path, output_path=tmp_path / "r.html")


def test_a_report_renders_offline_with_its_audio_plots_and_tables(browser, tmp_path):
    # playwright's sync API holds this thread's event loop: the run and the report get theirs
    with ThreadPoolExecutor(1) as thread:
        report = thread.submit(_report, tmp_path).result()
    page = OfflinePage(browser, report)
    assert page.blocked == []  # self-contained: nothing to fetch
    images = page.images_loaded()
    assert len(images) >= 4 and all(width > 0 for width in images)
    seconds = page.audio_seconds()
    assert len(seconds) == 2 + 3 and all(value > 0 for value in seconds), seconds
    assert page.page.get_by_text("did not pass, exit endpoint_completion").count() == 2
    # headers never break inside a word: the browser applies the report's rule
    styles = page.page.evaluate("""Array.from(document.querySelectorAll('th')).map(th => {
        const style = getComputedStyle(th); return style.wordBreak + ' ' + style.overflowWrap; })""")
    assert styles and set(styles) == {"normal normal"}


def _export(notebook: str, target: Path) -> Path:
    """``jupyter nbconvert --execute --to html``, as a user exports a notebook."""
    result = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--execute",
                             "--to", "html", "--output-dir", str(target),
                             str(ROOT / "notebooks" / f"{notebook}.ipynb")],
                            cwd=ROOT / "notebooks", capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return target / f"{notebook}.html"


@pytest.mark.parametrize(("notebook", "copies"), [("sweep", 1), ("labeling", 1)])
def test_an_exported_notebook_shows_its_widgets_content_offline(browser, tmp_path, notebook,
                                                                copies):
    page = OfflinePage(browser, _export(notebook, tmp_path))
    assert page.blocked  # the CDN scripts of the widget manager were asked for, and refused
    static = page.page.locator(".voicelab-static-copy")
    assert static.count() == copies
    for index in range(copies):
        assert static.nth(index).is_visible()
    seconds = page.audio_seconds(".voicelab-static-copy audio")
    assert seconds and all(value > 0 for value in seconds), seconds
    assert page.page.get_by_text("trial-001").first.is_visible()
    assert page.page.get_by_text("trials finished").first.is_visible()  # the progress count
    images = page.images_loaded()
    assert all(width > 0 for width in images)
