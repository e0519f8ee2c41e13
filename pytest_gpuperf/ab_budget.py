"""`gpuperf ab --budget`: how long an A/B's pytest processes may take in all, and which unsure tests
its later rounds then still measure (docs/gate.md, "Same-GPU A/B runs"). Round 1 always runs whole,
and a test whose time or peak memory reads `slower` or `faster` is always measured until confirmed,
so the budget never lets a change stand on fewer rounds; an unsure test it leaves out stays `unsure`, a weaker gate."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .core.records import Result
from .core.units import plural
from .core.verdict import Verdict

#: Seconds a later round's pytest process is taken to cost beyond its tests until one has run, at most:
#: what the bundled suite's later processes cost on an H200 (docs/gate.md). Less where a plain run, or
#: what round 1's processes cost beyond their tests, is less (`Spent.first_beyond_s`).
LATER_PROCESS_S = 12.0
#: A round is one process a side.
PROCESSES_PER_ROUND = 2
_UNIT_S = {"s": 1.0, "m": 60.0}
#: `gpuperf ab`'s budget unless --budget says otherwise: round 1 spends at least 2x a plain run, so this
#: leaves at most half a plain run for the later rounds (issue 49: a whole-suite A/B within 2.5x a plain run).
DEFAULT_BUDGET = "2.5x"
#: --budget's word for no limit: every round measures every test still undecided.
NO_BUDGET = "none"
_FORM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(x|s|m)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Budget:
    """An A/B's time limit: `amount` times a plain run of its tests (`relative`; `Spent.plain_s`) or
    `amount` seconds, over all its pytest processes on one GPU."""

    amount: float
    relative: bool

    @classmethod
    def parse(cls, text: str) -> Budget | None:
        """'2.5x', '600s' or '10m'; None for NO_BUDGET; ValueError with one line naming the option otherwise."""
        if str(text).strip().lower() == NO_BUDGET:
            return None
        match = _FORM.match(str(text))
        value = float(match.group(1)) if match else 0.0
        if not match or value <= 0:
            raise ValueError(f"--budget {text}: give a multiple of a plain run (2.5x), a time (600s, 10m) "
                             f"or {NO_BUDGET}")
        unit = match.group(2).lower()
        return cls(value, True) if unit == "x" else cls(value * _UNIT_S[unit], False)

    def limit_s(self, plain_s: float) -> float:
        """The limit in seconds, given what one plain run of the tests took."""
        return self.amount * plain_s if self.relative else self.amount

    def __str__(self) -> str:
        return f"{self.amount:g}x a plain run" if self.relative else f"{self.amount:g} s"


@dataclass(frozen=True)
class Spent:
    """What an A/B's processes on one GPU took so far: round 1's two (each a run of every test of its
    side; `plain_s`), what each later one cost beyond its tests (`process_cost_s`), and all of them together;
    `first_beyond_s`: what round 1's cost beyond their tests, where their results say what each test
    cost in all and the tests ran one at a time (None otherwise: the tests' own work, or the time
    pytest-xdist's workers ran side by side, would count as the process's); `later_first_calls`: each
    test's longest first call in a later process (one of them holds the process's first
    `torch.compile` or flex call, which lands on whichever test runs first)."""

    first_s: tuple[float, float]
    later_s: tuple[float, ...]
    total_s: float
    first_beyond_s: tuple[float, float] | None = None
    later_first_calls: Mapping[str, float] = field(default_factory=dict)
    #: Whether round 1's two processes measured the same tests.
    same_tests: bool = True

    @property
    def plain_s(self) -> float:
        """What a plain run of the tests takes: round 1's faster process (the other may have paid what a
        fresh host pays once: the node gap's first measurement, every library read from disk), or the
        head's where the sides measured different tests (the head's are the ones a plain run runs)."""
        return min(self.first_s) if self.same_tests else self.first_s[1]

    def moved_first_call_s(self, select: Sequence[str]) -> float:
        """What a later process pays in first calls beyond its tests' own costs: the longest first call
        a test outside `select` paid in a later process (a selected test's cost already holds its
        own; tests keep their order, so it pays again), at most LATER_PROCESS_S."""
        chosen = set(select)
        moved = (s for k, s in self.later_first_calls.items() if k not in chosen)
        return min(max(moved, default=0.0), LATER_PROCESS_S)

    @classmethod
    def of(cls, sides: Sequence[tuple[Sequence[float], Sequence[Mapping[str, Result]]]]) -> Spent:
        """From each side's process seconds and rounds (one each, in order; round 1 first)."""
        (base_s, base_rounds), (head_s, head_rounds) = sides
        later = tuple(process_cost_s(s, measured) for seconds, rounds in sides
                      for s, measured in zip(seconds[1:], rounds[1:]))
        firsts = ((base_s[0], base_rounds[0]), (head_s[0], head_rounds[0]))
        left = tuple(s - sum(cost_of(r) for r in measured.values()) for s, measured in firsts)
        told = all(r.test_s is not None for _, measured in firsts for r in measured.values()) and min(left) >= 0
        first_calls: dict[str, float] = {}
        for _, rounds in sides:
            for measured in rounds[1:]:
                for k, r in measured.items():
                    first_calls[k] = max(first_calls.get(k, 0.0), r.first_call_s or 0.0)
        return cls((base_s[0], head_s[0]), later, sum(sum(seconds) for seconds, _ in sides), left if told else None,
                   first_calls, base_rounds[0].keys() == head_rounds[0].keys())


