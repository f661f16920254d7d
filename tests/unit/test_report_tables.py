"""show_table: the tables of reports print counts as integers, rates as percentages, blanks."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from voicelab.analysis import show_table


def _cells(frame: pd.DataFrame, **kwargs) -> list[str]:
    return re.findall(r">([^<>]*)</td>", show_table(frame, **kwargs).to_html())


def test_counts_made_float_by_a_missing_value_print_as_integers():
    frame = pd.DataFrame([{"side": "baseline", "rate": 1.0, "passed": 10, "latency": 301.25},
                          {"side": "change", "rate": -0.5, "latency": np.nan}])
    assert frame["passed"].dtype == float  # the missing count made it float
    assert _cells(frame, percent=("rate",)) == ["baseline", "100.0%", "10", "301.2",
                                                "change", "-50.0%", "", ""]


def test_the_percent_columns_do_not_reset_the_precision_of_the_others():
    frame = pd.DataFrame({"estimate": [0.25], "low": [0.1], "mean": [1.23456]})
    assert _cells(frame, percent=("estimate", "low"), precision=2) == ["25.0%", "10.0%", "1.23"]


def test_a_long_header_may_break_after_each_underscore_and_is_escaped():
    frame = pd.DataFrame({"first_audio_latency_ms_p50": [1.0], "a<b": [2.0]})
    page = show_table(frame).to_html()
    assert ">first_<wbr>audio_<wbr>latency_<wbr>ms_<wbr>p50</th>" in page
    assert ">a&lt;b</th>" in page


def test_plots_print_plain_numbers_not_an_offset_or_a_multiplier():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from voicelab.analysis._plots import _figure

    figure = _figure(4, 3)
    axes = figure.subplots()
    axes.plot([1.7e9, 1.7e9 + 5], [1000.1, 1000.4])  # epoch seconds; a narrow latency band
    FigureCanvasAgg(figure).draw()
    assert axes.xaxis.get_offset_text().get_text() == ""
    assert axes.yaxis.get_offset_text().get_text() == ""
    assert any(label.get_text().startswith("1700000") for label in axes.get_xticklabels())
