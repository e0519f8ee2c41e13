"""How one callable is timed: warm-up, CUDA events, CUDA graphs for short calls, L2 flush, adaptive samples.

The rules (each one a trap seen in practice):
- The first call compiles and autotunes; warm-up then runs until clocks and caches settle.
- Device work is asynchronous: samples are CUDA events on the stream the work runs on, never a host
  clock without a synchronize. Work still running on another stream after the measured stream is done
  is detected, and such a callable is timed with a device-wide synchronize instead (and says so).
- A call shorter than 20 µs (events resolve ~0.5 µs), or whose launches take more than half of a sample's
  GPU time (the call, plus the L2 flush ahead of it in cold mode; with a baseline timed with events,
  more than the whole of it), is launch-bound: it is captured
  k times in a CUDA graph and timed per replay; if it cannot be captured, k eager calls are queued
  behind a GPU spin so that launch gaps are not measured. The k calls of a replay run back to back:
  only the first starts from a cold L2, the others find what their predecessor left in it. A graph
  holds at most 50 calls: the GPU spaces the kernels of longer graphs out (see MAX_GRAPH_CALLS).
- Each sample starts from a cold L2 unless the cache mode is `warm`: a reduction reads a buffer twice
  the L2's size. It reads rather than writes (a memset, as do_bench does): a memset leaves the L2
  full of dirty lines whose write-back then lands inside the timed kernel (+60% on a 4M-float
  elementwise op on an H100). A short GPU spin at the head of each batch keeps the host ahead of
  the device so no sample sees a launch gap; where queuing a sample (the call, the flush and the
  event pair: tens of µs of Python on an H100 host, against a ~33 µs flush) takes the host more
  than half of the sample's GPU time, every sample gets its own spin. Spins are sized at the boost
  clock (the fastest of a few readings of the spin rate after a warming spin), so a lower clock can
  only lengthen them.
- What a frame adds to a call is subtracted from every sample: the event pair (~1.3 µs on an H100)
  and the latency of a kernel launched behind an event and waited for by the next one (together
  2.8-3.4 µs beyond CUPTI's kernel duration on an H100, for a one-thread spin and a full-grid copy
  alike). It is taken as a frame around a short spin less what the spin costs in a CUDA graph of
  spins back to back (see `_frame`): a sample then reads the call as a graph replay does, its
  kernels plus the short gap (0.1-0.4 µs) a kernel leaves behind another in a graph, and both
  methods agree. That gap, measured once per GPU and cache mode with CUPTI in a child process
  (node_gap.py), is then subtracted once per call: a call reads as a profiler shows it, from its
  first kernel's start to its last kernel's end.
- Samples are taken in batches of ~50 ms. Power management makes consecutive samples correlated
  (a bf16 matmul's clock wanders over hundreds of ms), so the precision of the median is judged
  from the spread of the batch medians, not from the samples as if they were independent: sampling
  stops when that confidence interval is within the target precision or the time budget is spent.
- The first batch is a settling batch, not counted: after the calibration's short, synchronized
  bursts, the device needs tens of ms of the sampling pattern to settle. On an H100 a bf16 4096
  matmul's first 30 ms batch read 4-18% slower than the rest in most runs; dropping it cut the
  median's CI from ~2.1% to 1.3% and the spread of 16 medians from 2.6-6.6% to 2.8%.
"""
from __future__ import annotations

import contextlib
import gc
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import node_gap
from .device import SEVERE_THROTTLE, read_clocks

# What a sample measures, versioned per result: an entry measured with another version can read
# differently for the same code, so comparisons against it say so, and merges keep versions apart.
# A change names the methods whose samples it moved; results of the others compare across it.
TIMING_VERSION = 4
CUDA_METHODS = ("events", "graph", "queued", "device-sync")
TIMING_CHANGES = {  # version -> (methods it changed, what changed)
    2: (CUDA_METHODS, "CUDA event samples no longer include the ~1 µs latency of a kernel launched between two "
                      "events (they read the call as it runs in a stream, as graph replays do)"),
    3: (CUDA_METHODS,
        "CUDA event samples no longer include the ~1 µs gap between two kernels queued eagerly (they read the "
        "call as a graph replay does: up to ~1.5 µs less per sample on an H100), and graphs hold at most 50 "
        "calls (a GPU can space the kernels of longer graphs out: a 1 µs kernel read up to 25% less)"),
    4: (("events", "graph", "queued"),
        "samples no longer include the gap a GPU leaves after a call's last kernel before the next kernel starts "
        "(measured per GPU with CUPTI: 0.1-0.4 µs per call on an H100); a call reads as a profiler's kernel time"),
}