def cost_of(result: Result) -> float:
    """What a test cost its process: its setup, call and teardown where the results say (`test_s`),
    else its measuring time."""
    return result.test_s if result.test_s is not None else (result.wall_s or 0.0)


def process_cost_s(process_s: float, records: Mapping[str, Result]) -> float:
    """What a pytest process cost beyond its tests: start-up, collection, exit, and where the results
    do not say what each test cost in all, the tests' own work too (never below zero)."""
    return max(process_s - sum(cost_of(r) for r in records.values()), 0.0)


def latest_cost_s(test: str, rounds_by_side: Sequence[Sequence[Mapping[str, Result]]]) -> float:
    """A test's cost (`cost_of`) in the latest round of each side that measured it, the longer of
    the two."""
    latest = [next((cost_of(r[test]) for r in reversed(rounds) if test in r), 0.0) for rounds in rounds_by_side]
    return max(latest, default=0.0)


def within(select: Sequence[str], required: set[str], left_s: float, fixed_s: float,
           cost_s: Mapping[str, float]) -> tuple[list[str], list[str]]:
    """(the tests the next round measures, the unsure ones it leaves out). A round's processes each
    cost `fixed_s` plus their tests' `cost_s`. `required` (changes to confirm) always run; the other
    tests join cheapest first while the round still fits in `left_s`. Without a required test and
    with no room for one more, the round does not run: nothing is kept."""
    kept = [k for k in select if k in required]
    spent = PROCESSES_PER_ROUND * (fixed_s + sum(cost_s.get(k, 0.0) for k in kept))
    dropped = []
    for k in sorted((k for k in select if k not in required), key=lambda k: (cost_s.get(k, 0.0), k)):
        more = PROCESSES_PER_ROUND * cost_s.get(k, 0.0)
        if spent + more <= left_s:
            kept.append(k)
            spent += more
        else:
            dropped.append(k)
    order = {k: n for n, k in enumerate(select)}
    return sorted(kept, key=order.__getitem__), sorted(dropped, key=order.__getitem__)


def next_round(budget: Budget, spent: Spent, select: Sequence[str], required: set[str],
               cost_s: Mapping[str, float], after: int = 0) -> tuple[list[str], list[str], str | None]:
    """(the tests the next round measures within `budget`, those it leaves out, a line saying so or
    None). `after`: the rounds that may still follow it; each keeps back what its processes cost
    beyond their tests, for the rounds that confirm a change this one finds (always run). Each
    process is taken to cost what the costliest later one so far cost beyond its tests,
    plus the first call that may move to one of its tests (`Spent.moved_first_call_s`: the process's
    first `torch.compile` lands on whichever test runs first; docs/gate.md). Before a later process has
    run: LATER_PROCESS_S, or less where a plain run or the cheaper of round 1's processes beyond its
    tests is less (round 1 may also have paid a cold compile cache, the node gap's measurement or a
    counting pass, which a later process does not). A plain run: `Spent.plain_s`. `within` picks."""
    plain_s = spent.plain_s
    limit_s = budget.limit_s(plain_s)
    left_s = limit_s - spent.total_s
    if spent.later_s:
        fixed_s = max(spent.later_s) + spent.moved_first_call_s(select)
    else:
        fixed_s = min(LATER_PROCESS_S, plain_s, *(spent.first_beyond_s or ()))
    kept_back_s = after * PROCESSES_PER_ROUND * fixed_s
    kept, dropped = within(select, required, left_s - kept_back_s, fixed_s, cost_s)
    if not dropped:
        return kept, dropped, None
    kept_s = min(kept_back_s, max(left_s, 0.0))
    held = f", {kept_s:.0f} s of them kept for confirming a change" if kept_s else ""
    return kept, dropped, (f"gpuperf ab: {plural(len(dropped), 'unsure test')} not measured again: the budget "
                           f"({budget}, {limit_s:.0f} s) has {max(left_s, 0.0):.0f} s left{held}; --budget "
                           f"{NO_BUDGET} measures them")


#: What the verdict of an unsure test the budget left out ends with.
LEFT_OUT = "; not measured again: the --budget was spent"


def left_out_said(verdicts: Mapping[str, Verdict], left_out: set[str]) -> dict[str, Verdict]:
    """The verdicts, each unsure one the budget left out saying so (in the results JSON)."""
    return {k: replace(v, message=v.message + LEFT_OUT) if k in left_out and v.time == "unsure" else v
            for k, v in verdicts.items()}


def left_out_note(verdicts: Mapping[str, Verdict]) -> str | None:
    """The report's line on the tests the budget left out (None: none), for its Markdown too."""
    count = sum(v.message.endswith(LEFT_OUT) for v in verdicts.values())
    return f"{plural(count, 'unsure test')} not measured again: the --budget was spent" if count else None
