"""--gpuperf-compile-cache DIR: the compile caches' variables point at DIR's subfolders before any
conftest is imported, variables already set are kept, a folder that cannot be written stops the session
before any test, and every process the run starts sees the same folders. Also: each test's first-call
seconds in the results JSON and the slowest of them in the closing summary."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_gpuperf import ab
from pytest_gpuperf.measure import counters
from pytest_gpuperf.plugin import compile_cache, outputs

pytest_plugins = ["pytester"]

VARIABLES = tuple(name for name, _ in compile_cache.folders())
FAST = ("--gpuperf-budget", "0.05", "-p", "no:randomly", "-p", "no:cacheprovider")

# What the compile caches' variables hold when the conftest is imported and when the test runs, one
# JSON file per process (pytest-xdist's workers write their own).
SEES = """
import json, os
from pathlib import Path

NAMES = {names!r}

def write(what):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(__file__).parent / f"{{what}}-{{worker}}.json").write_text(json.dumps({{n: os.environ.get(n) for n in NAMES}}))

write("import")
"""
TEST = """
from conftest import write

def test_body(gpu_benchmark):
    write("body")
    gpu_benchmark(abs, -1)
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the variables set, and each restored after the test: an in-process run sets them in
    this process's environment."""
    for name in VARIABLES:
        monkeypatch.setenv(name, "")  # recorded, so that the delenv below is undone too
        monkeypatch.delenv(name)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own, when run under xdist


@pytest.fixture
def suite(pytester: pytest.Pytester, clean_env: None) -> pytest.Pytester:
    pytester.makeconftest(SEES.format(names=VARIABLES))
    pytester.makepyfile(test_seen=TEST)
    return pytester


def seen(pytester: pytest.Pytester, what: str, worker: str = "main") -> dict[str, str | None]:
    return json.loads((pytester.path / f"{what}-{worker}.json").read_text())


def expected(folder: Path) -> dict[str, str]:
    return {name: str(folder / sub) for name, sub in compile_cache.folders()}


def test_the_option_points_every_cache_at_a_subfolder_before_the_conftest_is_imported(suite) -> None:
    result = suite.runpytest("--gpuperf-compile-cache=cc", *FAST)
    result.assert_outcomes(passed=1)
    folder = suite.path / "cc"
    assert seen(suite, "import") == seen(suite, "body") == expected(folder)
    assert all(Path(path).is_dir() for path in expected(folder).values())
    assert (folder / ".gitignore").read_text().endswith("\n*\n")  # a folder made here is not to commit
    assert "torch_extensions/py" in os.environ["TORCH_EXTENSIONS_DIR"]  # per Python (and torch) version
    result.stdout.fnmatch_lines([f"gpuperf: compile caches in {folder} (--gpuperf-compile-cache): "
                                 f"{', '.join(VARIABLES)}"])


def test_without_the_option_nothing_is_set(suite) -> None:
    result = suite.runpytest("--gpuperf", *FAST)
    result.assert_outcomes(passed=1)
    assert set(seen(suite, "body").values()) == {None}
    assert "compile caches" not in result.stdout.str()