# Calls shorter than this (GPU time) are timed in CUDA graphs: events resolve ~0.5 µs, and a launch
# costs several µs, so a few-µs kernel timed alone measures the launch.
GRAPH_BELOW_MS = 0.02
# A call whose host-side enqueue time exceeds this fraction of its GPU time cannot keep the GPU busy.
LAUNCH_BOUND_RATIO = 0.5
# ... unless its baseline was timed with events: then events are kept until the call's launch takes
# longer than a whole sample's GPU time (up to there a spin ahead of each sample covers the host's
# deficit, so no launch gap is timed). Near the 0.5 boundary the choice flipped with the host's
# speed: on an H200 a 31.6 µs ELU recorded with events was timed in a graph a session later (+6.2%).
PREFERRED_EVENTS_RATIO = 1.0
# GPU time a CUDA-graph replay aims for: long enough for events to resolve 0.1%...
GRAPH_REPLAY_MS = 2.0
# ... in at most this many calls. Past ~64 nodes one H100 ran a graph's kernels no closer than
# ~1.36 µs apart: a 1.02 µs kernel (CUPTI) replayed at 1.09 µs per node in graphs of 50 and at
# 1.36-1.40 in graphs of 100 to 1000, while a 7.5 µs one read 7.58-7.71 at every size (its one
# cold call per replay spread over fewer calls). Another H100 ran the short kernel 1.38 µs apart
# in graphs of 50 as well: the spacing varies between machines; graphs of 50 never read it slower.
MAX_GRAPH_CALLS = 50
# Work left on other streams after the measured stream finished, beyond which timing on the stream
# alone would be a lie. The probe is a host clock around a synchronize, which a busy GIL or a
# descheduled thread can stretch by ~0.1 ms: 0.05 ms flagged 9 of 407 suite tests spuriously on an
# H100, so the bar is higher and relative to the call, and the best of 5 probes counts.
PENDING_TOLERANCE_MS = 0.2
PENDING_FRACTION = 0.25
# Samples over which a batch's host queuing time is taken: a longer batch can fill the launch queue
# (~1000 entries, 4 per sample), after which the host waits for the device.
QUEUE_PROBE = 32
# Samples of each kind in the frame calibration (empty frames; then frames around one spin and around
# graphs of spins, alternating in one batch).
FRAME_SAMPLES = 100
# GPU time of the spin the frame calibration times in a frame: a few µs, so that a clock below boost
# lengthens it by little.
FRAME_SPIN_MS = 0.005
# Spins in the smaller of the calibration's two graphs (the larger has twice as many): what one spin
# costs in a stream is their difference over this many, so the frames' own noise (~0.03 µs at the
# low quantile) is divided by it.
FRAME_GRAPH_SPINS = 20
# Host wall time a CPU sample aims for, so perf_counter's resolution is irrelevant.
CPU_SAMPLE_S = 1e-4


def recorded_version(entry: dict) -> int | None:
    """The timing version an entry or result record was measured with: an entry without one was
    measured before versions were recorded (1); None when the value is not a version number (a
    positive integer, or its digits as a string)."""
    value = entry.get("timing", 1)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _changed(version: int, entry: dict) -> bool:
    """Whether timing version `version` moved the samples of an entry's method (an entry that does
    not say how it was timed, as entries recorded before versions were may not: assume it did)."""
    method = entry.get("method")
    return not method or method in TIMING_CHANGES[version][0]


def timing_epoch(entry: dict) -> int | None:
    """The newest timing version, up to the entry's own, that changed how its method reads (1 when
    none did): two results were measured the same way when their epochs are equal. A version newer
    than this gpuperf's is its own epoch (what it changed is unknown here); None: not a version."""
    version = recorded_version(entry)
    if version is None or version > TIMING_VERSION:
        return version
    return max([1] + [v for v in TIMING_CHANGES if v <= version and _changed(v, entry)])


def version_note(entry: dict) -> str | None:
    """What differs between an entry's timing and this gpuperf's for its method, or None."""
    version = recorded_version(entry)
    if version is None:
        return f"an unknown timing version (this gpuperf measures with {TIMING_VERSION})"
    if timing_epoch(entry) == timing_epoch(dict(entry, timing=TIMING_VERSION)):
        return None
    if version > TIMING_VERSION:
        return f"timing version {version}, newer than this gpuperf's {TIMING_VERSION}: upgrade pytest-gpuperf"
    changes = "; ".join(TIMING_CHANGES[v][1] for v in TIMING_CHANGES
                        if version < v <= TIMING_VERSION and _changed(v, entry))
    return f"timing version {version}, and this gpuperf measures with {TIMING_VERSION}: {changes}"


