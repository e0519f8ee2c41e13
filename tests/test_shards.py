"""--gpuperf-shard=K/N and `gpuperf merge-shards`: the split is disjoint, covers every test, is balanced
by recorded time and the same in every process; bad specs are usage errors; the shards' results merge
into one report with the right exit status."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cli_run import run

from pytest_gpuperf import cli
from pytest_gpuperf.core.records import Result
from pytest_gpuperf.core.shards import ShardSpec, Split, digest, longest_first, partition, shards_problem
from pytest_gpuperf.store import baseline as bl
from pytest_gpuperf.store import results as results_store

pytest_plugins = ["pytester"]

IDS = [f"perf_tests/test_k.py::test_k[impl{i % 3}-size{i}]" for i in range(40)]


def skewed_costs(ids: list[str], seed: int = 1) -> dict[str, float]:
    """Recorded times from 0.05 s to 20 s, a few tests far longer than most (as autotuned matmuls)."""
    rng = random.Random(seed)
    return {t: round(rng.lognormvariate(0.0, 1.2), 4) for t in ids}


def loads(parts: list[list[str]], costs: dict[str, float]) -> list[float]:
    return [sum(costs[t] for t in part) for part in parts]


# ---- the split ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 40, 55])
def test_the_parts_are_disjoint_and_cover_every_test(count):
    costs = {t: c for t, c in skewed_costs(IDS).items() if t not in IDS[::5]}  # some without a recorded time
    parts = partition(IDS, costs, count)
    assert len(parts) == count
    flat = [t for part in parts for t in part]
    assert sorted(flat) == sorted(IDS) and len(flat) == len(set(flat))


def test_the_split_is_balanced_by_recorded_time():
    costs = skewed_costs(IDS)
    parts = partition(IDS, costs, 4)
    spent = loads(parts, costs)
    # greedy to the least loaded part: no part ends more than one test's time above another
    assert max(spent) - min(spent) <= max(costs.values())
    assert max(spent) <= 1.1 * sum(costs.values()) / 4  # within 10% of perfect on this suite
    by_count = [IDS[k::4] for k in range(4)]  # what a split by count alone would give
    assert max(spent) < max(loads(by_count, costs))


def test_tests_without_a_recorded_time_are_dealt_round_robin():
    parts = partition(list(reversed(IDS)), {}, 3)
    assert [len(p) for p in parts] == [14, 13, 13]
    assert parts[0][:2] == sorted(IDS)[0:4:3]  # by id: the first to part 1, the fourth to part 1 again
    # where some are recorded, the others count as the median recorded time: 10 s each here
    costs = {t: 10.0 for t in IDS[:4]} | {IDS[4]: 30.0, IDS[5]: 1.0}
    mixed = partition(IDS, costs, 3)
    assert mixed[0][0] == IDS[4] and [len(p) for p in mixed] == [12, 14, 14]


def test_the_split_depends_only_on_the_ids_and_costs():
    costs = skewed_costs(IDS)
    shuffled = IDS[:]
    random.Random(7).shuffle(shuffled)
    assert partition(shuffled, costs, 4) == partition(IDS, costs, 4)
    assert digest(shuffled, costs) == digest(IDS, costs) != digest(IDS, dict(costs, **{IDS[0]: 99.0}))


def test_the_split_is_the_same_in_another_process():
    """Each shard's runner computes the partition on its own: another interpreter (another hash seed)
    must get the same parts."""
    costs = skewed_costs(IDS)
    code = ("import json, sys; from pytest_gpuperf.core.shards import partition; "
            "ids, costs = json.load(sys.stdin); print(json.dumps(partition(ids, costs, 4)))")
    outs = [subprocess.run([sys.executable, "-c", code], input=json.dumps([IDS, costs]), capture_output=True,
                           text=True, check=True, env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
            for seed in ("1", "2")]
    assert json.loads(outs[0]) == json.loads(outs[1]) == partition(IDS, costs, 4)


def test_longest_first_orders_by_recorded_time():
    costs = {"a": 1.0, "b": 5.0, "c": 3.0, "e": 5.0}
    assert longest_first(["a", "b", "c", "d", "e"], costs) == ["b", "e", "d", "c", "a"]  # d: the median, 4 s
    assert longest_first(["z", "y", "x"], {}) == ["z", "y", "x"]  # nothing recorded: as collected


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "3", "1/3/4", "-1/2", "", "1 / x"])
def test_bad_shard_specs_are_refused(text):
    with pytest.raises(ValueError, match="K"):
        ShardSpec.parse(text)


def test_a_split_describes_itself():
    costs = skewed_costs(IDS[:10])
    split = Split.of(IDS, costs, ShardSpec(2, 3))
    assert split.total == 40 and split.tests == frozenset(partition(IDS, costs, 3)[1])
    assert split.describe().startswith(f"shard 2/3: {len(split.tests)} of 40 tests, ")
    assert "split by count" in Split.of(IDS, {}, ShardSpec(1, 2)).describe()
    assert split.to_dict() == {"index": 2, "count": 3, "tests": len(split.tests), "of": 40,
                               "digest": digest(IDS, costs)}


def test_shards_problems():
    one = {"count": 3, "digest": "d"}
    shard = lambda k, **kw: dict(one, index=k, **kw)  # noqa: E731
    assert shards_problem([("a", shard(1)), ("b", shard(2)), ("c", shard(3))]) is None
    assert shards_problem([("a", None), ("b", None)]) is None  # not shards: only the ids must not overlap
    assert "2 of 3 is missing" in shards_problem([("a", shard(1)), ("c", shard(3))])
    assert "again" in shards_problem([("a", shard(1)), ("b", shard(1)), ("c", shard(3))])
    assert "different split" in shards_problem([("a", shard(1)), ("b", shard(2, digest="e")), ("c", shard(3))])
    assert "records no shard" in shards_problem([("a", shard(1)), ("b", None)])
    assert "not a shard" in shards_problem([("a", {"index": 4, "count": 3})])


# ---- the option in a pytest session -------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.parametrize("n", range(7))
def test_case(gpu_benchmark, n):
    assert gpu_benchmark(lambda: n) == n

def test_plain():
    pass
"""
FAST = ["--gpuperf-budget", "0.05", "-p", "no:randomly", "-p", "no:cacheprovider"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", *FAST, *args)
    return [line for line in result.outlines if line.startswith("test_suite.py::")]


@pytest.mark.parametrize("spec", ["0/2", "3/2", "two", "1/0"])
def test_a_bad_shard_option_is_one_usage_line(suite, spec):
    result = suite.runpytest(f"--gpuperf-shard={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --gpuperf-shard:") and spec in errors[0]


def test_without_gpuperf_the_shards_split_by_count_after_deselection(suite):
    everything = collected(suite, "-k", "not plain")
    parts = [collected(suite, "-k", "not plain", f"--gpuperf-shard={k}/3") for k in (1, 2, 3)]
    assert sorted(t for p in parts for t in p) == sorted(everything) and len(everything) == 7
    assert sorted(len(p) for p in parts) == [2, 2, 3]
    assert parts == [collected(suite, "-k", "not plain", f"--gpuperf-shard={k}/3") for k in (1, 2, 3)]
    result = suite.runpytest("--gpuperf-shard=2/3", *FAST)
    result.assert_outcomes(passed=3, deselected=5)
    result.stdout.fnmatch_lines(["gpuperf: shard 2/3: 3 of 8 tests, split by count*"])


def test_with_a_baseline_the_shards_split_by_its_recorded_times(suite):
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST).assert_outcomes(passed=8)
    path = next((suite.path / "baselines").glob("*.yaml"))
    base = bl.load(path)
    assert all(e.wall_s > 0 for e in base.entries.values())  # each recording keeps its measuring time
    costs = {f"test_suite.py::test_case[{n}]": 10.0 - n for n in range(7)}  # test_plain has no entry
    bl.save(path, base.device, base.software, {name: replace(e, wall_s=costs[name]) for name, e in base.entries.items()},
            keep_others=False)
    ids = collected(suite, "--gpuperf")
    parts = [collected(suite, "--gpuperf", f"--gpuperf-shard={k}/2") for k in (1, 2)]
    assert [sorted(p) for p in parts] == [sorted(p) for p in partition(ids, costs, 2)]
    spent = loads(parts, dict.fromkeys(ids, 0.0) | costs)
    assert abs(spent[0] - spent[1]) <= 4.0  # by count (4 and 4 tests in id order) it would be 34 - 15
    result = suite.runpytest("--gpuperf", "--gpuperf-shard=1/2", "--collect-only", *FAST)
    result.stdout.fnmatch_lines([f"gpuperf: shard 1/2: {len(parts[0])} of 8 tests, {spent[0]:.3g} s of 49 s recorded "
                                 f"(1 without a recorded time)" if "test_suite.py::test_plain" in parts[0] else
                                 f"gpuperf: shard 1/2: {len(parts[0])} of 8 tests, {spent[0]:.3g} s of 49 s recorded"])


