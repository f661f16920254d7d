"""Simulation against reality: the caller measurements on known audio, the two-sample
statistics on synthetic observations with known differences, and the realism table."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import voicelab.analysis as va
from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ

RATE = CANONICAL_SAMPLE_RATE_HZ


def behaviour(values: dict[str, np.ndarray], *, source: str) -> pd.DataFrame:
    """A caller_behaviour-shaped frame: one row per value."""
    rows = [{"run_id": source, "cell": None, "trial_id": f"trial-{i:03d}", "turn_id": None,
             "source": source, "scenario_id": "s", "persona": "p", "environment": "quiet",
             "metric": metric, "value": float(v), "unit": va.CALLER_METRICS.get(metric, "")}
            for metric, array in values.items() for i, v in enumerate(array)]
    return pd.DataFrame(rows, columns=list(va.BEHAVIOUR_COLUMNS))


# --- effect sizes and the correction --------------------------------------------------------

def test_cliffs_delta_counts_pairs_as_defined():
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 6, 17).astype(float), rng.integers(1, 8, 23).astype(float)  # ties
    greater = sum(b > a for a, b in itertools.product(x, y))
    less = sum(b < a for a, b in itertools.product(x, y))
    assert va.cliffs_delta(x, y) == pytest.approx((greater - less) / (x.size * y.size))
    assert va.cliffs_delta([1, 2], [3, 4]) == 1.0 and va.cliffs_delta([3, 4], [1, 2]) == -1.0
    assert math.isnan(va.cliffs_delta([], [1.0]))


def test_hedges_g_is_the_corrected_standardized_mean_difference():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([3.0, 5.0, 6.0, 8.0, 9.0])
    pooled = math.sqrt((3 * x.var(ddof=1) + 4 * y.var(ddof=1)) / 7)
    expected = (y.mean() - x.mean()) / pooled * (1 - 3 / (4 * 9 - 9))
    assert va.hedges_g(x, y) == pytest.approx(expected)
    assert va.hedges_g([2.0, 2.0], [2.0, 2.0]) == 0.0
    assert math.isnan(va.hedges_g([1.0], [1.0, 2.0]))


def test_holm_matches_the_step_down_definition():
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    adjusted = va.holm(p)
    # sorted: 0.005 (x4), 0.01 (x3), 0.03 (x2), 0.04 (x1), each at least the one before
    assert adjusted[4] == pytest.approx(0.02)
    assert adjusted[0] == pytest.approx(0.03)
    assert adjusted[2] == pytest.approx(0.06)
    assert adjusted[1] == pytest.approx(0.06)
    assert math.isnan(adjusted[3])


# --- compare_realism ------------------------------------------------------------------------

def synthetic(seed: int = 3, n: int = 60) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Real callers pause about twice as long and barge in more; their turns and latencies are
    drawn from the same distributions as the simulation's."""
    rng = np.random.default_rng(seed)
    simulated = behaviour({
        "pause_ms": rng.lognormal(math.log(500), 0.3, n),
        "user_turn_ms": rng.lognormal(math.log(3000), 0.4, n),
        "barge_in_rate": rng.uniform(0.0, 0.2, 20),
        "response_latency_ms": rng.normal(700, 100, n)}, source="simulation")
    real = behaviour({
        "pause_ms": rng.lognormal(math.log(1000), 0.3, n),
        "user_turn_ms": rng.lognormal(math.log(3000), 0.4, n),
        "barge_in_rate": rng.uniform(0.2, 0.6, 20),
        "response_latency_ms": rng.normal(700, 100, n)}, source="production")
    return simulated, real


def test_the_metrics_that_differ_are_flagged_with_their_direction():
    simulated, real = synthetic()
    report = va.compare_realism(simulated, real)
    table = report.table.set_index("metric")
    assert list(report.table.columns) == list(va.REALISM_COLUMNS)
    assert set(table.index[table["significant"]]) == {"pause_ms", "barge_in_rate"}
    assert (table["differs"] == table["significant"]).all()  # both shifts are large
    assert table.loc["pause_ms", "direction"] == "real callers pause longer"
    assert table.loc["barge_in_rate", "direction"] == "real callers barge in more often"
    assert table.loc["pause_ms", "cliffs_delta"] > 0.8
    assert table.loc["pause_ms", "median_ratio"] == pytest.approx(2.0, rel=0.2)
    for metric in ("pause_ms", "user_turn_ms"):  # the p-values are scipy's, before Holm
        sim = simulated.loc[simulated["metric"] == metric, "value"]
        rea = real.loc[real["metric"] == metric, "value"]
        assert table.loc[metric, "mannwhitney_p"] == pytest.approx(
            stats.mannwhitneyu(rea, sim, alternative="two-sided").pvalue)
        assert table.loc[metric, "ks_p"] == pytest.approx(stats.ks_2samp(rea, sim).pvalue)
    assert table.loc["user_turn_ms", "p_holm"] >= table.loc["user_turn_ms", "mannwhitney_p"]
    summary = report.summary()
    assert summary.index("real callers pause longer") >= 0
    assert "barge in more often" in summary and "turns" not in summary
    assert list(report.differences["metric"])[0] in ("pause_ms", "barge_in_rate")


