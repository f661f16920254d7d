"""Hesitation turns: pause markers in a script turn, the joined speech, cut-in metrics and the
``no_cut_in`` verdict (pure functions; the calls on each listening wire are in
tests/integration/test_hesitation_runs.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from voicelab.artifacts import TurnMetrics
from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, tone_speech
from voicelab.config import ScriptTurn, load_run, split_pauses
from voicelab.errors import ConfigError
from voicelab.metrics._cut_in import cut_in_fields, pauses_on_timeline
from voicelab.runner._hesitation import join_with_pauses
from voicelab.scoring._verdicts import no_cut_in_verdict

RATE = CANONICAL_SAMPLE_RATE_HZ


# --- markers ----------------------------------------------------------------------------------

def test_inline_markers_split_the_text():
    spoken = split_pauses("My account number is {pause: 1.2} 4 4 7 1 {pause:0.3} thanks")
    assert spoken.pieces == ("My account number is", "4 4 7 1", "thanks")
    assert spoken.pauses_seconds == (1.2, 0.3)
    assert spoken.text == "My account number is 4 4 7 1 thanks"


def test_bare_markers_take_their_lengths_from_pauses():
    spoken = split_pauses("one {pause} two {pause: 2} three {pause} four", [0.4, 0.8])
    assert spoken.pauses_seconds == (0.4, 2.0, 0.8)


@pytest.mark.parametrize(("text", "pauses", "words"), [
    ("a {pause: 0} b", None, "more than 0"),
    ("a {pause: 10.5} b", None, "at most 10"),
    ("a {pause: soon} b", None, "number of seconds"),
    ("a {pause: -1} b", None, "number of seconds"),
    ("a {pause} b", None, "more bare {pause} markers"),
    ("a {pause} b", [0.5, 0.5], "gives 2 length(s)"),
    ("a b", [0.5], "gives 1 length(s)"),
    ("{pause: 1} a", None, "words on both sides"),
    ("a {pause} b", [0.0], "more than 0"),
])
def test_bad_pauses_are_refused(text, pauses, words):
    with pytest.raises(ValueError, match=None) as caught:
        split_pauses(text, pauses)
    assert words in str(caught.value)


def test_a_turn_without_markers_is_unchanged():
    turn = ScriptTurn(response="Please record the plan.")
    assert turn.pauses is None and turn.spoken.pieces == ("Please record the plan.",)


def test_a_bad_marker_names_the_file_and_the_turn(tmp_path, seed_run_with_turn):
    run = seed_run_with_turn(tmp_path, {"response": "My number is {pause: 12} 4 4 7 1"})
    with pytest.raises(ConfigError) as caught:
        load_run(run)
    message = str(caught.value)
    assert "script-workload-neutral-voice.yaml" in message and "turns[0]" in message
    assert "at most 10" in message


def test_a_bad_pause_through_set_blames_the_argument(tmp_path, seed_run_with_turn):
    run = seed_run_with_turn(tmp_path, {"response": "My number is {pause} 4 4 7 1",
                                        "pauses": [0.5]})
    assert load_run(run).script is not None
    with pytest.raises(ConfigError) as caught:
        load_run(run, overrides=["script.turns.0.pauses=[0]"])
    assert "more than 0" in str(caught.value)


def test_the_cli_exits_2_on_a_bad_marker(tmp_path, seed_run_with_turn):
    run = seed_run_with_turn(tmp_path, {"response": "My number is {pause: 0} 4 4 7 1"})
    done = subprocess.run([sys.executable, "-m", "voicelab.cli", "validate", str(run)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "turns[0]" in done.stderr and "Traceback" not in done.stderr


# --- joined speech ----------------------------------------------------------------------------

def test_pieces_are_joined_with_exactly_the_pause_between_their_sounds():
    pieces = [tone_speech("my number is", seed=3), tone_speech("4 4 7 1", seed=3)]
    joined, spans = join_with_pauses(pieces, [0.75])
    (start, end), = spans
    assert end - start == int(0.75 * RATE)
    samples = joined.samples.astype(np.int32)
    assert not np.abs(samples[start:end]).any()  # digital silence: the environment adds noise
    loud = np.flatnonzero(np.abs(samples) > 256)
    # the pause is the whole gap between the last sound of piece 1 and the first of piece 2
    assert loud[loud < start].max() == start - 1 and loud[loud >= end].min() == end
    # the first piece keeps its leading silence and the last its trailing silence
    assert joined.samples[:10].tolist() == pieces[0].samples[:10].tolist()
    assert joined.samples[-10:].tolist() == pieces[1].samples[-10:].tolist()


@pytest.mark.parametrize("cut_seconds", [0.5, 1.7, 30.0])
def test_a_joined_turn_ends_at_the_time_limit_and_is_the_start_of_the_whole(cut_seconds):
    pieces = [tone_speech("my number is", seed=3), tone_speech("4 4 7 1", seed=3)]
    whole, whole_spans = join_with_pauses(pieces, [1.0])
    cut, spans = join_with_pauses(pieces, [1.0], max_samples=int(cut_seconds * RATE))
    assert cut.num_samples == min(whole.num_samples, int(cut_seconds * RATE))
    assert cut.samples.tolist() == whole.samples[:cut.num_samples].tolist()
    # a pause the limit falls in ends there; one past the limit is not there at all
    assert spans == tuple((start, min(end, cut.num_samples)) for start, end in whole_spans
                          if start < cut.num_samples)


def test_a_hundred_minutes_of_pauses_are_never_made_past_the_limit():
    pieces = [tone_speech("and", seed=3)] * 601
    cut, spans = join_with_pauses(pieces, [10.0] * 600, max_samples=30 * RATE)
    assert cut.num_samples == 30 * RATE and len(spans) == 3


def test_joining_needs_one_pause_between_each_two_pieces():
    with pytest.raises(ValueError, match="need 1 pauses"):
        join_with_pauses([PcmAudio(np.ones(10, dtype=np.int16))] * 2, [])


# --- cut-in metrics ---------------------------------------------------------------------------

MS = 1_000_000


def test_pauses_are_placed_from_the_line_speech_start_or_the_placed_turn():
    line = pauses_on_timeline([[RATE, 2 * RATE]], speech_start_sample=RATE // 2,
                              line_speech_start_ns=10_000 * MS, placed_start_ns=0)
    assert line == [(10_500 * MS, 11_500 * MS)]
    placed = pauses_on_timeline([[RATE, 2 * RATE]], speech_start_sample=None,
                                line_speech_start_ns=None, placed_start_ns=3_000 * MS)
    assert placed == [(4_000 * MS, 5_000 * MS)]


def test_a_product_that_speaks_in_the_pause_cut_in():
    pauses = [(2_000 * MS, 3_000 * MS), (4_000 * MS, 4_500 * MS)]
    fields = cut_in_fields(pauses, speech_start_ns=1_000 * MS, speech_end_ns=5_000 * MS,
                           product_speech_ns=[(200 * MS, 900 * MS), (4_300 * MS, 6_000 * MS)])
    # the cut-in reply runs on past the user's end (to 6000 ms): no answer after it
    assert fields == {"user_pauses_ms": [1000.0, 500.0], "product_cut_in": True,
                      "cut_in_pause_index": 1, "cut_in_after_pause_ms": 300.0,
                      "answer_after_cut_in_ms": None}


def test_speech_heard_after_the_turn_or_already_under_way_is_no_cut_in():
    pauses = [(2_000 * MS, 3_000 * MS)]
    fields = cut_in_fields(pauses, speech_start_ns=1_000 * MS, speech_end_ns=4_000 * MS,
                           product_speech_ns=[(500 * MS, 1_500 * MS), (4_000 * MS, 5_000 * MS)])
    assert fields == {"user_pauses_ms": [1000.0], "product_cut_in": False}


def test_the_heard_delay_counts_and_a_late_reaction_is_after_the_pause():
    pauses = [(2_000 * MS, 2_500 * MS)]
    fields = cut_in_fields(pauses, speech_start_ns=1_000 * MS, speech_end_ns=4_000 * MS,
                           product_speech_ns=[(2_600 * MS, 3_000 * MS)], heard_delay_ns=100 * MS)
    assert fields["cut_in_pause_index"] == 0 and fields["cut_in_after_pause_ms"] == 700.0


# --- latency on a cut-into turn: the answer after the user finished, never the cut-in -------

HANGOVER = 700 * MS


def _answer(speech_ms: list[tuple[int, int]], *, end_ms: int = 4_000) -> float | None:
    fields = cut_in_fields([(2_000 * MS, 3_000 * MS)], speech_start_ns=1_000 * MS,
                           speech_end_ns=end_ms * MS,
                           product_speech_ns=[(a * MS, b * MS) for a, b in speech_ms],
                           reply_end_hangover_ns=HANGOVER)
    assert fields["product_cut_in"] is True
    return fields["answer_after_cut_in_ms"]


def test_a_word_of_the_cut_in_reply_still_playing_is_no_answer():
    # the reply began in the pause (2300 ms) and runs on past the user's end (4000 ms): its
    # next word (4100 ms) is not an answer to the finished turn
    assert _answer([(2_300, 3_900), (4_100, 4_800)]) is None


def test_the_answer_follows_the_cut_in_reply_by_the_listener_s_hangover():
    assert _answer([(2_300, 3_500), (3_600, 4_800), (5_600, 6_000)]) == 1600.0


def test_after_a_cut_in_reply_that_stopped_the_next_speech_answers():
    # the product stopped when the user spoke again (2800 ms), and answered at 4600 ms
    assert _answer([(2_300, 2_800), (4_600, 5_500)]) == 600.0
    # an answer within the hangover of the cut-in reply cannot be told from it
    assert _answer([(2_300, 3_800), (4_300, 5_500)]) is None


def test_where_a_cut_in_began_inside_or_after_its_pause():
    from voicelab.scoring._verdicts import cut_in_place

    inside = _turn("turn-001", user_pauses_ms=[800.0], product_cut_in=True,
                   cut_in_pause_index=0, cut_in_after_pause_ms=542.0)
    after = _turn("turn-001", user_pauses_ms=[800.0], product_cut_in=True,
                  cut_in_pause_index=0, cut_in_after_pause_ms=962.0)
    assert cut_in_place(inside) == "turn-001: 542 ms into pause 1 of 800 ms"
    assert cut_in_place(after) == "turn-001: 162 ms into the words after pause 1 of 800 ms"


def test_a_cut_in_fails_the_first_audio_verdict_and_counts_beyond_a_latency_gate():
    from voicelab.artifacts import PassRate
    from voicelab.config import GateConfig, PersonaConfig, ScenarioConfig, StatisticsConfig
    from voicelab.scoring._run_statistics import judge_gates
    from voicelab.scoring._verdicts import deterministic_verdicts

    cut = _turn("turn-001", user_pauses_ms=[800.0], product_cut_in=True, cut_in_pause_index=0,
                cut_in_after_pause_ms=500.0)
    fast = _turn("turn-000", first_audio_latency_ms=40.0)
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "max_first_audio_latency_ms": 2000}})
    verdict, = [v for v in deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None, outcome_error=None,
        turn_metrics=[fast, cut]) if v.name == "first_audio_latency"]
    assert verdict.status == "failed" and "turn-001: 500 ms into pause 1 of 800 ms" in verdict.why
    gate = GateConfig(metric="response_latency_ms", quantile=0.5, max=1000)
    rate = PassRate(estimate=None, low=None, high=None, method="wilson", confidence=0.95, n=0,
                    passed=0)
    check, = judge_gates([gate], rate=rate, responses={"response_latency_ms": [100.0] * 4},
                         statistics=StatisticsConfig(), cut_ins=6)
    assert check.status == "failed" and "6 cut-in turn(s) counted beyond the limit" in \
        check.message


def test_a_turn_without_pauses_has_no_cut_in_fields():
    assert cut_in_fields([], speech_start_ns=0, speech_end_ns=1, product_speech_ns=[]) == {}


# --- the verdict ------------------------------------------------------------------------------

def _turn(turn_id: str, **fields) -> TurnMetrics:
    return TurnMetrics(turn_id=turn_id, index=0, status="completed", output_audio_seconds=1.0,
                       interrupted=False, **fields)


def test_no_cut_in_fails_naming_the_turn_and_the_pause():
    verdict = no_cut_in_verdict([
        _turn("turn-000"),
        _turn("turn-001", user_pauses_ms=[800.0], product_cut_in=True, cut_in_pause_index=0,
              cut_in_after_pause_ms=512.0),
        _turn("turn-002", user_pauses_ms=[300.0], product_cut_in=False)])
    assert verdict.status == "failed" and verdict.observed == "1 of 2 hesitation turn(s) cut into"
    assert "turn-001: 512 ms into pause 1 of 800 ms" in verdict.why


def test_no_cut_in_passes_and_is_inconclusive_without_hesitation():
    passed = no_cut_in_verdict([_turn("turn-001", user_pauses_ms=[800.0], product_cut_in=False)])
    assert passed.status == "passed"
    nothing = no_cut_in_verdict([_turn("turn-001")])
    assert nothing.status == "inconclusive" and "no user turn with pauses" in nothing.why


# --- the endpointing curve --------------------------------------------------------------------

def _curve(*points: tuple[float, int, int], latency: float = 700.0):
    from voicelab.config import StatisticsConfig
    from voicelab.scoring import Hesitation, endpointing_curve

    observations = [Hesitation(pause, index < cut, None if index < cut else latency)
                    for pause, n, cut in points for index in range(n)]
    return endpointing_curve(observations, StatisticsConfig())


def test_the_half_cut_in_pause_is_interpolated_between_the_straddling_points():
    curve = _curve((200, 4, 0), (400, 4, 1), (600, 4, 3), (800, 4, 4))
    assert curve.half_cut_in == "interpolated"
    assert curve.half_cut_in_pause_ms == pytest.approx(400 + 200 * (0.5 - 0.25) / 0.5)
    assert [p.cut_in_probability for p in curve.points] == [0.0, 0.25, 0.75, 1.0]


def test_a_curve_outside_its_range_says_so():
    assert _curve((200, 2, 0), (400, 2, 0)).half_cut_in == "above_range"
    below = _curve((200, 2, 2), (400, 2, 2))
    assert below.half_cut_in == "below_range" and below.half_cut_in_pause_ms is None
    at = _curve((200, 2, 0), (400, 2, 1), (600, 2, 2))
    assert (at.half_cut_in, at.half_cut_in_pause_ms) == ("at_point", 400)
    assert _curve() is None


def test_no_cut_in_has_an_upper_bound_above_0_and_latency_a_median_interval():
    (point,) = _curve((500, 10, 0)).points
    assert point.cut_in_probability == 0.0 and point.cut_in_low == 0.0
    assert point.cut_in_high == pytest.approx(0.2775, abs=1e-4)  # Wilson 95%, 0 of 10
    assert point.latency_turns == 10 and point.latency_median_ms == 700.0
    assert point.latency_median_low_ms == 700.0 and point.latency_median_high_ms == 700.0
    (few,) = _curve((500, 3, 0)).points
    assert few.latency_median_ms == 700.0 and few.latency_median_high_ms is None


def test_the_command_line_states_the_headline():
    from voicelab.cli._summaries import endpointing_line

    line = endpointing_line(_curve((200, 2, 0), (800, 2, 2)))
    assert line == ("endpointing: cuts in half the time at a pause of 500 ms (interpolated); "
                    "2 of 4 hesitation turn(s) cut into over pauses of 200-800 ms")
    assert "not bracketed" in endpointing_line(_curve((200, 2, 0)))
    assert "even at the shortest pause" in endpointing_line(_curve((200, 2, 2)))
