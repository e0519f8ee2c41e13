"""`gpuperf ab --budget`: how long an A/B may run, and which unsure tests its later rounds then still
measure (docs/gate.md, "Same-GPU A/B runs"). Round 1 always runs whole, and a `slower` or `faster`
test is always measured until confirmed: the budget only drops the unsure tests a later round would
have measured again, so it never makes a change appear or stand unconfirmed."""
from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .core.records import Result
from .core.units import plural

#: Seconds a later round's pytest process is taken to cost before its tests, until one has run: on
#: an H200 with warm compile caches, later processes of the bundled suite took 11-16 s for 4-14
#: tests (start-up and collection, the first torch.compile, power-capped warm-ups). A run whose
#: plain process is shorter is taken to cost that instead.
LATER_PROCESS_S = 12.0

_FORM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(x|s|m)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Budget:
    """An A/B's time limit: `times` a plain run of the tests (round 1's processes, their mean), or
    `seconds` of wall time in all."""

    times: float | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """'2.5x', '600s' or '10m'; ValueError with one line naming the option otherwise."""
        match = _FORM.match(str(text))
        value = float(match.group(1)) if match else 0.0
        if not match or value <= 0:
            raise ValueError(f"--budget {text}: give a multiple of a plain run (2.5x) or a time (600s, 10m)")
        unit = match.group(2).lower()
        return cls(times=value) if unit == "x" else cls(seconds=value * (60.0 if unit == "m" else 1.0))

    def limit_s(self, plain_s: float) -> float:
        """The limit in seconds, given what one plain run of the tests took."""
        return self.times * plain_s if self.times is not None else float(self.seconds or 0.0)

    def __str__(self) -> str:
        return f"{self.times:g}x a plain run" if self.times is not None else f"{self.seconds:g} s"


def process_cost_s(process_s: float, records: Mapping[str, Result]) -> float:
    """What a pytest process cost beyond its measurements: start-up, collection, first calls outside
    them, the tests' own work and exit (never below zero)."""
    return max(process_s - sum(r.wall_s or 0.0 for r in records.values()), 0.0)


def within(select: Sequence[str], required: set[str], left_s: float, fixed_s: float,
           cost_s: Mapping[str, float]) -> tuple[list[str], list[str]]:
    """(the tests the next round measures, the unsure ones it leaves out). A round is two processes,
    each `fixed_s` plus its tests' `cost_s`. `required` (changes to confirm) always run; the other
    tests join cheapest first while the round still fits in `left_s`. Without a required test and
    with no room for one more, the round does not run: both lists say so (nothing kept)."""
    kept = [k for k in select if k in required]
    spent = 2.0 * (fixed_s + sum(cost_s.get(k, 0.0) for k in kept))
    dropped = []
    for k in sorted((k for k in select if k not in required), key=lambda k: (cost_s.get(k, 0.0), k)):
        more = 2.0 * cost_s.get(k, 0.0)
        if spent + more <= left_s:
            kept.append(k)
            spent += more
        else:
            dropped.append(k)
    order = {k: n for n, k in enumerate(select)}
    return sorted(kept, key=order.__getitem__), sorted(dropped, key=order.__getitem__)


@dataclass(frozen=True)
class Spent:
    """What an A/B's processes on one GPU took so far: round 1's two (each a plain run of the tests),
    what each later one cost beyond its measurements (`process_cost_s`), and all of them together."""

    first_s: tuple[float, float]
    later_s: tuple[float, ...]
    total_s: float


def next_round(budget: Budget, spent: Spent, select: Sequence[str], required: set[str],
               cost_s: Mapping[str, float]) -> tuple[list[str], str | None]:
    """The tests the next round measures within `budget` (`within`: each process taken to cost what
    the costliest later one so far cost beyond its measurements, before one LATER_PROCESS_S or a
    plain run where that is shorter), and a line saying what the budget left out (None: nothing)."""
    plain_s = statistics.mean(spent.first_s)
    limit_s = budget.limit_s(plain_s)
    left_s = limit_s - spent.total_s
    fixed_s = max(spent.later_s) if spent.later_s else min(LATER_PROCESS_S, plain_s)
    kept, dropped = within(select, required, left_s, fixed_s, cost_s)
    if not dropped:
        return kept, None
    return kept, (f"gpuperf ab: {plural(len(dropped), 'unsure test')} not measured again: the budget ({budget}, "
                  f"{limit_s:.0f} s) has {max(left_s, 0.0):.0f} s left")