@dataclass(frozen=True)
class TimingConfig:
    """How hard to try: cache mode, target precision of the median, and the time budget."""

    cache: str = "cold"  # "cold": flush L2 before each sample; "warm": don't
    precision: float = 0.005  # stop once the median's 95% CI half-width is within this fraction
    budget_s: float = 1.0  # stop sampling after this much wall time (warm-up not included)
    # Keep calling after the first call for this long (clocks, caches). The settling batch (see the
    # module docstring) follows in the sampling pattern itself, so warm-up only has to raise the
    # clock (tens of ms after a compile left the GPU idle) before calibration.
    warmup_s: float = 0.05
    min_samples: int = 10
    # Batch medians needed before their spread is trusted. Three would do for the median (on an
    # H100 suite run, 282 of 386 tests had a 0.5% CI after 3 of their 5 batches, their medians
    # moving at most 0.28% over the other two), but not for the gate: a CI stopped at 0.5% instead
    # of the ~0.1% five batches give widens the noise bound, and on an H100 the gate then caught a
    # softmax's 5% slowdowns 17 times in 20 (20 with five) and a matmul's 10% ones 18 (20).
    min_batches: int = 5
    max_samples: int = 100_000
    batch_s: float = 0.05  # device time queued between checks of the stop rule


@dataclass(frozen=True)
class Stats:
    """Order statistics of a sample set, in milliseconds; `noise` is relative (1.4826 MAD / median)."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    stddev_ms: float
    q1_ms: float
    q3_ms: float
    noise: float
    ci_ms: tuple[float, float]
    samples: int


# How many standard deviations of the other k - 1 batch medians the farthest one must lie from
# their mean to count as one disturbed batch (see _undisturbed), for k = 5, 6, ...: Student-t
# prediction bounds at a two-sided 1% / k (Bonferroni over the k candidates), so that normal batches
# lose one ~1% of the time at every k (checked by simulation); beyond the table, its last value.
DISTURBED_SIGMAS = (11.42, 8.25, 6.86, 6.10, 5.63, 5.31, 5.09, 4.92, 4.78, 4.68, 4.60, 4.53, 4.47, 4.42, 4.38,
                    4.34)
# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (beyond: 1.96 suffices).
_T975 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
         2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04)


def _undisturbed(batch_medians: list[float]) -> list[float]:
    """The batch medians without one disturbed batch, if there is one among at least five: the one
    farthest from their median, when it lies further from the others' mean than DISTURBED_SIGMAS
    of their standard deviations (never when the others do not vary: that would be a zero interval).
    One batch hit by an interruption (a softmax batch at 73 µs among 57s on an H100) made a
    t-interval of 8% out of batches that agree to 0.2%, and the gate then judged a 10% slowdown
    `unsure` behind that bound. A trend (batches settling over the run) spreads over several
    batches and stays in the interval."""
    if len(batch_medians) < 5:
        return batch_medians
    center = statistics.median(batch_medians)
    far = max(range(len(batch_medians)), key=lambda i: abs(batch_medians[i] - center))
    rest = batch_medians[:far] + batch_medians[far + 1:]
    spread = statistics.stdev(rest)
    sigmas = DISTURBED_SIGMAS[min(len(batch_medians) - 5, len(DISTURBED_SIGMAS) - 1)]
    if spread > 0 and abs(batch_medians[far] - statistics.fmean(rest)) > sigmas * spread:
        return rest
    return batch_medians


def _ci_half_width(median: float, data: list[float], batch_medians: list[float] | None) -> float:
    """Half-width of a 95% CI of the median: from batch medians (t-interval; a lone disturbed batch
    left out, see _undisturbed) when there are enough batches, else distribution-free
    order-statistic bounds of the samples."""
    if batch_medians and len(batch_medians) >= 3:
        medians = _undisturbed(batch_medians)
        k = len(medians)
        t = _T975[k - 2] if k - 1 <= len(_T975) else 1.96
        return t * statistics.stdev(medians) / math.sqrt(k)
    n = len(data)
    half = 1.96 * math.sqrt(n) / 2
    lo = data[max(0, math.floor(n / 2 - half))]
    hi = data[min(n - 1, math.ceil(n / 2 + half))]
    return max(median - lo, hi - median)


def summarize(samples_ms: list[float], batch_medians: list[float] | None = None) -> Stats:
    """Median, spread and a 95% CI of the median (see _ci_half_width)."""
    data = sorted(samples_ms)
    n = len(data)
    median = statistics.median(data)
    mad = statistics.median(abs(x - median) for x in data)
    half = _ci_half_width(median, data, batch_medians) if n > 1 else math.inf  # one sample: no interval
    lo, hi = median - half, median + half
    q1, _, q3 = statistics.quantiles(data, n=4) if n > 1 else (median, median, median)
    return Stats(
        median_ms=median, mean_ms=statistics.fmean(data), min_ms=data[0], max_ms=data[-1],
        stddev_ms=statistics.stdev(data) if n > 1 else 0.0, q1_ms=q1, q3_ms=q3,
        noise=1.4826 * mad / median if median > 0 else 0.0, ci_ms=(lo, hi), samples=n,
    )


def ci_relative(stats: Stats) -> float:
    """Half-width of the median's CI relative to the median."""
    lo, hi = stats.ci_ms
    return (hi - lo) / 2 / stats.median_ms if stats.median_ms > 0 else math.inf


