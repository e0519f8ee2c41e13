"""How gpuperf starts a pytest process of its own (`gpuperf ab`'s rounds, the counting pass)."""
from __future__ import annotations

import sys
from collections.abc import Sequence

#: Runs pytest with the installed plugin imported first, before the checkout's directories reach
#: sys.path (the current directory, pytest's `pythonpath` ini key): a checkout that holds its own copy
#: of pytest_gpuperf (this repository's base revision) then still runs under the same plugin.
PYTEST_MAIN = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; " \
              "import pytest_gpuperf.plugin, pytest; sys.exit(pytest.main())"


def without_options(args: Sequence[str], flags: Sequence[str] = (), values: Sequence[str] = ()) -> list[str]:
    """`args` less the options named: `flags` alone, `values` with their value (the next argument,
    unless given as `--opt=value`)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        option = arg.split("=", 1)[0]
        if option in values:
            skip = "=" not in arg
        elif option not in flags:
            out.append(arg)
    return out


def pytest_command(args: Sequence[str]) -> list[str]:
    """The command line of a pytest process with these arguments, under this interpreter and plugin."""
    return [sys.executable, "-c", PYTEST_MAIN, *args]
