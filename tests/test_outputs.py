"""Output paths are checked when pytest configures: one that cannot be written stops the session with
a usage error naming its option (or ini key) and the path, before any test runs."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.plugin import outputs

pytest_plugins = ["pytester"]

# The test body leaves a marker file: its absence shows that no test ran.
MARKED = """
from pathlib import Path

def test_body(gpu_benchmark):
    Path("body-ran").touch()
    gpu_benchmark(abs, -1)
"""
FAST = ("--gpuperf-budget", "0.05", "-p", "no:randomly")


@pytest.fixture
def marked(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A suite whose test leaves a marker; as root, whose probe succeeds in a read-only folder, the
    folder's write bits stand in for another user's probe."""
    pytester.makepyfile(test_marked=MARKED)
    if os.geteuid() == 0:
        monkeypatch.setattr(outputs, "can_write", lambda d: bool(Path(d).stat().st_mode & 0o200))
    return pytester


def _refused(result: pytest.RunResult, pytester: pytest.Pytester, *needles: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (pytester.path / "body-ran").exists()
    line = next(line for line in result.errlines if "gpuperf:" in line)
    assert all(n in line for n in needles), line


@pytest.mark.parametrize("option", ["--gpuperf-baseline-dir", None])
def test_a_read_only_baseline_folder_with_save_is_refused_before_any_test(marked, option) -> None:
    folder = marked.path / "baselines"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        args = [option, str(folder)] if option else []
        result = marked.runpytest("--gpuperf", "--gpuperf-save", *args, *FAST)
    finally:
        folder.chmod(0o755)
    _refused(result, marked, option or "ini key gpuperf_baseline_dir", str(folder), "not writable")


def test_a_read_only_baseline_folder_without_save_is_fine(marked) -> None:
    folder = marked.path / "baselines"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        marked.runpytest("--gpuperf", *FAST).assert_outcomes(passed=1)
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("option, path", [
    ("--gpuperf-json", "locked/deeper/r.json"),  # its nearest existing folder is read-only
    ("--gpuperf-json", "afile/r.json"),  # under a file: no folder can be made
    ("--gpuperf-markdown", "locked/r.md"),
    ("--gpuperf-plot", "afile"),  # a folder option given a file
    ("--gpuperf-trace-dir", "locked/traces"),
])
def test_an_unwritable_output_is_refused_before_any_test(marked, option, path) -> None:
    (marked.path / "afile").write_text("")
    locked = marked.path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = marked.runpytest("--gpuperf", option, path, *FAST)
    finally:
        locked.chmod(0o755)
    _refused(result, marked, option, path)


def test_writable_outputs_in_new_folders_pass_the_check(marked) -> None:
    result = marked.runpytest("--gpuperf", "--gpuperf-json", "out/a/r.json", "--gpuperf-markdown", "out/r.md",
                              "--gpuperf-trace-dir", "out/traces", *FAST)
    result.assert_outcomes(passed=1)
    assert (marked.path / "out" / "a" / "r.json").exists()


# As any user, root included: a path under a regular file can never be created.
@pytest.mark.parametrize("option, path", [
    ("--gpuperf-baseline-dir", "afile/baselines"),
    ("--gpuperf-json", "afile/r.json"),
    ("--gpuperf-markdown", "afile/r.md"),
    ("--gpuperf-plot", "afile/plots"),
    ("--gpuperf-trace-dir", "afile/traces"),
])
def test_an_uncreatable_output_is_refused_before_any_test_as_any_user(pytester, option, path) -> None:
    pytester.makepyfile(test_marked=MARKED)
    (pytester.path / "afile").write_text("")
    result = pytester.runpytest("--gpuperf", "--gpuperf-save", f"{option}={path}", *FAST)
    _refused(result, pytester, option, path, "afile is not a directory")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("option", ["--gpuperf-baseline-dir", "--gpuperf-json"])
def test_a_pseudo_file_system_is_refused_before_any_test_as_any_user(pytester, option) -> None:
    """/proc takes no new files, whatever its permission bits tell root."""
    pytester.makepyfile(test_marked=MARKED)
    path = "/proc/gpuperf-nowhere" + ("" if option == "--gpuperf-baseline-dir" else ".json")
    result = pytester.runpytest("--gpuperf", "--gpuperf-save", f"{option}={path}", *FAST)
    _refused(result, pytester, option, path, "/proc is not writable")


def test_the_probe_leaves_nothing_behind(tmp_path) -> None:
    (tmp_path / "kept").write_text("")
    assert outputs.can_write(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert not outputs.can_write(tmp_path / "kept")


def test_plots_without_matplotlib_are_refused_before_any_test(pytester, monkeypatch) -> None:
    pytester.makepyfile(test_marked=MARKED)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an import then finds: nothing
    result = pytester.runpytest("--gpuperf", "--gpuperf-plot=plots", *FAST)
    _refused(result, pytester, "--gpuperf-plot", "matplotlib is not installed", "pip install 'pytest-gpuperf[plot]'")


def test_an_output_that_fails_at_the_end_hides_none_written_and_names_the_users_path(pytester) -> None:
    """The test body puts a file where the JSON's folder was to be made: that output fails after the
    tests, and the baseline and Markdown written beside it are still named."""
    pytester.makepyfile(test_blocks="""
        from pathlib import Path

        def test_body(gpu_benchmark):
            Path("out").write_text("")
            gpu_benchmark(abs, -1)
        """)
    result = pytester.runpytest("--gpuperf", "--gpuperf-save", "--gpuperf-json=out/r.json",
                                "--gpuperf-markdown=r.md", *FAST)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["gpuperf: saved 1 entry to *", "gpuperf: wrote r.md",
                                 "gpuperf: could not write results: --gpuperf-json: cannot write out/r.json (*)"])
    assert (pytester.path / "r.md").exists() and list((pytester.path / "baselines").glob("*.yaml"))


def test_a_write_failure_names_the_users_path_not_the_temp_file() -> None:
    error = OSError(2, "No such file or directory", "/proc/.r.json.x1y2.tmp")
    assert outputs.write_failure("--gpuperf-json", Path("/proc/r.json"), error) == \
        "--gpuperf-json: cannot write /proc/r.json (No such file or directory)"
    missing = outputs.write_failure("--gpuperf-plot", Path("plots"), ImportError("No module named 'matplotlib'"))
    assert missing.endswith("(No module named 'matplotlib'); pip install 'pytest-gpuperf[plot]'")
