"""The history-window noise model (core/noise.py)."""
from __future__ import annotations

import math
import random
from unittest import mock

import pytest

from pytest_gpuperf.core import noise
from pytest_gpuperf.core.noise import ACROSS_MACHINES, HISTORY_WINDOW, SAME_MACHINE, pooled_spread


@pytest.mark.parametrize("df, exact", [(4, 7.173), (6, 5.208), (12, 3.930), (30, 3.385), (math.inf, 3.090)])
def test_t_quantile_matches_the_table(df, exact) -> None:
    assert noise.t_quantile(0.999, df) == pytest.approx(exact, rel=0.01)


def test_without_recordings_of_its_own_a_test_has_the_prior_spread() -> None:
    spread = pooled_spread([1.0], [1.0])
    assert spread.sigma == pytest.approx(ACROSS_MACHINES.sigma(1.0))
    assert spread.df == ACROSS_MACHINES.df


def test_the_absolute_part_of_the_prior_dominates_microsecond_calls() -> None:
    assert ACROSS_MACHINES.sigma(0.002) > 4 * ACROSS_MACHINES.sigma(2.0)


def test_agreeing_recordings_narrow_the_bound_and_scattered_ones_widen_it() -> None:
    one = pooled_spread([1.0], [1.0]).bound()
    agreeing = pooled_spread([1.0, 1.001, 0.999, 1.0, 1.002], [1.0]).bound()
    scattered = pooled_spread([1.0, 1.1, 0.92, 1.05, 0.97], [1.0]).bound()
    assert agreeing < one < scattered


def test_a_bimodal_history_allows_a_run_in_either_mode() -> None:
    history = [29.8, 33.7, 29.9, 33.6]  # torch.compile choosing between two kernels per process
    spread = pooled_spread(history, [33.7])
    change = math.log(33.7 / noise.center(history))
    assert spread.bound() > abs(change)


def test_an_outlier_recording_leaves_the_window() -> None:
    history = [2.0] + [1.0] * (HISTORY_WINDOW - 1)
    assert pooled_spread(history, [1.0]).sigma > 0.1
    history = noise.window([*history, 1.0])
    assert len(history) == HISTORY_WINDOW and 2.0 not in history
    assert pooled_spread(history, [1.0]).sigma < 0.01


def test_a_legacy_drift_counts_as_one_degree_of_freedom() -> None:
    plain = pooled_spread([1.0], [1.0])
    legacy = pooled_spread([1.0], [1.0], legacy_sd=0.1)
    assert legacy.df == plain.df + 1 and legacy.sigma > plain.sigma


def test_related_medians_pool_in_with_their_degrees_of_freedom() -> None:
    """A test's stored recordings (related medians, not compared) widen a quiet pair of sides by
    their own spread, weighted by their count: four related medians add three degrees of freedom."""
    base, now = [0.0025, 0.00251, 0.0025], [0.0026, 0.0026, 0.00261]
    plain = pooled_spread(base, now, SAME_MACHINE)
    related = pooled_spread(base, now, SAME_MACHINE, related=[0.0024, 0.0027, 0.00236, 0.0026])
    assert related.df == plain.df + 3 and related.sigma > 2 * plain.sigma
    assert (related.n_base, related.n_now) == (3, 3)  # they do not count as measurements of a side
    assert pooled_spread(base, now, SAME_MACHINE, related=[0.0025]) == plain  # one median: no spread


def test_one_machine_allows_less_spread_than_several() -> None:
    assert pooled_spread([1.0], [1.0], SAME_MACHINE).bound() < pooled_spread([1.0], [1.0]).bound()


def test_more_processes_per_side_narrow_the_bound() -> None:
    two = pooled_spread([1.0, 1.0], [1.0, 1.0], SAME_MACHINE).bound()
    one = pooled_spread([1.0], [1.0], SAME_MACHINE).bound()
    assert two < one


def test_the_process_whose_graph_timed_calls_all_read_apart_is_found() -> None:
    rounds = [{f"k{n}": 0.002 + n * 1e-4 + (0.0003 if p == 1 else 0.0) + (n % 3) * 1e-6 * p for n in range(12)}
              for p in range(3)]
    offsets = noise.process_offsets(rounds)
    assert offsets[1] == pytest.approx(0.0003, abs=5e-6) and offsets[0] == offsets[2] == 0.0


def test_no_offset_from_too_few_rounds_or_tests_or_within_the_noise() -> None:
    two = [{f"k{n}": 0.002 for n in range(12)}, {f"k{n}": 0.0023 for n in range(12)}]
    assert noise.process_offsets(two) == [0.0, 0.0]  # two rounds: no round is the odd one
    few = [{f"k{n}": 0.002 + (0.0003 if p == 0 else 0) for n in range(5)} for p in range(3)]
    assert noise.process_offsets(few) == [0.0, 0.0, 0.0]
    # medians spread 0.5 µs (sd) between processes: the first process's median residual (0.23 µs)
    # is within its noise
    rng = random.Random(3)
    noisy = [{f"k{n}": 0.002 + (0.0001 if p == 0 else 0) + rng.gauss(0, 0.0005) for n in range(12)} for p in range(3)]
    with mock.patch.object(noise, "OFFSET_SIGNIFICANCE", 0.0):
        assert noise.process_offsets(noisy)[0] > 0.0002
    assert noise.process_offsets(noisy) == [0.0, 0.0, 0.0]
    assert noise.process_offsets([]) == []


def test_host_clock_results_are_judged_with_the_hosts_spread() -> None:
    """A host-clock median moved 10% (sd) between processes of a shared 2-core machine: a 25% move
    of an unchanged CPU test is not a slowdown, while the same move of a GPU-timed test is."""
    from typed import judge

    host = judge({"median_ms": 6.0, "method": "cpu"}, {"median_ms": 7.5, "method": "cpu"}, 0.15)
    gpu = judge({"median_ms": 6.0, "method": "events"}, {"median_ms": 7.5, "method": "events"}, 0.15)
    assert host.time != "slower" and gpu.time == "slower"
    assert judge({"median_ms": 6.0, "method": "cpu"}, {"median_ms": 18.0, "method": "cpu"}, 0.15).time == "slower"