def test_a_variable_already_set_is_kept_and_the_header_says_so(suite, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", "/mine/triton")
    result = suite.runpytest("--gpuperf-compile-cache", "cc", *FAST)
    result.assert_outcomes(passed=1)
    want = dict(expected(suite.path / "cc"), TRITON_CACHE_DIR="/mine/triton")
    assert seen(suite, "body") == want
    assert not (suite.path / "cc" / "triton").exists()
    result.stdout.fnmatch_lines(["gpuperf: compile caches in *; as already set: TRITON_CACHE_DIR=/mine/triton"])


def test_the_ini_key_is_relative_to_the_rootdir_and_the_option_wins(suite, monkeypatch) -> None:
    """From a subfolder: the ini key's folder is the rootdir's, the option's the current directory's."""
    suite.makeini("[pytest]\ngpuperf_compile_cache = from-ini\n")
    (suite.path / "sub").mkdir()
    (suite.path / "test_seen.py").rename(suite.path / "sub" / "test_seen.py")
    monkeypatch.chdir(suite.path / "sub")
    result = suite.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert seen(suite, "body") == expected(suite.path / "from-ini")
    result.stdout.fnmatch_lines(["*compile caches in * (ini key gpuperf_compile_cache)*"])
    for name in VARIABLES:
        os.environ.pop(name)  # the next run sets them anew (the fixture restores them afterwards)
    suite.runpytest("--gpuperf-compile-cache=opt", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert seen(suite, "body") == expected(suite.path / "sub" / "opt")


def _refused(result: pytest.RunResult, pytester: pytest.Pytester, *needles: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not list(pytester.path.glob("body-*.json"))
    line = next(line for line in result.errlines if "gpuperf:" in line)
    assert all(n in line for n in needles), line


@pytest.mark.parametrize("value, problem", [("afile", "is not a directory"),
                                            ("afile/cc", "cannot be created: * is not a directory")])
@pytest.mark.parametrize("gpuperf", [(), ("--gpuperf",)], ids=["plain", "gpuperf"])
def test_a_folder_that_cannot_be_made_is_a_usage_error_before_any_test(suite, value, problem, gpuperf) -> None:
    (suite.path / "afile").write_text("")
    result = suite.runpytest(f"--gpuperf-compile-cache={value}", *gpuperf, *FAST)
    _refused(result, suite, "--gpuperf-compile-cache", value, *problem.split("*"))
    assert not (suite.path / "import-main.json").exists()  # refused before the conftest was imported


def test_a_read_only_folder_named_by_the_ini_key_is_a_usage_error(suite, monkeypatch) -> None:
    folder = suite.path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root's probe succeeds in a read-only folder: its write bits stand in
        monkeypatch.setattr(outputs, "can_write", lambda d: bool(Path(d).stat().st_mode & 0o200))
    suite.makeini("[pytest]\ngpuperf_compile_cache = locked\n")
    try:
        result = suite.runpytest(*FAST)
    finally:
        folder.chmod(0o755)
    _refused(result, suite, "ini key gpuperf_compile_cache", "locked is not writable")


def test_help_and_version_work_with_a_bad_folder(suite) -> None:
    (suite.path / "afile").write_text("")
    assert suite.runpytest("--gpuperf-compile-cache=afile", "--help").ret == pytest.ExitCode.OK
    assert suite.runpytest("--gpuperf-compile-cache=afile", "--version").ret == pytest.ExitCode.OK


def test_xdist_workers_see_the_controllers_folders(suite) -> None:
    pytest.importorskip("xdist")
    suite.makepyfile(test_two=TEST.replace("test_body", "test_other"))
    result = suite.runpytest_subprocess("-n", "2", "--gpuperf-compile-cache=cc", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    want = expected(suite.path / "cc")
    assert seen(suite, "import") == want
    for worker in ("gw0", "gw1"):
        assert seen(suite, "import", worker) == want  # before the worker's own conftest import, too


def test_the_counting_pass_gets_the_option() -> None:
    """It inherits the environment, and its pytest arguments keep the option, as its own check."""
    args = counters.counting_args(["t.py", "--gpuperf-compile-cache=cc", "--gpuperf-json=o.json"], Path("w"),
                                  Path("c"), xdist=False)
    assert "--gpuperf-compile-cache=cc" in args and "--gpuperf-json=o.json" not in args


def test_gpuperf_ab_gives_both_sides_the_same_absolute_folder(tmp_path) -> None:
    """The base side runs in its own checkout: a relative folder there would be a temporary one."""
    repo = tmp_path
    args = ab.pytest_args_for(["-q", "--gpuperf-compile-cache=cc", "--gpuperf-compile-cache", str(repo / "d"),
                               "--gpuperf-compile-cache", "e"], repo, repo / "sub")
    assert args == ["-q", f"--gpuperf-compile-cache={repo / 'sub' / 'cc'}", "--gpuperf-compile-cache",
                    str(repo / "d"), "--gpuperf-compile-cache", str(repo / "sub" / "e")]


SLOW_FIRST = """
import time

def compiled():
    state = {"first": True}

    def call():
        if state["first"]:  # a compile on the first call only
            state["first"] = False
            time.sleep(0.6)
        return 1
    return call

def test_slow_first(gpu_benchmark):
    gpu_benchmark(compiled())

def test_fast_first(gpu_benchmark):
    gpu_benchmark(abs, -1)
"""


def test_each_tests_first_call_is_in_the_json_and_the_slowest_in_the_summary(pytester) -> None:
    pytester.makepyfile(test_first=SLOW_FIRST)
    result = pytester.runpytest("--gpuperf", "--gpuperf-json=r.json", *FAST)
    result.assert_outcomes(passed=2)
    benchmarks = {b["name"]: b["extra_info"] for b in json.loads((pytester.path / "r.json").read_text())["benchmarks"]}
    assert benchmarks["test_slow_first"]["first_call_s"] >= 0.6
    assert benchmarks["test_fast_first"]["first_call_s"] < 0.5
    for info in benchmarks.values():  # the whole test's time, its measurement included (ab --budget plans with it)
        assert info["test_s"] >= info["wall_s"] > 0
    result.stdout.fnmatch_lines([
        "gpuperf: 1 first call took 0.5 s or more (compiling, autotuning), 0.* s in all; the slowest (each "
        "test's is first_call_s in the JSON):",
        "     0.* s  test_first.py::test_slow_first"])
    assert "fast_first" not in result.stdout.str().split("first call took")[1]
    plain = pytester.runpytest(*FAST)  # nothing measured: no such lines
    plain.assert_outcomes(passed=2)
    assert "first call" not in plain.stdout.str()


def test_the_summary_names_five_first_calls_at_most() -> None:
    from pytest_gpuperf.report.rows import first_calls_lines
    from typed import result

    results = [result({"nodeid": f"t::case{i}", "first_call_s": float(i)}) for i in range(8)]
    lines = first_calls_lines(results)
    assert lines[0].startswith("gpuperf: 7 first calls took 0.5 s or more (compiling, autotuning), 28.0 s in all")
    assert [line.split()[-1] for line in lines[1:]] == ["t::case7", "t::case6", "t::case5", "t::case4", "t::case3"]
    assert first_calls_lines([result({"nodeid": "t::a", "first_call_s": 0.1}), result({"nodeid": "t::b"})]) == []


class _Options:
    """Stands in for pytest's parser: records the options add_options registers, with their help."""

    def __init__(self) -> None:
        self.options: dict[str, str] = {}

    def getgroup(self, *args: str) -> "_Options":
        return self

    def addoption(self, name: str, **kwargs: str) -> None:
        self.options[name] = kwargs.get("help", "")

    def addini(self, *args: str, **kwargs: str) -> None:
        pass


def test_every_option_for_users_has_a_row_in_the_readmes_table() -> None:
    """Options for users, not those gpuperf gives its own processes (their help starts '(set by',
    '(written by')."""
    from pytest_gpuperf.plugin.options import add_options

    parser = _Options()
    add_options(parser)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`").split(" ")[0] for line in readme.splitlines()
            if line.startswith("| `--gpuperf")}
    public = {name for name, text in parser.options.items() if not text.startswith("(")}
    assert "--gpuperf-compile-cache" in public and public - rows == set()
