"""Output paths are checked when pytest configures: one that cannot be written stops the session with
a usage error naming its option (or ini key) and the path, before any test runs."""
from __future__ import annotations

import os
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
    """A suite whose test leaves a marker; as root (who may write anywhere) a directory's write bits
    decide, as they do for every other user."""
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
