"""What a measurement is asked for (TimingConfig) and what it returns (Measurement), and the stop rule."""
from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..core.records import CacheMode, Phase
from .stats import ci_relative, summarize


@dataclass(frozen=True)
class TimingConfig:
    """How hard to try: cache mode, target precision of the median, and the time budget."""

    cache: str = CacheMode.COLD.value  # a CacheMode value: flush the L2 before each sample, or not
    precision: float = 0.005  # stop once the median's 95% CI half-width is within this fraction
    budget_s: float = 1.0  # stop sampling after this much wall time (warm-up not included)
    # Keep calling after the first call for this long: it only has to raise the clock before
    # calibration (a call the power cap holds gets a longer warm-up and an uncounted settling batch).
    warmup_s: float = 0.05
    min_samples: int = 10
    # Batch medians needed before their spread is trusted: fewer would do for the median, but the
    # wider CI they stop at widens the gate's noise bound and hides slowdowns.
    min_batches: int = 5
    max_samples: int = 100_000
    batch_s: float = 0.05  # device time queued between checks of the stop rule


@dataclass(frozen=True)
class CaptureFailure:
    """Why a CUDA graph capture failed: the root cause's type and first line, not the exception,
    whose frames would keep the failed graph alive."""

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


class PhaseClock:
    """Wall seconds of one measurement by Phase. Phases nest: time inside an inner phase is its own,
    not its outer phase's, so the phases add up to the measurement's wall time."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: list[Phase] = []
        self._since = time.perf_counter()

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._open:
            self.add(self._open[-1], now - self._since)
        self._since = now

    def add(self, phase: Phase, seconds: float) -> None:
        self.seconds[phase.value] = self.seconds.get(phase.value, 0.0) + seconds

    def move(self, source: Phase, target: Phase, seconds: float) -> None:
        """Re-book `seconds` already charged to `source` (samples later dropped, say) to `target`."""
        self._charge()
        seconds = min(seconds, self.seconds.get(source.value, 0.0))
        self.add(source, -seconds)
        self.add(target, seconds)

    @contextlib.contextmanager
    def __call__(self, phase: Phase) -> Iterator[None]:
        self._charge()
        self._open.append(phase)
        try:
            yield
        finally:
            self._charge()
            self._open.pop()


@dataclass
class Measurement:
    """Samples of one callable plus how they were taken; `value` is the result of a warm call."""

    samples_ms: list[float]
    method: str
    calls_per_sample: int
    cache: str
    batch_medians: list[float] = field(default_factory=list)
    flushed: bool = False  # the L2 was flushed before each sample (cold mode, a call that fits in the L2)
    value: Any = None
    peak_memory_bytes: int | None = None
    sm_clock_mhz: int | None = None
    throttle: list[str] = field(default_factory=list)
    loaded: bool = False  # sampled in an unbroken loop: the power cap held the clock (cuda_timer.py)
    warnings: list[str] = field(default_factory=list)
    node_gap_ms: float = 0.0  # subtracted from each sample (node_gap.py)
    slow_replay_us: float | None = None  # graph-timed: replays ran this much slower per node than fresh (replay_state.py)
    wall_s: float = 0.0  # total time spent in measure(), warm-up and calibration included
    first_call_s: float = 0.0  # the first call's wall time: compiling and autotuning happen there
    phases: dict[str, float] = field(default_factory=dict)  # Phase value -> wall seconds (PhaseClock)

    def __post_init__(self) -> None:
        self.stats = summarize(self.samples_ms, self.batch_medians)

    @property
    def median_ms(self) -> float:
        return self.stats.median_ms

    @property
    def measured_s(self) -> float:
        """Device time inside the samples themselves; wall_s minus this is the harness overhead."""
        return sum(self.samples_ms) * self.calls_per_sample / 1e3


def iter_tensors(obj: Any, depth: int = 0):
    """The tensors in `obj`: itself, or inside lists, tuples and dicts up to 5 levels deep (the
    plugin passes `(args, kwargs)`, which takes two of them)."""
    torch = sys.modules.get("torch")
    if torch is None:  # no torch imported: no tensor can exist
        return

    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 5 and isinstance(obj, (list, tuple)):
        for item in obj:
            yield from iter_tensors(item, depth + 1)
    elif depth < 5 and isinstance(obj, dict):
        for item in obj.values():
            yield from iter_tensors(item, depth + 1)


def tensor_bytes(obj: Any) -> int:
    """Bytes held by the distinct storages of the tensors in `obj` (args, nested lists/dicts)."""
    seen: dict[int, int] = {}
    for t in iter_tensors(obj):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def on_cuda(obj: Any) -> bool:
    """True when any tensor in `obj` lives on a CUDA device: that decides which clock times the call."""
    return any(t.is_cuda for t in iter_tensors(obj))


def should_stop(samples: list[float], batch_medians: list[float], config: TimingConfig, started: float) -> bool:
    """The stop rule: the budget or sample cap is spent, or enough batches agree within the precision."""
    if not samples:  # however small the budget, a measurement has at least one batch
        return False
    if len(samples) >= config.max_samples or time.perf_counter() - started >= config.budget_s:
        return True
    if len(samples) < config.min_samples or len(batch_medians) < config.min_batches:
        return False
    return ci_relative(samples, batch_medians) <= config.precision
