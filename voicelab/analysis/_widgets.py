"""ipywidgets: a trial player, a matrix browser and a labeling widget.

The widgets keep their state in plain attributes (``player.turn.value``, ``player.audio.value``,
``labeler.choices[criterion].value``) and expose methods for every action a click performs, so
they are built and driven without a browser (tests, scripts). Display one with ``display(w)`` or
as a cell's value. ipywidgets and IPython are imported inside the functions.

Displayed, each widget is followed by a static copy of what it shows (``static_html()``: audio,
transcript, tables, as plain HTML). A page exported with ``jupyter nbconvert --to html`` and
opened without network cannot load the widget manager (nbconvert links it from a CDN), so the
copy is what such a page shows; in JupyterLab, and in an exported page whose widgets did load,
the copy hides itself. The widgets' audio is Ogg Opus (:mod:`._embed`), so a notebook's saved
widget state stays small.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..artifacts import TRANSCRIPT_JSON, read_json
from ._embed import (
    AudioFormat,
    audio_figure,
    channel_path,
    encode_audio,
    read_trial_audio,
    retention_note,
    turn_windows,
)
from ._frames import Frames, load_frames
from ._json import JsonObject, objects_in
from ._labels import label_rows, load_labels, save_labels

if TYPE_CHECKING:
    from ipywidgets import Widget

CHANNELS = ("mixed", "user", "product")
_TURN_COLUMNS = ("turn_id", "status", "first_audio_latency_ms", "response_duration_ms",
                 "output_audio_seconds", "playback_stall_ms", "dead_air_ms", "interrupted",
                 "interruption_stop_latency_ms", "input_speech_to_noise_db", "tool_calls")
_KEY_COLUMNS = ("run_id", "cell", "trial_id", "scenario_id", "persona", "environment")


def _table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, float_format=lambda v: f"{v:.1f}", na_rep="")


#: Hides a static copy where the live widget shows: inside JupyterLab (and Notebook 7), and in an
#: exported page whose widget manager loaded (it brings require.js; offline it does not).
_COPY_HEAD = (
    "<style>.jp-NotebookPanel .voicelab-static-copy, .jp-LinkedOutputView "
    ".voicelab-static-copy { display: none; }</style>"
    "<script>(function (copy) { if (copy && typeof window.require === 'function') "
    "{ copy.style.display = 'none'; } })(document.currentScript && "
    "document.currentScript.parentElement);</script>")


def static_copy(body: str) -> str:
    """``body`` wrapped as the static copy of a widget (see the module docstring)."""
    return (f'<div class="voicelab-static-copy">{_COPY_HEAD}<p style="color:#666">'
            f'<i>a static copy of the widget above (for pages without it)</i></p>{body}</div>')


def _display_with_copy(widget: Widget, body: str) -> None:
    from IPython.display import HTML, display

    display(widget)
    display(HTML(static_copy(body)))


class TrialPlayer:
    """One trial: user / product / mixed audio, the transcript, per-turn metrics, and a
    turn selector that cuts the audio to that turn (``select_turn``)."""

    def __init__(self, source: Frames | str | os.PathLike[str], *, run_id: str | None = None,
                 trial_id: str | None = None, channel: str = "mixed",
                 audio_format: AudioFormat = "opus"):
        import ipywidgets as widgets

        self.audio_format = audio_format

        frames = source if isinstance(source, Frames) else load_frames(source)
        self.frames = frames.select(run_id=run_id, trial_id=trial_id)
        self.row = self.frames.trials.iloc[0]
        self.trial_dir = Path(self.row["path"])
        self.turns = self.frames.turns.reset_index(drop=True)
        self.windows = turn_windows(self.turns)
        transcript_path = self.trial_dir / TRANSCRIPT_JSON
        self.transcript_turns: list[JsonObject] = (
            objects_in(read_json(transcript_path).get("turns", []))
            if transcript_path.is_file() else [])
        options: list[tuple[str, str | None]] = [("whole conversation", None)]
        for turn in self.turns.itertuples(index=False):  # a handful of turns per trial
            text = str(turn.turn_id)
            if pd.notna(turn.first_audio_latency_ms):
                text += f": first audio {turn.first_audio_latency_ms:.0f} ms"
            if turn.interrupted:
                text += " (interrupted)"
            options.append((text, str(turn.turn_id)))
        self.channel = widgets.ToggleButtons(options=list(CHANNELS), value=channel,
                                             description="channel")
        self.turn = widgets.Dropdown(options=options, value=None, description="turn")
        self.audio = widgets.Audio(format="ogg", autoplay=False, loop=False)
        #: why there is no audio, when the run's ``retention:`` did not keep it
        self.audio_note = widgets.HTML()
        self.transcript = widgets.HTML()
        self.metrics = widgets.HTML()
        self.header = widgets.HTML(self._header_html())
        self.channel.observe(lambda _: self._refresh(), names="value")
        self.turn.observe(lambda _: self._refresh(), names="value")
        self.widget = widgets.VBox([self.header, widgets.HBox([self.channel, self.turn]),
                                    self.audio, self.audio_note, self.transcript,
                                    self.metrics])
        self._refresh()

    def _header_html(self) -> str:
        row = self.row
        verdict = "passed" if row["passed"] else "failed"
        failed = row.get("failed_verdicts") or ""
        extra = f"; failed verdicts: {html.escape(str(failed))}" if failed else ""
        return (f"<b>{html.escape(str(row['trial_id']))}</b> of run "
                f"{html.escape(str(row['run_id']))} (seed {row['seed']}): {verdict}, exit "
                f"{html.escape(str(row['exit_reason']))}{extra}")

    def select_turn(self, turn_id: str | None) -> None:
        """Jump to a turn (None: the whole conversation); the audio is cut to it."""
        self.turn.value = turn_id

    def select_channel(self, channel: str) -> None:
        """Play ``channel`` (``technician``, its name before 3.0, is the user's)."""
        self.channel.value = "user" if channel == "technician" else channel

    @property
    def window_ms(self) -> tuple[float | None, float | None]:
        """The listener-timeline stretch the audio widget holds."""
        if self.turn.value is None:
            return (None, None)
        position = int(np.flatnonzero((self.turns["turn_id"] == self.turn.value).to_numpy())[0])
        window = self.windows.iloc[position]
        return (float(window["start_ms"]), float(window["end_ms"]))

    def _refresh(self) -> None:
        start_ms, end_ms = self.window_ms
        if channel_path(self.trial_dir, self.channel.value) is not None:
            samples, rate = read_trial_audio(self.trial_dir, channel=self.channel.value,
                                             start_ms=start_ms, end_ms=end_ms)
            data, mime = encode_audio(samples, sample_rate_hz=rate,
                                      audio_format=self.audio_format)
            self.audio.format = mime.split("/", 1)[1]
            self.audio.value = data
            self.audio_note.value = ""
        else:
            self.audio.value = b""
            note = retention_note(self.trial_dir)
            self.audio_note.value = f"<i>{html.escape(note)}</i>" if note else ""
        self.transcript.value = self._transcript_html()
        self.metrics.value = self._metrics_html()

    def _transcript_html(self) -> str:
        lines = []
        for turn in self.transcript_turns:
            selected = self.turn.value is not None and turn.get("turn_id") == self.turn.value
            style = ' style="background:#fff3cd"' if selected else ""
            lines.append(f"<div{style}><b>{html.escape(str(turn.get('role', '')))}</b> "
                         f"[{html.escape(str(turn.get('turn_id', '')))}]: "
                         f"{html.escape(str(turn.get('text', '')))}</div>")
        return "".join(lines) or "<i>no transcript</i>"

    def _metrics_html(self) -> str:
        if self.turn.value is None:
            columns = [c for c in _TURN_COLUMNS if c in self.turns.columns]
            return _table_html(self.turns[columns])
        row = self.turns[self.turns["turn_id"] == self.turn.value].iloc[0]
        shown = row.drop(labels=[c for c in (*_KEY_COLUMNS, "transcript") if c in row.index])
        return _table_html(shown.rename("value").rename_axis("metric").reset_index())

    def static_html(self) -> str:
        """What the player shows now, as plain HTML: header, audio, transcript, metrics."""
        audio = ""
        if self.audio.value:
            encoded = base64.b64encode(bytes(self.audio.value)).decode("ascii")
            where = "whole conversation" if self.turn.value is None else str(self.turn.value)
            audio = audio_figure(f"data:audio/{self.audio.format};base64,{encoded}",
                                 f"{self.channel.value} audio, {where}")
        return (f"<div>{self.header.value}</div>{audio or self.audio_note.value}"
                f"<div>{self.transcript.value}</div>"
                f"{self.metrics.value}")

    def _ipython_display_(self) -> None:
        _display_with_copy(self.widget, self.static_html())

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, object] | None:
        return self.widget._repr_mimebundle_(**kwargs)


