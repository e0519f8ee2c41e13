"""Installing the plugin never breaks plain pytest: its entry point loads in every pytest process, so
each informational command must work in a directory with no pytest configuration at all."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

PLAIN_TEST = """
def test_plain():
    assert 1 + 1 == 2
"""


@pytest.fixture
def plain(pytester: pytest.Pytester) -> pytest.Pytester:
    """A directory without pytest.ini, tox.ini, setup.cfg or pyproject.toml, holding one plain test."""
    pytester.makepyfile(test_plain=PLAIN_TEST)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest in a fresh process, so the plugin loads through its installed entry point."""
    result = pytester.runpytest_subprocess(*args)
    output = result.outlines + result.errlines
    assert not [line for line in output if "Traceback (most recent call last)" in line or "Error:" in line], "\n".join(output)
    assert result.ret == pytest.ExitCode.OK, "\n".join(output)
    return result


def test_help_prints_the_gpuperf_options(plain: pytest.Pytester) -> None:
    result = _run(plain, "--help")
    result.stdout.fnmatch_lines(["*GPU performance measurement and regression gate (pytest-gpuperf)*",
                                 "*--gpuperf *measure every gpu_benchmark call*"])


def test_version_works(plain: pytest.Pytester) -> None:
    result = _run(plain, "--version")
    assert any("pytest" in line for line in result.outlines + result.errlines)


def test_collect_only_works(plain: pytest.Pytester) -> None:
    _run(plain, "--collect-only").stdout.fnmatch_lines(["*<Function test_plain>*"])


def test_co_q_lists_node_ids(plain: pytest.Pytester) -> None:
    _run(plain, "--co", "-q").stdout.fnmatch_lines(["test_plain.py::test_plain"])


def test_fixtures_lists_gpu_benchmark(plain: pytest.Pytester) -> None:
    _run(plain, "--fixtures").stdout.fnmatch_lines(["gpu_benchmark*", "*Measure a GPU call*"])