def test_identical_distributions_flag_nothing():
    simulated, _ = synthetic(seed=5)
    report = va.compare_realism(simulated, simulated.assign(source="production"))
    assert not report.table["significant"].any()
    assert (report.table["cliffs_delta"] == 0).all()
    assert set(report.table["direction"]) == {"no difference"}
    assert report.summary().startswith("No caller metric differs")
    assert (report.realism["change"].isin(
        ["nothing to change",
         "the agent's figure: not a caller setting (compare builds instead)"])).all()


def test_a_significant_but_negligible_shift_does_not_differ():
    """Many turns make a 0.2 dB difference significant; below min_difference it is no finding."""
    rng = np.random.default_rng(6)
    simulated = behaviour({"speech_to_noise_db": rng.normal(30.0, 0.1, 400)},
                          source="simulation")
    real = behaviour({"speech_to_noise_db": rng.normal(30.2, 0.1, 400)}, source="production")
    report = va.compare_realism(simulated, real)
    row = report.table.set_index("metric").loc["speech_to_noise_db"]
    assert row["significant"] and not row["differs"]
    assert row["shift"] == pytest.approx(0.2, abs=0.03) and row["min_difference"] == 3.0
    assert report.differences.empty and report.summary().startswith("No caller metric")
    assert not report.realism.set_index("metric").loc["speech_to_noise_db", "differs"]
    looser = va.compare_realism(simulated, real, min_differences={"speech_to_noise_db": 0.1})
    assert looser.table.set_index("metric").loc["speech_to_noise_db", "differs"]


def test_hodges_lehmann_is_the_median_pairwise_difference():
    x, y = np.array([1.0, 2.0, 9.0]), np.array([4.0, 5.0])
    assert va.hodges_lehmann(x, y) == np.median([b - a for a in x for b in y])
    rng = np.random.default_rng(1)
    big_x, big_y = rng.normal(0, 1, 2000), rng.normal(5, 1, 2000)  # sampled pairs
    assert va.hodges_lehmann(big_x, big_y) == pytest.approx(5.0, abs=0.05)


def test_alpha_test_and_min_n_are_honoured():
    simulated, real = synthetic(n=8)
    strict = va.compare_realism(simulated, real, alpha=1e-9)
    assert not strict.table["significant"].any()
    by_ks = va.compare_realism(simulated, real, test="ks").table.set_index("metric")
    assert by_ks.loc["pause_ms", "p_holm"] >= by_ks.loc["pause_ms", "ks_p"]
    few = va.compare_realism(simulated, real, min_n=10).table.set_index("metric")
    assert math.isnan(few.loc["pause_ms", "mannwhitney_p"])
    assert "not tested" in few.loc["pause_ms", "note"]
    assert not few.loc["pause_ms", "significant"]
    assert few.loc["barge_in_rate", "significant"]  # 20 calls a side: tested


def test_a_metric_only_one_side_has_points_to_it():
    rng = np.random.default_rng(2)
    simulated = behaviour({"user_turn_ms": rng.normal(3000, 300, 10)}, source="simulation")
    real = behaviour({"user_turn_ms": rng.normal(3000, 300, 10),
                      "pause_ms": rng.normal(900, 100, 10)}, source="production")
    report = va.compare_realism(simulated, real)
    row = report.table.set_index("metric").loc["pause_ms"]
    assert row["n_simulated"] == 0 and row["n_real"] == 10 and not row["significant"]
    assert row["direction"] == "only the real calls has pause_ms"
    change = report.realism.set_index("metric").loc["pause_ms", "change"]
    assert change.startswith("lengthen: script {pause: S} markers")


def test_bad_arguments_are_one_line_errors():
    simulated, real = synthetic(n=5)
    with pytest.raises(ValueError, match="alpha"):
        va.compare_realism(simulated, real, alpha=1.5)
    with pytest.raises(ValueError, match="test must be"):
        va.compare_realism(simulated, real, test="t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown metric.*'pauses'"):
        va.compare_realism(simulated, real, metrics=["pauses"])
    with pytest.raises(ValueError, match="no caller_behaviour frame"):
        va.compare_realism(pd.DataFrame({"x": [1]}), real)


# --- the realism table ----------------------------------------------------------------------