@dataclass(frozen=True)
class CaptureFailure:
    """Why a CUDA graph capture failed: the root cause's type and first line, not the exception,
    whose frames would keep the failed graph alive."""

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


@dataclass
class Measurement:
    """Samples of one callable plus how they were taken; `value` is the result of a warm call."""

    samples_ms: list[float]
    method: str
    calls_per_sample: int
    cache: str
    batch_medians: list[float] = field(default_factory=list)
    value: Any = None
    peak_memory_bytes: int | None = None
    sm_clock_mhz: int | None = None
    throttle: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    node_gap_ms: float = 0.0  # subtracted from each call's time (node_gap.py)
    wall_s: float = 0.0  # total time spent in measure(), warm-up and calibration included
    first_call_s: float = 0.0  # the first call's wall time: compiling and autotuning happen there

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


def measure(fn: Callable[[], Any], config: TimingConfig | None = None, *, inputs: Any = (),
            prefer: str | None = None) -> Measurement:
    """Time `fn()`; CUDA timing when `inputs` or fn's result live on a CUDA device, a host clock otherwise.

    `prefer` names the method a baseline was measured with ('events' or 'graph'): the automatic
    choice flips on calls near its 20 µs boundary, and the two methods see different cache states,
    so a comparison should time both sides the same way."""
    config = config or TimingConfig()
    start = time.perf_counter()
    value = fn()  # compile / autotune / load; also tells where the work runs
    first_call_s = time.perf_counter() - start
    torch = sys.modules.get("torch")
    cuda_in_use = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    if on_cuda(inputs) or on_cuda(value):
        # The timer's own calls return the value; holding the first one through the measurement
        # would keep a second copy of every output on the device meanwhile.
        del value
        m = _CudaTimer(fn, config, inputs, prefer).run()
    else:
        # No CUDA tensor in sight, yet the callable may launch work (a kernel writing into a buffer it
        # closes over): a host clock then only sees launches unless each sample waits for the device.
        m = _measure_cpu(fn, config, value, sync=torch.cuda.synchronize if cuda_in_use else None)
    m.wall_s = time.perf_counter() - start
    m.first_call_s = first_call_s
    return m


def launch_bound(gpu_ms: float, host_ms: float, flush_ms: float, prefer: str | None = None) -> bool:
    """Time in a CUDA graph? Yes when events can't resolve the call or the host cannot stay ahead of
    the device; a preferred method (the baseline's) wins where it can measure the call honestly.

    What the host must outrun is a whole sample's GPU time, the L2 flush ahead of the call
    included. Judged on the call alone, 22-45 µs kernels with launches of over half that flipped
    from events on one H100 lease to a graph on the next (a slower or busier host CPU), and the two
    methods (a graph runs its calls back to back, on a warmer L2) disagreed by 4-14%."""
    if prefer == "graph":
        return True
    if prefer == "events":
        return host_ms > PREFERRED_EVENTS_RATIO * (gpu_ms + flush_ms)
    return host_ms > LAUNCH_BOUND_RATIO * (gpu_ms + flush_ms) or gpu_ms < GRAPH_BELOW_MS


def _stop(samples: list[float], batch_medians: list[float], config: TimingConfig, started: float) -> bool:
    if not samples:  # however small the budget, a measurement has at least one batch
        return False
    if len(samples) >= config.max_samples or time.perf_counter() - started >= config.budget_s:
        return True
    if len(samples) < config.min_samples or len(batch_medians) < config.min_batches:
        return False
    return ci_relative(summarize(samples, batch_medians)) <= config.precision


def _measure_cpu(fn: Callable[[], Any], config: TimingConfig, value: Any,
                 sync: Callable[[], None] | None) -> Measurement:
    deadline = time.perf_counter() + config.warmup_s
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() < deadline:
        fn()
        calls += 1
    per_call = (time.perf_counter() - t0) / calls
    inner = max(1, math.ceil(CPU_SAMPLE_S / max(per_call, 1e-9)))
    per_batch = max(1, math.ceil(config.batch_s / (per_call * inner)))
    samples: list[float] = []
    batch_medians: list[float] = []
    started = time.perf_counter()
    while not _stop(samples, batch_medians, config, started):
        batch = []
        for _ in range(per_batch):
            t = time.perf_counter()
            for _ in range(inner):
                fn()
            if sync is not None:
                sync()
            batch.append((time.perf_counter() - t) * 1e3 / inner)
        samples.extend(batch)
        batch_medians.append(statistics.median(batch))
    return Measurement(samples, "cpu" if sync is None else "host-sync", inner, "n/a", batch_medians, value=value)