def _cell_labels(trials: pd.DataFrame) -> pd.Series:
    described = (trials["scenario_id"].astype(str) + " / " + trials["persona"].astype(str) + " / "
                 + trials["environment"].astype(str))
    return trials["cell"].astype(object).where(trials["cell"].notna(), described).astype(str)


class MatrixBrowser:
    """Pick a matrix cell, then one of its trials; the trial plays below."""

    def __init__(self, frames: Frames | str | os.PathLike[str]):
        import ipywidgets as widgets

        self.frames = frames if isinstance(frames, Frames) else load_frames(frames)
        if self.frames.trials.empty:
            raise ValueError("no trials to browse")
        self.cells = _cell_labels(self.frames.trials)
        passed = self.frames.trials["passed"].astype(bool).groupby(self.cells, sort=False)
        summary = passed.agg(["sum", "count"])
        self.cell = widgets.Dropdown(
            options=[(f"{cell} ({int(row['sum'])}/{int(row['count'])} passed)", cell)
                     for cell, row in summary.iterrows()], description="cell")
        self.trial = widgets.Dropdown(description="trial")
        self.summary = widgets.HTML()
        self.player: TrialPlayer | None = None
        self.player_box = widgets.VBox()
        self.cell.observe(lambda _: self._cell_changed(), names="value")
        self.trial.observe(lambda _: self._trial_changed(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.cell, self.trial]), self.summary,
                                    self.player_box])
        self._cell_changed()

    def select(self, *, cell: str | None = None, trial_id: str | None = None) -> None:
        if cell is not None:
            self.cell.value = cell
        if trial_id is not None:
            matches = [value for _, value in self.trial.options if value[1] == trial_id]
            if not matches:
                raise KeyError(f"no trial {trial_id!r} in cell {self.cell.value!r}")
            self.trial.value = matches[0]

    def _cell_changed(self) -> None:
        trials = self.frames.trials[(self.cells == self.cell.value).to_numpy()]
        self.trial.options = [
            (f"{row.trial_id} {'pass' if row.passed else 'FAIL'} (seed {row.seed}, "
             f"{row.exit_reason})", (str(row.run_id), str(row.trial_id)))
            for row in trials.itertuples(index=False)]
        self.trial.value = self.trial.options[0][1] if self.trial.options else None

    def _trial_changed(self) -> None:
        if self.trial.value is None:
            return
        run_id, trial_id = self.trial.value
        self.player = TrialPlayer(self.frames, run_id=run_id, trial_id=trial_id)
        verdicts = self.player.frames.verdicts
        failing = verdicts[~verdicts["passed"]]
        self.summary.value = ("<i>every verdict passed</i>" if failing.empty else _table_html(
            failing[["name", "critical", "why"]]))
        self.player_box.children = [self.player.widget]

    def static_html(self) -> str:
        """The cells, the selected cell's trials and the selected trial, as plain HTML."""
        cells = "".join(f"<li>{html.escape(str(label))}</li>" for label, _ in self.cell.options)
        trials = "".join(f"<li>{html.escape(str(label))}</li>" for label, _ in self.trial.options)
        player = self.player.static_html() if self.player is not None else ""
        return (f"<p><b>cells</b></p><ul>{cells}</ul><p><b>trials of "
                f"{html.escape(str(self.cell.value))}</b></p><ul>{trials}</ul>"
                f"{self.summary.value}{player}")

    def _ipython_display_(self) -> None:
        _display_with_copy(self.widget, self.static_html())

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, object] | None:
        return self.widget._repr_mimebundle_(**kwargs)


