"""`gpuperf ab` on several GPUs (ab_gpus.py), with a fake pytest that 'measures' on the GPU its
CUDA_VISIBLE_DEVICES names: the split covers every test once, each GPU alternates base and head,
no two processes share a GPU, and the parts merge into one report and one exit status."""
from __future__ import annotations

import _thread
import json
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf import ab, ab_gpus, cli
from pytest_gpuperf.ab import Side
from pytest_gpuperf.ab_budget import Budget
from pytest_gpuperf.core.versions import TIMING_VERSION
from pytest_gpuperf.store import results as results_store
from pytest_gpuperf.store.plan import Plan
from typed import result

pytest_plugins = ["pytester"]

#: How long a fake pytest process runs: long enough for processes on two GPUs to overlap.
PROCESS_S = 0.05


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args], cwd=repo, check=True,
                   capture_output=True, text=True)


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    """A committed repository (BASE = HEAD) whose working tree is marked as the head side."""
    root = pytester.path
    (root / "test_k.py").write_text("def test_k():\n    pass\n")
    for args in (["init", "-q"], ["add", "test_k.py"], ["commit", "-q", "-m", "base"]):
        git(root, *args)
    (root / "HEAD_MARK").write_text("")  # untracked: the base checkout has no such file
    return root


class FakeHost:
    """A pytest that reads each test at a fixed median per side (a list: one per process of that side
    on that GPU), lists the tests of its side, and records which process ran on which GPU when."""

    def __init__(self, medians: dict[str, dict], costs: dict[str, float] | None = None,
                 fail: tuple[str, str, int] | None = None, thresholds: dict[str, float] | None = None) -> None:
        self.medians, self.costs, self.fail = medians, costs or {}, fail  # fail: (gpu, side, process number)
        self.thresholds = thresholds or {}
        self.calls: list[dict] = []  # gpu, side, ids, start, end
        self.lock = threading.Lock()

    def __call__(self, args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
        side = "head" if (cwd / "HEAD_MARK").exists() else "base"
        gpu = (env or {}).get("CUDA_VISIBLE_DEVICES")
        start = time.perf_counter()
        time.sleep(PROCESS_S)
        listing = next((a.split("=", 1)[1] for a in args if a.startswith(ab_gpus.LIST_OPTION + "=")), None)
        if listing is not None:
            tests = sorted(self.medians[side])
            Path(listing).write_text(json.dumps({"tests": tests, "costs": {t: self.costs.get(t) for t in tests}}))
            self._record(gpu, "list-" + side, tests, start)
            return 0
        plan_arg = next((a for a in args if a.startswith("--gpuperf-ab-plan=")), None)
        plan = Plan.read(Path(plan_arg.split("=", 1)[1])) if plan_arg else Plan()
        ids = [i for i in (plan.select if plan.select is not None else sorted(self.medians[side]))
               if i in self.medians[side]]
        with self.lock:
            index = sum(c["gpu"] == gpu and c["side"] == side for c in self.calls)
        self._record(gpu, side, ids, start)
        if self.fail == (gpu, side, index):
            log.write_text("Fatal Python error: Segmentation fault\n")
            return -11
        if not ids:
            log.write_text("no tests ran\n")
            return 5
        median = {i: m[index] if isinstance(m, list) else m for i, m in self.medians[side].items()}
        json_path = Path(next(a for a in args if a.startswith("--gpuperf-json=")).split("=", 1)[1])
        results = [{"nodeid": i, "name": i, "param": "", "group": "g", "median_ms": median[i], "noise": 0.001,
                    "samples": 100, "ci_ms": [median[i] * 0.999, median[i] * 1.001], "method": "events",
                    "cache": "cold", "timing": TIMING_VERSION, "threshold": self.thresholds.get(i, 0.05)} for i in ids]
        results_store.write_json(json_path, [result(r) for r in results], {"key": "sim"}, {}, "2026-11-29T00:00:00")
        log.write_text(f"{len(ids)} passed\n")
        return 0

    def _record(self, gpu: str | None, side: str, ids: list[str], start: float) -> None:
        with self.lock:
            self.calls.append({"gpu": gpu, "side": side, "ids": ids, "start": start, "end": time.perf_counter()})

    def on(self, gpu: str) -> list[dict]:
        """The measuring processes of one GPU, in the order they started."""
        return sorted((c for c in self.calls if c["gpu"] == gpu and not c["side"].startswith("list")),
                      key=lambda c: c["start"])


TESTS = [f"t::k{n}" for n in range(9)]


def test_the_tests_split_between_the_gpus_once_each_and_each_gpu_alternates_alone(repo: Path) -> None:
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: 1.0 for i in TESTS}}
    medians["head"]["t::k4"] = 1.2  # slower on whichever GPU it lands: confirmed in three rounds there
    host = FakeHost(medians, costs={"t::k0": 9.0, "t::k1": 1.0})
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=host, say=lines.append)
    verdicts, base, head = ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    firsts = {g: host.on(g)[0]["ids"] for g in ("0", "1")}
    assert sorted(firsts["0"] + firsts["1"]) == TESTS  # every test in exactly one part
    assert not set(firsts["0"]) & set(firsts["1"])
    assert "t::k0" in firsts["0"] and "t::k1" in firsts["1"]  # longest first to the emptier GPU
    for gpu in ("0", "1"):
        processes = host.on(gpu)
        assert all(a["end"] <= b["start"] for a, b in zip(processes, processes[1:])), "two processes on one GPU"
        sides = [c["side"] for c in processes]
        assert sides == ["base", "head", "head", "base", "base", "head"][:len(sides)]
        assert all(c["ids"] == processes[1]["ids"] for c in processes[:2])  # both sides of round 1 alike
    slow_gpu = "0" if "t::k4" in firsts["0"] else "1"
    assert len(host.on(slow_gpu)) == 6 and len(host.on("1" if slow_gpu == "0" else "0")) == 2
    assert [c["ids"] for c in host.on(slow_gpu)[2:]] == [["t::k4"]] * 4  # later rounds: the undecided only
    busy = [(c["start"], c["end"]) for c in host.calls if not c["side"].startswith("list")]
    assert any(a0 < b1 and b0 < a1 for (a0, a1) in busy for (b0, b1) in busy if (a0, a1) != (b0, b1)), \
        "the GPUs ran one after the other"
    assert {c["gpu"] for c in host.calls if c["side"] == "list-base"} == {"0"}
    assert {c["gpu"] for c in host.calls if c["side"] == "list-head"} == {"1"}
    # one judgement, one report, one exit status
    assert {k: v.time for k, v in verdicts.items()} == {**{i: "same" for i in TESTS}, "t::k4": "slower"}
    assert base.processes == head.processes == 4 and len(base.rounds) == 3
    assert ab.report(verdicts, base, head, say=lines.append) == 1
    assert any("8 pytest processes" in line for line in lines)
    assert "gpuperf ab: 9 tests on 2 GPUs (0: 4, 1: 5), split by recorded time" in lines
    assert any(line.startswith(f"gpuperf ab: GPU {slow_gpu}: after round 3: 1 slower") for line in lines)


