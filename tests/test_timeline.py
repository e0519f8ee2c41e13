"""core/timeline.py: where a session's time outside measurements went, from test reports' times."""
from __future__ import annotations

import pytest

from pytest_gpuperf.core.timeline import HEAVIEST_SHOWN, Timeline
from pytest_gpuperf.report import rows as report_rows


def _two_workers() -> Timeline:
    """Two workers from t=100: gw0 runs a (setup 1 s, call 3 s) from 110 and c from 114 to 120;
    gw1 runs b from 112 to 117."""
    t = Timeline()
    t.add("gw0", "f.py::test_a[1]", 110.0, 111.0, 1.0)
    t.add("gw0", "f.py::test_a[1]", 111.0, 114.0, 3.0)
    t.add("gw1", "f.py::test_b", 112.0, 117.0, 5.0)
    t.add("gw0", "f.py::test_a[2]", 114.0, 120.0, 6.0)
    return t


def test_outside_splits_each_workers_span_into_before_own_work_after_and_between():
    out = _two_workers().outside(100.0, 121.0, 2, {"f.py::test_a[1]": 2.0, "f.py::test_b": 1.0})
    assert out.total_s == pytest.approx(2 * 21 - 3)
    assert out.before_first_test_s == pytest.approx(10 + 12)
    assert out.after_last_test_s == pytest.approx(1 + 4)
    # own work: a[1] 4 - 2, a[2] 6 (not measured), b 5 - 1
    assert out.own_work_s == pytest.approx(12)
    assert out.heaviest == (("test_a", 8.0), ("test_b", 4.0))
    # 39 s outside measurements: 22 before, 5 after, 12 own work, nothing between
    assert out.between_tests_s == pytest.approx(0)


def test_a_worker_that_ran_nothing_waits_all_along_and_a_crashed_workers_stand_in_counts_nowhere():
    """-n 4 with tests on two workers: the other two wait the whole span (after the last test).
    xdist reports the test a crashed worker was running with start and stop 0 and no worker id;
    the worker restarted in its place reports under a new id, and the count stays 4."""
    t = _two_workers()
    t.add("main", "f.py::test_crashed", 0.0, 0.0, 0.0)
    t.add("gw4", "f.py::test_c", 115.0, 116.0, 1.0)
    out = t.outside(100.0, 121.0, 4, {})
    assert set(t.processes) == {"gw0", "gw1", "gw4"} and "f.py::test_crashed" not in t.test_s
    assert out.total_s == pytest.approx(4 * 21)
    assert out.before_first_test_s == pytest.approx(10 + 12 + 15)
    assert out.after_last_test_s == pytest.approx(1 + 4 + 5 + 21)  # gw4 from 116; one worker idle
    assert out.own_work_s == pytest.approx(16)
    assert out.between_tests_s == pytest.approx(84 - 37 - 31 - 16)


def test_outside_names_only_the_heaviest_and_needs_reports():
    t = Timeline()
    for i in range(HEAVIEST_SHOWN + 2):
        t.add("main", f"f.py::test_{i}", 1.0 + i, 1.0 + i + 0.1 * (i + 1), 0.1 * (i + 1))
    out = t.outside(0.0, 10.0, 0, {})
    assert [name for name, _ in out.heaviest] == [f"test_{i}" for i in range(HEAVIEST_SHOWN + 1, 1, -1)]
    assert (out.before_first_test_s, out.after_last_test_s) == pytest.approx((1.0, 4.5))
    assert out.between_tests_s == pytest.approx(10 - 1 - 4.5 - 1.5)
    assert Timeline().outside(0.0, 1.0, 1, {}) is None


def test_the_time_line_names_the_parts_outside_measurements():
    from tests.test_report import make_results  # noqa: PLC0415 - the report tests' records

    results = make_results(with_baseline=False)[:1]
    vars(results[0]).update(wall_s=2.0, first_call_s=1.0, measured_s=0.5)
    out = _two_workers().outside(100.0, 121.0, 2, {"f.py::test_a[1]": 2.0})
    line = report_rows.time_line(results, 21.0, processes=2, outside=out)
    assert line.endswith("outside measurements 40.0 s: before the first test 22.0 s (start, collection, "
                         "compiling ahead, node gap), the tests' own work 13.0 s (test_a 8.0 s, test_b 5.0 s), "
                         "after the last test 5.0 s (the workers' last tests ended 3.0 s apart; the last: "
                         "f.py::test_a[2] 6.0 s), between tests 0.0 s")


def test_the_workers_ends_name_how_far_apart_they_were_and_the_test_that_ended_last():
    out = _two_workers().outside(100.0, 121.0, 2, {})
    assert out.ends_apart_s == pytest.approx(3.0) and out.last_test == ("f.py::test_a[2]", 6.0)
    idle = _two_workers().outside(100.0, 121.0, 3, {})  # a third worker ran nothing: it ended at the start
    assert idle.ends_apart_s == pytest.approx(20.0)
    alone = _two_workers().outside(100.0, 121.0, 1, {})
    assert (alone.ends_apart_s, alone.last_test) == (0.0, None)
