"""The measuring time each test's baseline entry recorded (`wall_s`) at work in a pytest session:
`--gpuperf-shard=K/N` keeps shard K of the collected tests (core/shards.py) and tells the results
JSON which split this run was, so `gpuperf merge-shards` can check that the shards fit together;
pytest-xdist's workers order their tests longest first."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ..core.records import Entry
from ..core.shards import ShardSpec, Split, longest_first

#: pytest-xdist workeroutput key: the workers cut the tests, the controller writes the results JSON.
SHARD_OUTPUT = "gpuperf_shard"


def recorded_costs(entries: Mapping[str, Entry]) -> dict[str, Any]:
    """Each baseline entry's recorded measuring time (test id -> seconds, None where unrecorded)."""
    return {name: entry.wall_s for name, entry in entries.items()}


def by_recorded_time(items: list[pytest.Item], entries: Mapping[str, Entry]) -> list[pytest.Item]:
    """`items` longest first by recorded time (core.shards.longest_first)."""
    order = {nodeid: i for i, nodeid in enumerate(longest_first([item.nodeid for item in items],
                                                                recorded_costs(entries)))}
    return sorted(items, key=lambda item: order[item.nodeid])


class Sharding:
    """The shard of one pytest process; registered as a plugin for its hooks."""

    def __init__(self, config: pytest.Config, spec: ShardSpec) -> None:
        self.config = config
        self.spec = spec
        self.split: Split | None = None  # once collected
        #: Split.to_dict() of this run, for the results JSON; an xdist controller gets a worker's
        self.record: dict[str, Any] | None = None

    def cut(self, items: list[pytest.Item], entries: Mapping[str, Entry]) -> list[pytest.Item]:
        """The items outside this shard, from the baseline `entries`' recorded times."""
        self.split = Split.of([item.nodeid for item in items], recorded_costs(entries), self.spec)
        self.record = self.split.to_dict()
        output = getattr(self.config, "workeroutput", None)
        if output is not None:
            output[SHARD_OUTPUT] = self.record
        return [item for item in items if item.nodeid not in self.split.tests]

    def pytest_report_collectionfinish(self) -> list[str]:
        return [f"gpuperf: {self.split.describe()}"] if self.split is not None else []

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist's controller: the split its workers made (each made the same one)."""
        record = getattr(node, "workeroutput", {}).get(SHARD_OUTPUT)
        if record is not None:
            self.record = record

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A shard left empty (more shards than tests) passes, as it ran all of its part; a suite
        that -k/-m left empty still exits 5 (no tests)."""
        record = self.record or {}
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and record.get("tests") == 0 and record.get("of"):
            session.exitstatus = pytest.ExitCode.OK