def test_identical_revisions_on_three_gpus_pass(repo: Path) -> None:
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: 1.0 for i in TESTS}}
    host = FakeHost(medians)
    run = ab.AbRun(["-q"], runner=host, say=lambda line: None)
    verdicts, base, head = ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1", "2"])
    assert sorted(c["ids"] for g in "012" for c in host.on(g) if c["side"] == "base") == \
        [TESTS[0::3], TESTS[1::3], TESTS[2::3]]  # no times recorded: dealt round-robin
    assert {v.time for v in verdicts.values()} == {"same"} and len(verdicts) == 9
    assert ab.report(verdicts, base, head, say=lambda line: None) == 0


def test_a_test_only_in_the_working_tree_is_new_on_its_gpu(repo: Path) -> None:
    medians = {"base": {"t::a": 1.0, "t::b": 1.0}, "head": {"t::a": 1.0, "t::b": 1.0, "t::new": 1.0}}
    host = FakeHost(medians, costs={"t::new": 5.0, "t::a": 1.0, "t::b": 1.0})  # the longest: alone on GPU 0
    lines: list[str] = []
    run = ab.AbRun(["-q"], runner=host, say=lines.append)
    verdicts, base, head = ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    assert {k: v.time for k, v in verdicts.items()} == {"t::a": "same", "t::b": "same", "t::new": "new"}
    assert any("GPU 0: round 1, base" in line and "none of these tests exist there" in line for line in lines)


