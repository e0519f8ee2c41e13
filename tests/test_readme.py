"""README.md's first test, copied into an empty folder as a user would: it passes as written on this
machine (a CPU here, a GPU on a GPU runner), with plain pytest and under --gpuperf, so the page cannot
drift from the plugin."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[1] / "README.md"


def first_test() -> str:
    """The first Python block under the README's "First test" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## First test\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "README.md: no ```python block under '## First test'"
    return block.group(1)


@pytest.mark.parametrize("args", [(), ("--gpuperf",)], ids=["plain", "gpuperf"])
def test_the_readme_first_test_passes_as_written(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(test_first=first_test())
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    if args:
        result.stdout.fnmatch_lines(["*gpuperf results*", "*2 measured: 2 new*"])