class _CudaTimer:
    """One CUDA measurement: warm-up and calibration, method choice, then batches of samples."""

    def __init__(self, fn: Callable[[], Any], config: TimingConfig, inputs: Any, prefer: str | None,
                 torch: Any = None) -> None:
        if torch is None:  # tests pass a simulated device (tests/sim_cuda.py)
            import torch

        self.torch = torch
        self.fn = fn
        self.config = config
        self.inputs = inputs
        self.prefer = prefer
        self.index = torch.cuda.current_device()
        self.warnings: list[str] = []
        self.clocks: list[int] = []
        self.throttle: set[str] = set()
        self.long_call = False

    # -- calibration -------------------------------------------------------------------------
    def _event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def _warmup(self) -> float:
        """Call fn until the warm-up time is spent (clocks, caches, allocator); return its host enqueue ms.

        Also sets `self.long_call`: a call that takes over 10 ms needs fewer calibration calls (a
        100 ms attention case would otherwise spend seconds calibrating against a 0.3 s budget).

        The host waits for the device after calls 1, 2, 4, ... 64 and every 64th after that, so the
        work queued past the deadline is at most what the device has already done: warm-up lasts
        at most about twice its time. Waiting only every 64th call, a 100 ms attention forward (a
        50 µs launch) queued 64 calls inside 0.1 s of host time and warmed up for 6.4 s."""
        host: list[float] = []
        started = time.perf_counter()
        deadline = started + self.config.warmup_s
        while len(host) < 2 or (time.perf_counter() < deadline and len(host) < 10_000):
            t = time.perf_counter()
            self.fn()
            host.append(time.perf_counter() - t)
            n = len(host)
            if n & (n - 1) == 0 or n % 64 == 0:  # a full launch queue would also inflate host times
                self.torch.cuda.synchronize()
        self.torch.cuda.synchronize()
        self.long_call = (time.perf_counter() - started) / len(host) > 0.01
        # A stall can only lengthen a launch, so a low quantile of the warm calls (the first one
        # compiles) is its cost; a median of two calls made one descheduled call a 12 ms launch.
        warm = sorted(host[1:])
        return warm[len(warm) // 4] * 1e3

    def _pending_ms(self) -> float:
        """Time the device stays busy after the measured stream finished one call (other streams' work).

        Read two ways, and the smaller counts, since each can only err long:
        - on the GPU's clock, from the measured stream's end to an event recorded after a
          device-wide synchronize; a host stall (descheduling, the GIL) only lengthens a probe, so
          the shortest of a few probes is safe. (A host clock alone read ~0 whenever the host
          stalled while the other stream finished.) But that event is recorded on an idle device,
          and on a power-capped H100 it was stamped over 0.2 ms late in every probe of 2 of 10
          measurements of a bf16 matmul, which were then timed with a device-wide synchronize
          (+7%), with no other stream in use;
        - on the host's clock, the synchronize itself, after the measured stream's end was seen
          on the host: the median of the probes, so a stall in one of them does not count.
        Work really left on another stream keeps both long."""
        torch = self.torch
        gpu = math.inf
        host: list[float] = []
        for _ in range(2 if self.long_call else 5):
            torch.cuda.synchronize()
            end, after = self._event(), self._event()
            self.fn()
            end.record()
            end.synchronize()
            t = time.perf_counter()
            torch.cuda.synchronize()
            host.append((time.perf_counter() - t) * 1e3)
            after.record()
            after.synchronize()
            gpu = min(gpu, end.elapsed_time(after))
        return min(gpu, statistics.median(host))

    def _peak_memory(self) -> tuple[Any, int]:
        """One call's result and its peak memory: inputs plus everything allocated during the call.

        The garbage collector is held off for the call: earlier tests' garbage freed in the middle
        of it would lower the peak by however much it held, and make the memory verdict flaky."""
        torch = self.torch
        torch.cuda.synchronize()
        with _gc_paused():
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            value = self.fn()
            torch.cuda.synchronize()
        return value, torch.cuda.max_memory_allocated() - before + tensor_bytes(self.inputs)

    # -- sampling ----------------------------------------------------------------------------
    def _pad(self, host_ms: float) -> None:
        """Busy the GPU long enough for the host to queue what follows, so no launch gap is timed."""
        self.torch.cuda._sleep(int(_pad_ms(host_ms) * _spin_rate(self.torch, self.index)))

    def _read_clocks(self) -> None:
        state = read_clocks(self.index)
        if state.sm_clock_mhz:
            self.clocks.append(state.sm_clock_mhz)
        self.throttle.update(state.throttle)

    def _batch(self, body: Callable[[], None], n: int, host_ms: float, flush, sync: bool,
               each_ms: float = 0.0, stamps: list[float] | None = None) -> list[float]:
        """n samples of [flush][start][body][end] queued behind a spin; raw event times in ms.

        `host_ms`: host time to queue one sample (the head spin covers two). `each_ms` > 0: a spin
        before every sample covering that much host time, where queuing a sample takes the host
        longer than the device needs to run one: a spin at the head of the batch would be eaten
        after a few samples, and the device would idle between the rest. `stamps`, if given,
        receives the host clock as each of the first QUEUE_PROBE samples starts to be queued."""
        torch = self.torch
        events = [(self._event(), self._event()) for _ in range(n)]
        with _gc_paused():
            self._pad(host_ms * 2)
            for i, (begin, end) in enumerate(events):
                if stamps is not None and i < QUEUE_PROBE:  # later, a full launch queue would time
                    stamps.append(time.perf_counter())  # the device
                if each_ms > 0:
                    self._pad(each_ms)
                if flush is not None:
                    flush()
                begin.record()
                body()
                if sync:
                    torch.cuda.synchronize()
                end.record()
            torch.cuda.synchronize()
        return [b.elapsed_time(e) for b, e in events]

    def _frame(self, flush) -> tuple[float, float]:
        """(GPU ms a sample's frame adds to the call in it, host ms to queue a frame: the flush and
        the event pair), taken the way samples are, once per device and cache mode.

        The GPU cost is T1 - R: T1 a frame around one short spin, R what that spin costs in a
        stream, from CUDA graphs of k and 2k spins back to back ((frame(2k) - frame(k)) / k: the
        frames cancel), all alternating in one batch so they see the same clocks. So an event
        sample reads the call as a graph replay does, its kernels plus the short gap a kernel
        leaves behind another in a graph (0.0-0.4 µs on an H100). A frame around one kernel adds
        2.8-3.4 µs to its CUPTI duration on an H100, whether the kernel is a one-thread spin or a
        full-grid copy, but eager kernels back to back leave ~1 µs between them: the earlier cost,
        2 T1 - T2 (frames around one spin and two), subtracted only the frame beyond that gap, and
        a 40 µs copy read 1.7 µs above CUPTI's duration. Outside [empty pair, T1] the cost cannot
        be right, and the empty pair's stands in. The host cost (tens of µs on an H100 host,
        against a ~33 µs flush) decides, with the call's own launches, whether one spin per
        batch keeps the device busy: forced to events with the device idling between samples, a
        3.6 µs kernel's samples read 21 µs on an H100, against 6 µs behind a spin that covered the
        whole batch."""
        key = (self.index, flush is not None)
        if key not in _FRAME:
            torch = self.torch
            if flush is not None:  # its first call loads the reduction kernel: not a sample's cost
                flush()
                torch.cuda.synchronize()
            cycles = int(FRAME_SPIN_MS * _spin_rate(torch, self.index))

            def spin() -> None:
                torch.cuda._sleep(cycles)

            # The head spin covers the whole batch's enqueue, and a batch stays well inside the launch
            # queue, or frames would read host gaps.
            stamps: list[float] = []
            empty = _low(self._batch(lambda: None, FRAME_SAMPLES, FRAME_SAMPLES * 0.05, flush, sync=False,
                                    stamps=stamps))
            graphs = [self._capture(spin, FRAME_GRAPH_SPINS), self._capture(spin, 2 * FRAME_GRAPH_SPINS)]
            if any(isinstance(g, CaptureFailure) for g in graphs):
                cost, problem = empty, "failed: a spin could not be captured in a CUDA graph"
            else:
                bodies = [spin, graphs[0].replay, graphs[1].replay]
                kinds = iter(range(3 * FRAME_SAMPLES))
                raw = self._batch(lambda: bodies[next(kinds) % 3](), 3 * FRAME_SAMPLES, 3 * FRAME_SAMPLES * 0.05,
                                  flush, sync=False)
                one, k_spins, two_k_spins = _low(raw[0::3]), _low(raw[1::3]), _low(raw[2::3])
                cost = one - (two_k_spins - k_spins) / FRAME_GRAPH_SPINS
                problem = None if empty <= cost <= one else (
                    f"out of range (one spin {one * 1e3:.2f} µs, {FRAME_GRAPH_SPINS} and {2 * FRAME_GRAPH_SPINS} "
                    f"in graphs {k_spins * 1e3:.2f} and {two_k_spins * 1e3:.2f} µs, empty {empty * 1e3:.2f} µs)")
            if problem:
                cost = empty
                self.warnings.append(f"frame calibration {problem}: only the empty event pair's cost is subtracted")
            gaps = [b - a for a, b in zip(stamps, stamps[1:])]  # a stall inflates one sample, not all
            _FRAME[key] = (cost, statistics.median(gaps) * 1e3)
        return _FRAME[key]

    def _timer_overhead_ms(self, flush) -> float:
        return self._frame(flush)[0]

    def _flush_ms(self, flush) -> float:
        """GPU time of one L2 flush, measured once per device: what a cold sample adds ahead of the call."""
        if flush is None:
            return 0.0
        if self.index not in _FLUSH_MS:
            raw = self._batch(flush, 5, 0.05, None, sync=False)
            _FLUSH_MS[self.index] = max(_low(raw) - self._timer_overhead_ms(None), 0.0)
        return _FLUSH_MS[self.index]

    def _sample(self, body: Callable[[], None], host_ms: float, est_ms: float, divisor: int, flush,
                sync: bool, each_ms: float = 0.0, gap_ms: float = 0.0) -> tuple[list[float], list[float]]:
        """Batches of samples until the stop rule holds; returns (samples, batch medians) in ms per call,
        less `gap_ms` per call (the gap a graph node leaves behind the call's last kernel)."""
        overhead = self._timer_overhead_ms(flush)
        flush_ms = self._flush_ms(flush)
        spin_ms = _pad_ms(each_ms) if each_ms > 0 else 0.0
        per_batch = max(1, min(2000, math.ceil(self.config.batch_s * 1e3 / (est_ms + flush_ms + spin_ms + 0.005))))
        samples: list[float] = []
        batch_medians: list[float] = []
        self._batch(body, per_batch, host_ms, flush, sync, each_ms)  # settling (module docstring)
        started = time.perf_counter()
        while not _stop(samples, batch_medians, self.config, started):
            raw = self._batch(body, per_batch, host_ms, flush, sync, each_ms)
            batch = [max((t - overhead) / divisor - gap_ms, 0.0) for t in raw]
            samples.extend(batch)
            batch_medians.append(statistics.median(batch))
            self._read_clocks()
        return samples, batch_medians

    def _capture(self, fn: Callable[[], Any], calls: int) -> Any:
        """`calls` calls of fn captured in one CUDA graph, or the CaptureFailure that stopped it."""
        torch = self.torch
        caller = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(caller)
        graph = None
        try:
            with torch.cuda.stream(side):
                fn()
            caller.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # On the caller's stream where it may capture (not the default stream): work that fn puts
            # on the stream it was called from, such as a backward on its forward's stream, is then
            # captured in line. Captured from another stream, it joins through cross-stream edges, which
            # added ~1.4 µs to a 12 µs backward's replay (H100).
            with torch.cuda.graph(graph, stream=None if caller == torch.cuda.default_stream() else caller):
                for _ in range(calls):
                    fn()
        except Exception as exc:  # noqa: BLE001 - not capturable (syncs, CPU work, RNG): the caller falls back
            cause = exc
            while cause.__context__ is not None:  # capture_end's "invalidated" follows the real cause
                cause = cause.__context__
            lines = str(cause).strip().splitlines()
            failure = CaptureFailure(type(cause).__name__, lines[0][:200] if lines else "")
        else:
            return graph
        # Undo what the failed capture left behind. torch.cuda.graph's exit raised before it restored the
        # caller's stream. Keep no exception (its frames hold the graph): the failed graph must be freed,
        # and torch's CUDA RNG reset by a capture that ends, or the next torch.randn on the device raises
        # "Offset increment outside graph capture encountered unexpectedly".
        torch.cuda.set_stream(caller)
        del graph
        torch.cuda.synchronize()
        scratch = torch.zeros(1, device=f"cuda:{self.index}")
        scratch.add_(1)  # loaded before the capture
        clean = torch.cuda.CUDAGraph()
        with torch.cuda.graph(clean):
            scratch.add_(1)
        return failure

    def _gpu_ms(self, flush, host_ms: float) -> float:
        """GPU time of one call with the queue kept full, so launch gaps don't count (calibration)."""
        n = 3 if self.long_call else 9
        raw = self._batch(self.fn, n, max(0.5, n * host_ms / 2), flush, sync=False)  # the spin covers all n
        return max(_low(raw) - self._timer_overhead_ms(flush), 1e-4)

    def run(self) -> Measurement:
        # Before the warm-up: the first lookup in a process may measure the gap in a child process.
        gap_ms = node_gap.lookup(self.index).for_cache(self.config.cache)
        call_host_ms = self._warmup()
        pending = self._pending_ms()
        value, peak = self._peak_memory()
        flush = _Flush(self.torch, self.index) if self.config.cache == "cold" else None
        host_ms = call_host_ms + self._frame(flush)[1]  # to queue one sample: the call and its frame
        gpu_ms = self._gpu_ms(flush, host_ms)
        flush_ms = self._flush_ms(flush)
        self._read_clocks()
        if pending > max(PENDING_TOLERANCE_MS, PENDING_FRACTION * gpu_ms):
            self.warnings.append(
                f"work was still running {pending:.3f} ms after the measured stream finished: the callable "
                "uses other streams; each sample waits for the whole device (times include a synchronize)")
            method, calls = "device-sync", 1
            samples, batches = self._sample(self.fn, host_ms, gpu_ms + pending, 1, flush, sync=True)
            gap_ms = 0.0  # a synchronize per sample: the gap is the least of what a sample adds
        elif launch_bound(gpu_ms, call_host_ms, flush_ms, self.prefer):
            calls = max(10, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_MS / max(gpu_ms, 1e-4))))
            graph = self._capture(self.fn, calls)
            if not isinstance(graph, CaptureFailure):
                method = "graph"
                samples, batches = self._sample(graph.replay, 0.05, gpu_ms * calls, calls, flush, sync=False,
                                                gap_ms=gap_ms)
            else:
                self.warnings.append(f"CUDA graph capture failed ({graph}); timed queued eager calls")
                method = "queued"
                calls = max(1, min(calls, math.floor(40.0 / max(call_host_ms, 1e-3))))

                def body() -> None:
                    for _ in range(calls):
                        self.fn()

                queue_ms = host_ms + call_host_ms * (calls - 1)
                samples, batches = self._sample(body, queue_ms, gpu_ms * calls, calls, flush, sync=False,
                                                each_ms=queue_ms, gap_ms=gap_ms)
        else:
            method, calls = "events", 1
            # Where the host barely keeps up, each sample gets a spin of the host's deficit (and a
            # little more), so the device never idles between samples.
            each_ms = (max(host_ms - gpu_ms - flush_ms, 0.0) + 0.001
                       if host_ms > LAUNCH_BOUND_RATIO * (gpu_ms + flush_ms) else 0.0)
            samples, batches = self._sample(self.fn, host_ms, gpu_ms, 1, flush, sync=False, each_ms=each_ms,
                                            gap_ms=gap_ms)
        severe = sorted(self.throttle & SEVERE_THROTTLE)
        if severe:
            self.warnings.append(f"GPU clocks were throttled during the measurement ({', '.join(severe)})")
        return Measurement(
            samples, method, calls, self.config.cache, batches, value=value, peak_memory_bytes=peak,
            node_gap_ms=gap_ms, sm_clock_mhz=int(statistics.median(self.clocks)) if self.clocks else None,
            throttle=sorted(self.throttle), warnings=self.warnings,
        )