def test_an_empty_shard_passes(suite):
    result = suite.runpytest("--gpuperf-shard=9/9", "-k", "case", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: shard 9/9: 0 of 7 tests*"])
    assert suite.runpytest("--gpuperf-shard=1/2", "-k", "nothing", *FAST).ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_shards_run_under_gpuperf_merge_into_one_report(suite, capsys):
    for k in (1, 2, 3):
        assert suite.runpytest("--gpuperf", f"--gpuperf-shard={k}/3", f"--gpuperf-json=s{k}.json", *FAST).ret == 0
    shards = [json.loads((suite.path / f"s{k}.json").read_text())["machine_info"]["gpuperf_shard"] for k in (1, 2, 3)]
    assert [s["index"] for s in shards] == [1, 2, 3] and len({s["digest"] for s in shards}) == 1
    files = [str(suite.path / f"s{k}.json") for k in (1, 2, 3)]
    code = cli.main(["merge-shards", *files, "-o", str(suite.path / "all.json"), "--markdown", str(suite.path / "all.md")])
    out = capsys.readouterr().out
    assert code == 0 and "7 measured: 7 new" in out
    _, merged = results_store.load_results(suite.path / "all.json")
    assert sorted(r.id.nodeid for r in merged) == [f"test_suite.py::test_case[{n}]" for n in range(7)]
    assert "7 measured" in (suite.path / "all.md").read_text()
    assert cli.main(["merge-shards", *files[:2]]) == 2
    assert "shard 3 of 3 is missing" in capsys.readouterr().err


def test_under_xdist_the_controller_gets_the_workers_split(suite):
    """The workers cut the tests; the controller, which writes the results JSON, learns their split."""
    suite.makeconftest("""
        def pytest_sessionfinish(session):
            if not hasattr(session.config, "workerinput"):
                print("RECORD", session.config.pluginmanager.get_plugin("gpuperf-shard").record)
    """)
    result = suite.runpytest_subprocess("-n", "2", "--gpuperf-shard=1/2", "-s", *FAST)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*RECORD {'index': 1, 'count': 2, 'tests': 4, 'of': 8, 'digest': '*'}"])


def test_xdist_workers_hand_out_the_longest_tests_first(suite):
    """Under pytest-xdist's load distribution each worker orders the tests longest first by recorded
    time, and the controller hands them out one at a time; other distributions keep their order."""
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST).assert_outcomes(passed=8)
    path = next((suite.path / "baselines").glob("*.yaml"))
    base = bl.load(path)
    bl.save(path, base.device, base.software, {name: replace(e, wall_s=1.0 + int(name[-2])) for name, e in
                                               base.entries.items()}, keep_others=False)  # test_case[n]: 1 + n s
    suite.makeconftest("""
        def pytest_collection_finish(session):
            worker = getattr(session.config, "workerinput", {}).get("workerid")
            if worker:
                open(f"order-{worker}.txt", "w").write(" ".join(i.name.strip("test_case[]") for i in session.items))

        def pytest_sessionfinish(session):
            if not hasattr(session.config, "workerinput"):
                print("CHUNK", session.config.option.maxschedchunk)
    """)
    result = suite.runpytest_subprocess("-n", "2", "--gpuperf", "-s", *FAST)
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*CHUNK 1"])
    # test_plain (no entry) counts as the median recorded time, 4 s, after the earlier of equal ones
    assert (suite.path / "order-gw0.txt").read_text() == "6 5 4 3 plain 2 1 0"
    result = suite.runpytest_subprocess("-n", "2", "--dist", "loadfile", "--gpuperf", "-s", *FAST)
    result.stdout.fnmatch_lines(["*CHUNK None"])
    assert (suite.path / "order-gw0.txt").read_text() == "0 1 2 3 4 5 6 plain"