def test_a_gpu_failing_after_its_first_round_stops_the_others_and_keeps_the_rounds_before(repo: Path) -> None:
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: [1.0, 1.2, 1.2] if i == "t::k0" else 1.0 for i in TESTS}}
    medians["head"]["t::k1"] = [1.3, 1.3, 1.3]  # on GPU 1 (recorded times below): measured again there
    host = FakeHost(medians, costs={"t::k0": 9.0, "t::k1": 8.0}, fail=("1", "head", 1))
    run = ab.AbRun(["-q"], rounds=3, runner=host, say=lambda line: None)
    with pytest.raises(ab.AbIncomplete) as caught:
        ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    exc = caught.value
    assert str(exc).startswith("GPU 1: head (working tree): pytest exited with status -11")
    assert "the other GPUs stopped after their last whole round" in str(exc)
    assert set(exc.verdicts) == set(TESTS)  # both GPUs' first rounds are judged
    assert all(len(p.rounds) == 1 for p in exc.head.parts if p.gpu == "1")


def test_an_interrupt_stops_every_gpu_and_keeps_their_rounds_before(repo: Path) -> None:
    """Ctrl-C while GPU 1's head runs its second process: that process is stopped (status -15), the
    command waits for every GPU's thread to end, and what their complete rounds decided comes back
    with the interrupt."""
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: [1.0, 1.2, 1.2] if i == "t::k0" else 1.0 for i in TESTS}}
    medians["head"]["t::k1"] = [1.3, 1.3, 1.3]
    host = FakeHost(medians, costs={"t::k0": 9.0, "t::k1": 8.0})

    def interrupted(args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
        second = any(c["gpu"] == "1" and c["side"] == "head" for c in host.on("1"))
        if (env or {}).get("CUDA_VISIBLE_DEVICES") == "1" and (cwd / "HEAD_MARK").exists() and second:
            _thread.interrupt_main()  # as a signal reaches the main thread, which stops the children
            time.sleep(1)
            log.write_text("Terminated\n")
            return -15
        return host(args, cwd, log, env)

    run = ab.AbRun(["-q"], rounds=3, runner=interrupted, say=lambda line: None)
    with pytest.raises(ab.AbInterrupted, match=r"interrupted \(GPU 0 had finished, GPU 1 after round 1\); the "
                                               r"report holds the complete rounds") as caught:
        ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    exc = caught.value
    assert set(exc.verdicts) == set(TESTS)  # GPU 1 ended its thread before the report: its round 1 is in
    assert exc.verdicts["t::k1"].time == "slower"
    assert all(len(p.rounds) == 1 for p in exc.head.parts if p.gpu == "1")


def test_an_interrupt_names_a_gpu_without_a_complete_round_and_its_tests_left_out(repo: Path) -> None:
    sides = {"base": Side("base", "HEAD", repo), "head": Side("head", "working tree", repo)}
    done = ab_gpus.Part("0", ["t::a"], replace(sides["base"], rounds=[{}, {}]), replace(sides["head"], rounds=[{}]),
                        verdicts={}, error=ab.AbError("stopped"))
    none = ab_gpus.Part("1", ["t::b", "t::c"], sides["base"], sides["head"], verdicts={}, error=ab.AbError("stopped"))
    assert ab_gpus.interrupted_text([done, none]) == ("interrupted (GPU 0 after round 1, GPU 1 in round 1, its 2 "
                                                      "tests left out); the report holds the complete rounds")


def test_a_gpu_failing_in_its_first_round_leaves_nothing_to_judge(repo: Path) -> None:
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: 1.0 for i in TESTS}}
    host = FakeHost(medians, fail=("0", "base", 0))
    run = ab.AbRun(["-q"], runner=host, say=lambda line: None)
    with pytest.raises(ab.AbError) as caught:
        ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    assert not isinstance(caught.value, ab.AbIncomplete)  # the command's exit 2, with no report
    assert str(caught.value).startswith("base (HEAD") and "status -11" in str(caught.value)