class LabelingWidget:
    """Human labels, one trial at a time: play the conversation, mark each criterion pass or
    fail, add a note, save (the CSV format of :mod:`.calibration`). Judge results are not shown,
    so labels stay blind to them."""

    def __init__(self, frames: Frames | str | os.PathLike[str], *,
                 labels_path: str | os.PathLike[str], criteria: Sequence[str] | None = None,
                 annotator: str = "", trial_ids: Sequence[str] | None = None):
        import ipywidgets as widgets

        self.frames = frames if isinstance(frames, Frames) else load_frames(frames)
        self.labels_path = Path(labels_path)
        trials = self.frames.trials
        if trial_ids is not None:
            trials = trials[trials["trial_id"].isin(list(trial_ids))]
        self.items = [(str(r), str(t)) for r, t in zip(trials["run_id"], trials["trial_id"],
                                                       strict=True)]
        if not self.items:
            raise ValueError("no trials to label")
        self.criteria = list(criteria) if criteria else default_criteria(self.frames)
        if not self.criteria:
            raise ValueError("no criteria: pass criteria=[...] (the run has no judges)")
        self.annotator = widgets.Text(value=annotator, description="annotator")
        self.position = widgets.HTML()
        self.previous_button = widgets.Button(description="previous")
        self.next_button = widgets.Button(description="next")
        self.save_button = widgets.Button(description="save", button_style="primary")
        self.save_next_button = widgets.Button(description="save and next")
        self.choices = {criterion: widgets.ToggleButtons(options=["pass", "fail"], value=None,
                                                         description=criterion)
                        for criterion in self.criteria}
        self.note = widgets.Textarea(placeholder="note (optional)", description="note")
        self.status = widgets.HTML()
        self.player: TrialPlayer | None = None
        self.player_box = widgets.VBox()
        self.index = 0
        self.previous_button.on_click(lambda _: self.show(self.index - 1))
        self.next_button.on_click(lambda _: self.show(self.index + 1))
        self.save_button.on_click(lambda _: self._save_clicked(advance=False))
        self.save_next_button.on_click(lambda _: self._save_clicked(advance=True))
        controls = widgets.HBox([self.previous_button, self.next_button, self.save_button,
                                 self.save_next_button])
        self.widget = widgets.VBox([widgets.HBox([self.annotator, self.position]),
                                    self.player_box, *self.choices.values(), self.note,
                                    controls, self.status])
        self.index = 0
        self.show(0)

    @property
    def current(self) -> tuple[str, str]:
        return self.items[self.index]

    def show(self, index: int) -> None:
        """Go to the ``index``-th trial (clamped) and load this annotator's earlier labels."""
        self.index = min(max(index, 0), len(self.items) - 1)
        run_id, trial_id = self.current
        self.player = TrialPlayer(self.frames, run_id=run_id, trial_id=trial_id)
        self.player_box.children = [self.player.widget]
        self.position.value = f"trial {self.index + 1} of {len(self.items)}"
        saved = load_labels(self.labels_path)
        mine = saved[(saved["run_id"] == run_id) & (saved["trial_id"] == trial_id)
                     & (saved["annotator"] == self.annotator.value.strip())]
        earlier = dict(zip(mine["criterion"], mine["human_label"], strict=True))
        for criterion, choice in self.choices.items():
            choice.value = earlier.get(criterion)
        self.note.value = str(mine["note"].iloc[-1]) if not mine.empty else ""

    def set_label(self, criterion: str, label: str | None) -> None:
        self.choices[criterion].value = label

    def save(self) -> pd.DataFrame:
        """Write the current trial's labels; returns the rows written."""
        run_id, trial_id = self.current
        rows = label_rows(run_id=run_id, trial_id=trial_id, annotator=self.annotator.value,
                          note=self.note.value,
                          labels={c: choice.value for c, choice in self.choices.items()})
        if rows.empty:
            raise ValueError("mark at least one criterion pass or fail before saving")
        save_labels(self.labels_path, rows)
        self.status.value = (f"saved {len(rows)} label(s) for {html.escape(trial_id)} to "
                             f"{html.escape(str(self.labels_path))}")
        return rows

    def _save_clicked(self, *, advance: bool) -> None:
        try:
            self.save()
        except ValueError as error:
            self.status.value = f'<span style="color:#b00">{html.escape(str(error))}</span>'
            return
        if advance:
            self.show(self.index + 1)

    def static_html(self) -> str:
        """The trial being labeled and the criteria, as plain HTML (labels are given in the
        live notebook)."""
        player = self.player.static_html() if self.player is not None else ""
        criteria = ", ".join(html.escape(c) for c in self.criteria)
        return (f"<p>{self.position.value}; criteria: {criteria} (labels are given in the live "
                f"notebook and saved to {html.escape(str(self.labels_path))})</p>{player}")

    def _ipython_display_(self) -> None:
        _display_with_copy(self.widget, self.static_html())

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, object] | None:
        return self.widget._repr_mimebundle_(**kwargs)


def default_criteria(frames: Frames) -> list[str]:
    """The run's judge names, else its verdict names, in first-seen order."""
    for frame in (frames.judges, frames.verdicts):
        if not frame.empty:
            return [str(name) for name in pd.unique(frame["name"].astype(str))]
    return []


__all__ = ["CHANNELS", "LabelingWidget", "MatrixBrowser", "TrialPlayer", "default_criteria",
           "static_copy"]
