"""How a test's timed rounds spread (docs/benchmarking.md, "Noise"): the median round, the
slowest against it, and the mean (the ОРП's) above it, from synthetic round times."""

import pytest

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.performance.spread import NOISY_MEAN_ABOVE_MEDIAN, Spread
from pytest_gostcnn.performance.timing import CellTiming, Timing
from pytest_gostcnn.run.performance_summary import noisy_line, spread_line


def timing(*cells: tuple[float, ...]) -> Timing:
    """An М (M) training test whose cells timed these rounds."""
    peak = Peak(1e12, "given (--gost-peak)")
    return Timing(
        "M",
        "training",
        "float32",
        2,
        len(cells[0]),
        10**9,
        tuple(
            CellTiming(c, "cpu", 2 * len(rounds), rounds, peak, f"{c:08x}")
            for c, rounds in enumerate(cells)
        ),
    )


def test_equal_rounds_spread_not_at_all():
    spread = timing((0.5,) * 8).spread

    assert spread.median_seconds == 0.5
    assert spread.slowest_to_median == 1.0 and spread.mean_above_median == 0.0
    assert not spread.noisy


def test_one_round_ten_times_the_others_is_noisy():
    spread = Spread.of((1.0,) * 9 + (10.0,))

    assert spread.slowest_to_median == 10.0
    assert spread.mean_above_median == pytest.approx(0.9)  # mean 1.9 s, median 1 s
    assert spread.noisy


def test_a_mean_exactly_at_the_threshold_is_not_noisy():
    # 9 rounds of 20 s and one of 40 s: mean 22 s, 10 % above the median, 20 s.
    assert NOISY_MEAN_ABOVE_MEDIAN == 0.10
    assert not Spread.of((20.0,) * 9 + (40.0,)).noisy


def test_a_mean_just_past_the_threshold_is_noisy():
    assert Spread.of((20.0,) * 9 + (40.5,)).noisy  # mean 22.05 s


def test_the_orp_is_lowered_by_the_mean_against_the_median():
    # Mean 1.25 s, median 1 s: the ОРП is 1/1.25 of the median round's rate, 20 % lower.
    assert Spread.of((1.0, 1.0, 1.0, 2.0)).orp_lowered == pytest.approx(0.2)


def test_the_systems_spread_is_over_each_rounds_slowest_cell():
    # Each cell has one slow round, a different one: the system waits for both.
    spread = timing((1.0, 3.0, 1.0, 1.0), (1.0, 1.0, 3.0, 1.0)).spread

    assert spread.median_seconds == 2.0 and spread.slowest_seconds == 3.0
    assert spread.mean_above_median == 0.0


def test_the_report_keeps_the_spread_of_the_test_and_of_each_cell():
    data = timing((1.0,) * 9 + (10.0,)).as_dict()

    assert data["spread"] == {
        "median_round_seconds": 1.0,
        "slowest_round_seconds": 10.0,
        "slowest_to_median": 10.0,
        "mean_above_median": pytest.approx(0.9),
        "noisy": True,
    }
    assert data["cells"][0]["spread"] == data["spread"]


def test_the_summary_line_gives_median_slowest_and_mean():
    line = spread_line(timing((1.0,) * 9 + (10.0,)))

    assert line == (
        "rounds: median 1 s, slowest round 10x the median, mean (the ОРП's) 90 % above "
        "the median (NOISY)"
    )


def test_a_spread_of_hundreds_of_percent_is_written_out():
    line = spread_line(timing((1.0,) * 9 + (100.0,)))  # mean 10.9 s

    assert "mean (the ОРП's) 990 % above the median" in line
    assert "(М (M) training 91 %)" in noisy_line([timing((1.0,) * 9 + (100.0,))])


def test_a_mean_below_the_median_says_below():
    assert "mean (the ОРП's) 25 % below the median" in spread_line(timing((0.5, 2.0, 2.0)))


def test_the_warning_names_each_noisy_test_and_what_its_orp_lost():
    line = noisy_line([timing((1.0, 1.0, 1.0, 2.0))])

    assert line.startswith(
        "NOISY ROUNDS (М (M) training 20 %): the mean round lies more than 10 % above the median"
    )
    assert "rerun on a quiet machine or with more images" in line