def test_real_pytest_processes_on_two_gpus_make_one_report(repo: Path, monkeypatch, capsys) -> None:
    """Through the command, with real pytest processes (on the CPU, each given its
    CUDA_VISIBLE_DEVICES): one table, one JSON, exit 0 for identical revisions."""
    (repo / "test_k.py").unlink()
    (repo / "test_host.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('n', range(4))\n"
                                       "def test_sum(gpu_benchmark, n):\n    gpu_benchmark(sum, range(100 * n))\n")
    git(repo, "add", "-A", "test_host.py", "test_k.py")
    git(repo, "commit", "-q", "-m", "host tests")
    monkeypatch.chdir(repo)
    monkeypatch.setattr(ab_gpus, "visible_gpus", lambda: ["0", "1"])
    code = cli.main(["ab", "HEAD", "--rounds", "1", "--json", str(repo / "ab.json"), "--", "-q", "-p",
                     "no:cacheprovider", "-o", "gpuperf_budget=0.05"])
    out, err = capsys.readouterr()
    assert "gpuperf ab: 4 tests on 2 GPUs (0: 2, 1: 2), split by recorded time" in out, out + err
    assert "gpuperf ab: GPU 0: round 1, base" in out and "gpuperf ab: GPU 1: round 1, head" in out
    assert "4 pytest processes" in out
    doc = json.loads((repo / "ab.json").read_text())
    assert sorted(b["fullname"] for b in doc["benchmarks"]) == [f"test_host.py::test_sum[{n}]" for n in range(4)]
    assert code in (0, 1), out + err  # host-clock timings of a busy CPU may differ; the run itself is whole


@pytest.mark.parametrize("text, visible, chosen", [
    ("all", ["0", "1", "2"], ["0", "1", "2"]),
    ("2", ["0", "1", "2"], ["0", "1"]),
    ("0,2", ["4", "5", "6"], ["4", "6"]),  # indices among CUDA_VISIBLE_DEVICES's entries
    ("1,", ["0", "1"], ["1"]),
    ("all", [], []),
])
def test_gpus_are_all_a_count_or_indices(text: str, visible: list[str], chosen: list[str]) -> None:
    assert ab_gpus.choose_gpus(text, visible) == chosen


@pytest.mark.parametrize("text, words", [
    ("3", "--gpus 3: give 1 to 2 GPUs (2 GPUs visible: 0, 1)"),
    ("0", "--gpus 0: give 1 to 2 GPUs (2 GPUs visible: 0, 1)"),
    ("0,2", "--gpus 0,2: GPU 2 is not visible (2 GPUs visible: 0, 1)"),
    ("1,1", "--gpus 1,1: names GPU 1 twice"),
    ("two", "--gpus two: write all, a count (2) or GPU indices (0,1)"),
])
def test_gpus_that_are_not_there_are_one_line(text: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        ab_gpus.choose_gpus(text, ["0", "1"])
    assert str(caught.value) == words


def test_cli_refuses_bad_gpus_and_a_device_option_beside_them(repo: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    monkeypatch.setattr(ab_gpus, "visible_gpus", lambda: ["0", "1"])
    assert cli.main(["ab", "HEAD", "--gpus", "5"]) == 2
    assert "gpuperf ab: --gpus 5: give 1 to 2 GPUs" in capsys.readouterr().err
    assert cli.main(["ab", "HEAD", "--", "--gpuperf-device=1"]) == 2
    assert "--gpuperf-device: --gpus gives each pytest process its GPU" in capsys.readouterr().err


def test_the_listing_plugin_writes_the_selected_tests_and_their_recorded_times(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_two="def test_a(gpu_benchmark):\n    gpu_benchmark(abs, 1)\n\n"
                                 "def test_b(gpu_benchmark):\n    gpu_benchmark(abs, 2)\n")
    out = pytester.path / "list.json"
    result = pytester.runpytest_subprocess("--collect-only", "-k", "test_b", "-p", ab_gpus.LIST_PLUGIN,
                                           f"{ab_gpus.LIST_OPTION}={out}")
    assert result.ret == 0
    assert json.loads(out.read_text()) == {"tests": ["test_two.py::test_b"], "costs": {"test_two.py::test_b": None}}


def test_a_budget_holds_on_each_gpu(repo: Path) -> None:
    """--budget 1x is each GPU's own: spent by its round 1, so an unsure test is left out where it
    runs and the slowdown is still confirmed on its GPU."""
    medians = {"base": {i: 1.0 for i in TESTS}, "head": {i: 1.0 for i in TESTS}}
    medians["head"]["t::k4"] = 1.2
    host = FakeHost(medians, thresholds={"t::k5": 0.01})  # held to 1%, its bound wider after one round: unsure
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=host, say=lines.append, budget=Budget.parse("1x"))
    verdicts, _, _ = ab_gpus.compare_on_gpus(run, repo, "HEAD", ["0", "1"])
    assert verdicts["t::k4"].time == "slower" and verdicts["t::k5"].time == "unsure"
    later = [c["ids"] for gpu in ("0", "1") for c in host.on(gpu)[2:]]
    assert later == [["t::k4"]] * 4
    assert any("1 unsure test not measured again: the budget (1x a plain run" in line for line in lines)