# ---- merge-shards on written files -----------------------------------------------------------------

DEVICE = {"key": "nvidia-h100-80gb-hbm3", "name": "NVIDIA H100 80GB HBM3"}
SOFTWARE = {"torch": "2.11.0+cu130"}


def result(nodeid: str, verdict: str = "same", **extra) -> Result:
    name, param = nodeid.split("::")[1].split("[")
    return Result.from_dict({"nodeid": nodeid, "name": name, "param": param.rstrip("]"), "group": name, "median_ms": 0.1,
            "noise": 0.01, "samples": 100, "method": "events", "cache": "cold", "verdict": verdict,
            "memory_verdict": "same", "change": 0.2 if verdict == "slower" else 0.0,
            "message": f"{verdict} by test", "baseline": {"median_ms": 0.1, "history": [0.1, 0.1]}, **extra})


def write_shards(directory: Path, verdicts: dict[str, str], count: int = 2, device=DEVICE) -> list[str]:
    """The results JSON files of `count` shards of the tests in `verdicts` (test id -> time verdict)."""
    directory.mkdir(exist_ok=True)
    ids = sorted(verdicts)
    parts = partition(ids, {}, count)
    files = []
    for k, part in enumerate(parts, 1):
        path = directory / f"shard{k}.json"
        results_store.write_json(path, [result(t, verdicts[t]) for t in part], device, SOFTWARE, "2026-11-29T10:00:00",
                                 shard=Split.of(ids, {}, ShardSpec(k, count)).to_dict())
        files.append(str(path))
    return files