_FLUSH: dict[int, Any] = {}
_SPIN: dict[int, float] = {}
_FRAME: dict[tuple[int, bool], tuple[float, float]] = {}
_FLUSH_MS: dict[int, float] = {}


class _Flush:
    """Evicts the L2 by reading a buffer twice its size (kept per device for the session)."""

    def __init__(self, torch, index: int) -> None:
        if index not in _FLUSH:
            l2 = getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or (64 << 20)
            buf = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.float32, device=f"cuda:{index}")
            _FLUSH[index] = (buf, torch.empty((), dtype=torch.float32, device=f"cuda:{index}"))
        self.torch = torch
        self.buffer, self.sink = _FLUSH[index]
        self.nbytes = self.buffer.nbytes

    def __call__(self) -> None:
        self.torch.sum(self.buffer, dim=0, out=self.sink)


def _low(raw_ms: list[float]) -> float:
    """A low quantile (the 10th percentile; the fastest of fewer than 10) of raw event times taken
    behind a spin: a host stall can only lengthen one, when the queue runs dry, never shorten it.
    Used where one number is taken from a short batch (calibration), and an inflated one would be
    subtracted from every sample or choose the method: with the median of 9, a ~6 µs attention
    forward on an H100 was once judged a 60 µs call and timed with events at 59-86 µs."""
    return sorted(raw_ms)[len(raw_ms) // 10]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold Python's garbage collector off while samples are queued (as timeit does): a collection
    of a large heap (torch, Triton, Inductor) stalls the host for milliseconds, longer than the
    spin that keeps the device ahead of it, and the samples queued after it read the host's pace."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pad_ms(host_ms: float) -> float:
    """GPU ms of a spin that covers `host_ms` of host work, with a margin (at most 50 ms)."""
    return min(host_ms * 1.5 + 0.02, 50.0)


def _spin_rate(torch, index: int) -> float:
    """Cycles of torch.cuda._sleep per millisecond on this device, measured once: the fastest of a few
    readings after a spin that raises the clock.

    Measured cold, at an idle clock (345 MHz on an H100 after a pause), the rate made every later
    spin ~6x shorter than meant at the boost clock, and a calibration batch that outran its spin
    read launch gaps: a 1.4 µs kernel was judged a 24 µs one and timed with events. Read at the
    boost clock, a spin can only last longer when the clock is lower."""
    if index not in _SPIN:
        cycles = 1_000_000
        torch.cuda._sleep(20 * cycles)  # loads the module and raises the clock
        rates = []
        for _ in range(3):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            rates.append(cycles / max(begin.elapsed_time(end), 1e-3))
        _SPIN[index] = max(rates)
    return _SPIN[index]


def cuda_sync_timer() -> float:
    """A host clock that first waits for the current CUDA device (pytest-benchmark's timer under --gpuperf)."""
    import torch

    torch.cuda.synchronize()
    return time.perf_counter()
