"""The listing process of `gpuperf ab` on several GPUs (`-p pytest_gpuperf.plugin.listing
--collect-only --gpuperf-ab-list=FILE`): writes the tests the pytest arguments select, and the
measuring time this GPU's baseline recorded for each (`wall_s`), for ab_gpus.py to split them
between the GPUs as --gpuperf-shard splits a suite."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..core.files import atomic_write_text
from .session import STATE
from .shard import recorded_costs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("gpuperf").addoption(
        "--gpuperf-ab-list", metavar="FILE",
        help="(given by `gpuperf ab` on several GPUs) write the selected tests and their recorded times")


@pytest.hookimpl(trylast=True)  # after -k/-m and the plugin's own selections
def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("gpuperf_ab_list")
    if path is None:
        return
    perf = session.config.stash.get(STATE, None)
    entries = perf.baseline.entries if perf is not None and perf.baseline is not None else {}
    tests = [item.nodeid for item in session.items]
    costs = recorded_costs(entries)
    atomic_write_text(Path(path), json.dumps({"tests": tests, "costs": {t: costs.get(t) for t in tests}}, indent=1))