SAME = {f"perf_tests/test_k.py::test_k[impl-size{i}]": "same" for i in range(5)}


def test_merge_shards_none_slower_is_exit_0_with_one_report(tmp_path, capsys):
    files = write_shards(tmp_path, SAME)
    code, out, err = run(["merge-shards", *files, "-o", str(tmp_path / "all.json"),
                          "--markdown", str(tmp_path / "all.md")], capsys)
    assert code == 0, err
    assert "5 measured: 5 same" in out and "REGRESSION" not in out
    device, merged = results_store.load_results(tmp_path / "all.json")
    assert device["key"] == DEVICE["key"] and sorted(r.id.nodeid for r in merged) == sorted(SAME)
    assert all(r.judged.verdict == "same" and r.baseline.history == [0.1, 0.1] for r in merged)
    doc = json.loads((tmp_path / "all.json").read_text())
    assert "gpuperf_shard" not in doc["machine_info"]  # the merged report is the whole run
    assert (tmp_path / "all.md").read_text().count("⚪ same") == 5


def test_merge_shards_some_slower_is_exit_1(tmp_path, capsys):
    verdicts = dict(SAME, **{"perf_tests/test_k.py::test_k[impl-size3]": "slower"})
    files = write_shards(tmp_path, verdicts, count=3)
    code, out, _ = run(["merge-shards", *files, "--markdown", str(tmp_path / "all.md")], capsys)
    assert code == 1
    assert "REGRESSION perf_tests/test_k.py::test_k[impl-size3]: slower by test" in out
    assert "### Regressions" in (tmp_path / "all.md").read_text()


def test_merge_shards_counts_more_work_as_the_gate_does(tmp_path, capsys):
    files = write_shards(tmp_path, SAME)
    doc = json.loads(Path(files[0]).read_text())
    doc["benchmarks"][0]["extra_info"]["counter_verdict"] = "more"  # time same, the counters saw more work
    Path(files[0]).write_text(json.dumps(doc))
    assert run(["merge-shards", *files], capsys)[0] == 1


def test_merge_shards_bad_input_is_exit_2(tmp_path, capsys):
    files = write_shards(tmp_path, SAME)
    for argv, words in [
        ([files[0]], "shard 2 of 2 is missing"),
        ([files[0], files[0], files[1]], "given twice"),
        ([files[0], str(tmp_path / "absent.json")], "absent.json: no such file"),
    ]:
        code, _, err = run(["merge-shards", *argv], capsys)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run(["merge-shards", files[0], str(tmp_path / "bad.json")], capsys)
    assert code == 2 and "bad.json: invalid JSON" in err
    other = write_shards(tmp_path / "a100", SAME, device={"key": "nvidia-a100"})
    code, _, err = run(["merge-shards", files[0], other[1]], capsys)
    assert code == 2 and "nvidia-a100" in err and "one GPU model" in err
    regrouped = write_shards(tmp_path / "three", SAME, count=3)
    code, _, err = run(["merge-shards", files[0], *regrouped[1:]], capsys)
    assert code == 2 and "different split" in err
    overlapping = tmp_path / "overlap.json"  # not shards of one split, and a test in both
    results_store.write_json(overlapping, [result(sorted(SAME)[0])], DEVICE, SOFTWARE, "2026-11-29T10:00:00")
    plain = tmp_path / "plain.json"
    results_store.write_json(plain, [result(sorted(SAME)[0])], DEVICE, SOFTWARE, "2026-11-29T10:00:00")
    code, _, err = run(["merge-shards", str(overlapping), str(plain)], capsys)
    assert code == 2 and "is also in" in err
    code, _, err = run(["merge-shards", str(tmp_path / "x.yaml")], capsys)
    assert code == 2 and "a baseline, not a shard's results" in err