def test_the_realism_table_names_the_settings_and_their_direction():
    rng = np.random.default_rng(4)
    simulated = behaviour({"speech_to_noise_db": rng.normal(40, 3, 30),
                           "caller_words_per_minute": rng.normal(170, 10, 30),
                           "dead_air_ms": rng.normal(100, 30, 30)}, source="simulation")
    real = behaviour({"speech_to_noise_db": rng.normal(20, 3, 30),
                      "caller_words_per_minute": rng.normal(172, 10, 30),
                      "dead_air_ms": rng.normal(400, 30, 30)}, source="production")
    realism = va.compare_realism(simulated, real).realism.set_index("metric")
    noise = realism.loc["speech_to_noise_db"]
    assert noise["owner"] == "environment" and noise["differs"]
    assert noise["direction"] == "real callers call from noisier places"
    assert noise["change"].startswith("raise: environment base_noise_volume")
    assert realism.loc["dead_air_ms", "owner"] == "agent"
    assert "not a caller setting" in realism.loc["dead_air_ms", "change"]
    assert list(realism["effect"]) == sorted(realism["effect"], reverse=True)  # largest first
    assert realism.loc["caller_words_per_minute", "settings"] == "persona speech.rate"


def test_every_caller_metric_has_a_driver_and_a_phrase():
    for metric in va.CALLER_METRICS:
        assert metric in va.DRIVERS
        driver = va.DRIVERS[metric]
        assert driver.owner in ("caller", "environment", "caller and agent", "agent")
        assert bool(driver.knobs) == (driver.owner != "agent")


# --- measuring a turn's audio ---------------------------------------------------------------

def burst(seconds: float, *, level_dbfs: float, rng: np.random.Generator) -> np.ndarray:
    """A 200 Hz tone with harmonics at ``level_dbfs`` (mean square), like tone speech."""
    t = np.arange(int(seconds * RATE)) / RATE
    wave = np.sin(2 * np.pi * 200 * t) + 0.5 * np.sin(2 * np.pi * 400 * t)
    return wave / np.sqrt(np.mean(wave**2)) * 32768 * 10 ** (level_dbfs / 20)


def test_a_turn_in_noise_gives_its_length_pauses_and_speech_to_noise():
    rng = np.random.default_rng(7)
    pieces = [np.zeros(int(0.2 * RATE)), burst(1.0, level_dbfs=-20, rng=rng),
              np.zeros(int(0.8 * RATE)), burst(0.5, level_dbfs=-20, rng=rng),
              np.zeros(int(0.15 * RATE)),  # a word gap: no pause
              burst(0.5, level_dbfs=-20, rng=rng), np.zeros(int(0.3 * RATE))]
    clean = np.concatenate(pieces)
    noise = rng.normal(0, 32768 * 10 ** (-50 / 20), clean.size)  # 30 dB below the speech
    samples = np.clip(np.round(clean + noise), -32768, 32767).astype(np.int16)
    turn = va.measure_turn(samples, sample_rate_hz=RATE)
    # frame resolution: 10 ms at each edge
    assert turn.turn_ms == pytest.approx(1000 + 800 + 500 + 150 + 500, abs=20)
    assert turn.pauses_ms == [pytest.approx(800, abs=20)]
    # speech frames carry the noise too (+0.04 dB); the median noise frame is the noise
    assert turn.speech_to_noise_db == pytest.approx(30.0, abs=1.0)


def test_digital_silence_is_the_quantization_floor_not_infinity():
    rng = np.random.default_rng(8)
    clean = np.concatenate([np.zeros(int(0.3 * RATE)), burst(1.0, level_dbfs=-20, rng=rng),
                            np.zeros(int(0.3 * RATE))])
    turn = va.measure_turn(np.round(clean).astype(np.int16), sample_rate_hz=RATE)
    assert turn.speech_to_noise_db == pytest.approx(-20 + 101.2, abs=0.5)
    assert turn.pauses_ms == []
    empty = va.measure_turn(np.zeros(RATE, dtype=np.int16), sample_rate_hz=RATE)
    assert empty.turn_ms is None and empty.speech_to_noise_db is None


def test_a_shorter_minimum_pause_finds_the_word_gap():
    rng = np.random.default_rng(9)
    clean = np.concatenate([np.zeros(4800), burst(0.5, level_dbfs=-20, rng=rng),
                            np.zeros(int(0.2 * RATE)), burst(0.5, level_dbfs=-20, rng=rng),
                            np.zeros(4800)])
    samples = np.round(clean).astype(np.int16)
    assert va.measure_turn(samples, sample_rate_hz=RATE).pauses_ms == []
    found = va.measure_turn(samples, sample_rate_hz=RATE, min_pause_ms=150).pauses_ms
    assert found == [pytest.approx(200, abs=20)]
