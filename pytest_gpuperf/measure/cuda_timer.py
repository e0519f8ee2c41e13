"""One CUDA measurement: warm-up and calibration, the choice of method (events, graph, queued,
device-sync), then batches of samples until the stop rule holds (rules and evidence:
docs/measurement-evidence.md)."""
from __future__ import annotations

import collections
import math
import statistics
import time
from typing import Any, Callable

from ..core.records import SEVERE_THROTTLE, CacheMode, Method, Phase
from . import calibration as calibration_mod
from .calibration import Calibration, gc_paused, low, pad_ms
from .device import ClockState, power_share, read_clocks
from .host_pace import HostPace, spin_each_ms, spin_gpu_ms
from .method import MAX_GRAPH_CALLS, graph_calls, graph_timed, launch_bound
from .measurement import CaptureFailure, Measurement, PhaseClock, TimingConfig, should_stop, tensor_bytes
from .peak_memory import call_peak
from .power_cap import (FILL_FACTOR, FILL_FIRST_MS, FILL_GAPS, POWER_CAP_AHEAD, POWER_CAP_MIN_S, POWER_CAP_STEP_S,
                        POWER_CAP_WARMUP_S, cap_clear, cap_settled, clock_matched)
from .replay_state import NODES, SPIN_MS, ReplayProbe, empty_kernel, slowed_by

#: An uncapturable call at least this long (GPU time) is timed with events around each call, as any
#: call is: the frame's leftover error and the events' ~0.5 µs resolution are under 0.5% of it.
UNCAPTURED_EVENTS_MS = 0.1
#: GPU time of a sample of a shorter uncapturable call, queued eagerly behind one spin: long enough
#: for events to resolve 0.5%, short enough that a host stall while queuing it rarely idles the device.
QUEUED_SAMPLE_MS = 0.1
#: ... and at most this much host time to queue the calls of one sample.
MAX_QUEUED_HOST_MS = 40.0
#: Work left on other streams after the measured stream finished beyond which the stream alone is
#: not timed (absolute, and as a share of the call): a host probe can be stretched by ~0.1 ms.
PENDING_TOLERANCE_MS = 0.2
PENDING_FRACTION = 0.25
#: Samples over which a batch's host queuing time is taken (longer batches fill the launch queue).
QUEUE_PROBE = 32
#: Samples of each kind in the frame calibration.
FRAME_SAMPLES = 100
#: GPU time of the spin timed in a frame: a few µs, so a clock below boost lengthens it by little.
FRAME_SPIN_MS = 0.005
#: Spins in the smaller of the frame calibration's two graphs (the larger has twice as many).
FRAME_GRAPH_SPINS = 20
#: Rounding of event times: a frame cost this close to a bound of its range is at that bound.
FRAME_COST_SLACK_MS = 1e-6
#: Calls of one warm-up, at most.
MAX_WARMUP_CALLS = 10_000
#: The warm-up reads the SM clock every WARMUP_STEP_S and ends, before its budget, once the clock is
#: up: at the device's maximum, or two readings within WARMUP_STEADY_MHZ (two of its 15 MHz steps).
WARMUP_STEP_S = 0.01
WARMUP_STEADY_MHZ = 30


def clock_up(readings: list[ClockState]) -> bool:
    """Has the warm-up raised the SM clock? The last reading is at the device's maximum, or the last
    two agree within WARMUP_STEADY_MHZ. Unknown clocks never are."""
    last = readings[-1]
    if not last.sm_clock_mhz:
        return False
    if last.max_sm_clock_mhz and last.sm_clock_mhz >= last.max_sm_clock_mhz:
        return True
    return (len(readings) >= 2 and bool(readings[-2].sm_clock_mhz)
            and abs(last.sm_clock_mhz - readings[-2].sm_clock_mhz) <= WARMUP_STEADY_MHZ)


class CudaTimer:
    """One CUDA measurement: warm-up and calibration, method choice, then batches of samples."""

    def __init__(self, fn: Callable[[], Any], config: TimingConfig, inputs: Any, prefer: str | None,
                 torch: Any = None, calibration: Calibration | None = None, loaded: bool = False,
                 baseline_clock_mhz: int | None = None) -> None:
        if torch is None:  # tests pass a simulated device (tests/sim_cuda.py)
            import torch

        self.torch = torch
        self.cal = calibration if calibration is not None else calibration_mod.default()
        self.fn = fn
        self.config = config
        self.inputs = inputs
        self.prefer = prefer
        self.index = torch.cuda.current_device()
        self.warnings: list[str] = []
        self.clocks: list[int] = []
        self.throttle: set[str] = set()
        self.long_call = False
        self.loaded = False  # the cap held this call: warmed longer, sampled unbroken (_hold_power_cap)
        self.hold = loaded  # the baseline's call was: warm longer and sample unbroken whatever the clock
        self.baseline_clock_mhz = baseline_clock_mhz  # the SM clock the baseline's samples ran at
        self.unbroken = False  # untimed calls fill the host's gaps between batches (_sample)
        self._batch_done: float | None = None  # host clock when the last batch's samples had run
        self.phases = PhaseClock()

    # -- calibration -------------------------------------------------------------------------
    def _event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def _warmup(self) -> float:
        """Call fn until its clock is up, within the warm-up time (clocks, caches, allocator); return
        its host enqueue ms.

        Sets `self.long_call` (over 10 ms a call: fewer calibration calls). The host waits for the
        device after calls 1, 2, 4, ... 64 and every 64th after. A call the power cap holds down, or
        whose baseline was sampled loaded (`self.hold`), then `_hold_power_cap`s. Where the cap has
        acted at all, the call is sampled `unbroken`: the cap can engage after the warm-up (0.1-1.2 s
        into a load), and pauses between batches can keep it from ever engaging."""
        host: list[float] = []
        started = time.perf_counter()
        with self.phases(Phase.WARMUP):
            clocks = self._warm_clock(host)
        self.torch.cuda.synchronize()
        self.long_call = (time.perf_counter() - started) / len(host) > 0.01
        self.unbroken = clocks.power_capped
        if clocks.power_limited or self.hold:
            self._hold_power_cap(seen=clocks.power_limited)
        # A stall only lengthens a launch: a low quantile of the warm calls (the first compiles) is its cost.
        warm = sorted(host[1:])
        return warm[len(warm) // 4] * 1e3

    def _warm_clock(self, host: list[float]) -> ClockState:
        """Warm fn up until the SM clock is up (`clock_up`) or `config.warmup_s` is spent; the last
        clock reading, taken with the last calls still running. Without clock readings: the budget."""
        deadline = time.perf_counter() + self.config.warmup_s
        readings: list[ClockState] = []
        while True:
            self._warm(min(WARMUP_STEP_S, max(0.0, deadline - time.perf_counter())), host)
            readings.append(read_clocks(self.index))
            if time.perf_counter() >= deadline or clock_up(readings):
                return readings[-1]

    def _hold_power_cap(self, seen: bool) -> None:
        """The cap holds this call's clock down (`seen`), or held its baseline's: warm it until the cap
        settles its clock (`cap_settled`), its clock runs at the baseline's (`clock_matched`) or for
        POWER_CAP_WARMUP_S, and sample it in an unbroken loop,
        at the clock a program calling it in a loop gets. It is `loaded` (where events or a graph time
        it) if the cap was seen or holds it at the end: a call the cap no longer holds leaves that state.
        Where the cap is far off (`cap_clear`) the warm-up ends early and the call is not loaded: a
        clock seen held down was the cap's state from an earlier, heavier call."""
        self.unbroken = True
        with self.phases(Phase.POWER_CAP):
            started = time.perf_counter()
            host: list[float] = []
            readings: list[ClockState] = []
            shares: list[float | None] = []
            queued = collections.deque() if self.long_call else None  # long calls: POWER_CAP_AHEAD at a time
            while True:  # one list: the warm-up's waits stay 64 calls apart
                self._warm(POWER_CAP_STEP_S, host, queued)
                readings.append(read_clocks(self.index))  # with the last calls still running
                shares.append(power_share(self.index))
                elapsed = time.perf_counter() - started
                may_end = elapsed >= POWER_CAP_MIN_S
                clear = may_end and cap_clear(readings, shares)
                if (elapsed >= POWER_CAP_WARMUP_S or len(host) >= MAX_WARMUP_CALLS or clear
                        or (may_end and (cap_settled(readings) or clock_matched(readings, self.baseline_clock_mhz)))):
                    break
            self.loaded = (seen and not clear) or readings[-1].power_limited
            self.torch.cuda.synchronize()

    def _warm(self, seconds: float, host: list[float], queued: collections.deque | None = None) -> None:
        """Call fn for `seconds` (at least twice, at most MAX_WARMUP_CALLS calls in all), adding each call's
        host enqueue time to `host`. With `queued` (the events of queued calls), at most POWER_CAP_AHEAD
        are queued at a time: the host's clock then keeps up with long calls' device time."""
        deadline = time.perf_counter() + seconds
        while len(host) < 2 or (time.perf_counter() < deadline and len(host) < MAX_WARMUP_CALLS):
            if queued is not None and len(queued) >= POWER_CAP_AHEAD:
                queued.popleft().synchronize()
                if time.perf_counter() >= deadline and len(host) >= 2:
                    break
            t = time.perf_counter()
            self.fn()
            host.append(time.perf_counter() - t)
            if queued is not None:
                queued.append(self._event())
                queued[-1].record()
            n = len(host)
            if n & (n - 1) == 0 or n % 64 == 0:  # a full launch queue would also inflate host times
                self.torch.cuda.synchronize()

    def _pending_ms(self) -> float:
        """Time the device stays busy after the measured stream finished one call (other streams' work).

        Read on the GPU's clock (the shortest of a few probes: a host stall only lengthens one) and on
        the host's clock around the synchronize (their median); each can only err long, so the
        smaller counts. Work really left on another stream keeps both long."""
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
        """One call's result and its peak memory: its inputs plus what it asked for (`call_peak`)."""
        value, peak = call_peak(self.torch, self.fn)
        return value, peak + tensor_bytes(self.inputs)

    # -- sampling ----------------------------------------------------------------------------
    def _pad(self, host_ms: float) -> None:
        """Busy the GPU long enough for the host to queue what follows, so no launch gap is timed."""
        self.torch.cuda._sleep(int(pad_ms(host_ms) * self.cal.spin_rate(self.torch, self.index)))

    def _read_clocks(self) -> ClockState:
        state = read_clocks(self.index)
        if state.sm_clock_mhz:
            self.clocks.append(state.sm_clock_mhz)
        self.throttle.update(state.throttle)
        return state

    def _batch(self, body: Callable[[], None], n: int, host_ms: float, flush, sync: bool,
               each_ms: float = 0.0, stamps: list[float] | None = None, fill: int = 0) -> list[float]:
        """n samples of [flush][start][body][end] queued behind a spin; raw event times in ms.

        `host_ms`: host time to queue one sample (the head spin covers two). `each_ms` > 0: a spin
        before every sample covering that much host time, where queuing a sample takes the host
        longer than the device needs to run one: a spin at the head of the batch would be eaten
        after a few samples, and the device would idle between the rest. `stamps`, if given,
        receives the host clock as each of the first QUEUE_PROBE samples starts to be queued.
        `fill`: untimed calls of body queued after the samples, which the host does not wait for:
        the device stays busy while the host reads this batch and queues the next."""
        torch = self.torch
        events = [(self._event(), self._event()) for _ in range(n)]
        with gc_paused():
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
            for _ in range(fill):
                body()
            if fill:
                events[-1][1].synchronize()
            else:
                torch.cuda.synchronize()
        self._batch_done = time.perf_counter()
        return [b.elapsed_time(e) for b, e in events]

    def _frame(self, flush) -> tuple[float, float]:
        """(GPU ms a sample's frame adds to the call in it, host ms to queue a frame: the flush and the
        event pair), taken the way samples are, once per device and cache mode.

        The GPU cost is T1 - R: T1 a frame around one short spin, R what that spin costs in a stream,
        from CUDA graphs of k and 2k spins back to back ((frame(2k) - frame(k)) / k), all alternating
        in one batch. An event sample then reads the call as a graph replay does. Outside
        [empty pair, T1] the cost cannot be right, and the empty pair's stands in. The host cost
        decides, with the call's own launches, whether one spin per batch keeps the device busy."""
        key = (self.index, flush is not None)
        if key not in self.cal.frames:
            torch = self.torch
            if flush is not None:  # its first call loads the reduction kernel: not a sample's cost
                flush()
                torch.cuda.synchronize()
            cycles = int(FRAME_SPIN_MS * self.cal.spin_rate(torch, self.index))

            def spin() -> None:
                torch.cuda._sleep(cycles)

            # The head spin covers the whole batch's enqueue, and a batch stays well inside the launch
            # queue, or frames would read host gaps.
            stamps: list[float] = []
            empty = low(self._batch(lambda: None, FRAME_SAMPLES, FRAME_SAMPLES * 0.05, flush, sync=False,
                                    stamps=stamps))
            graphs = [self._capture(spin, FRAME_GRAPH_SPINS), self._capture(spin, 2 * FRAME_GRAPH_SPINS)]
            if any(isinstance(g, CaptureFailure) for g in graphs):
                cost, problem = empty, "failed: a spin could not be captured in a CUDA graph"
            else:
                bodies = [spin, graphs[0].replay, graphs[1].replay]
                kinds = iter(range(3 * FRAME_SAMPLES))
                raw = self._batch(lambda: bodies[next(kinds) % 3](), 3 * FRAME_SAMPLES, 3 * FRAME_SAMPLES * 0.05,
                                  flush, sync=False)
                one, k_spins, two_k_spins = low(raw[0::3]), low(raw[1::3]), low(raw[2::3])
                cost = one - (two_k_spins - k_spins) / FRAME_GRAPH_SPINS
                within = empty - FRAME_COST_SLACK_MS <= cost <= one + FRAME_COST_SLACK_MS
                cost = min(max(cost, empty), one)
                problem = None if within else (
                    f"out of range (one spin {one * 1e3:.2f} µs, {FRAME_GRAPH_SPINS} and {2 * FRAME_GRAPH_SPINS} "
                    f"in graphs {k_spins * 1e3:.2f} and {two_k_spins * 1e3:.2f} µs, empty {empty * 1e3:.2f} µs)")
            if problem:
                cost = empty
                self.warnings.append(f"frame calibration {problem}: only the empty event pair's cost is subtracted")
            gaps = [b - a for a, b in zip(stamps, stamps[1:])]  # a stall inflates one sample, not all
            self.cal.frames[key] = (cost, statistics.median(gaps) * 1e3)
        return self.cal.frames[key]

    def _timer_overhead_ms(self, flush) -> float:
        return self._frame(flush)[0]

    def _free_bytes(self) -> float:
        """Device memory free outside torch's cache (a graph's private pool cannot use its blocks);
        unbounded where torch cannot say. A graph of calls whose outputs are not reused within the
        capture (work on other streams) holds one footprint per call."""
        get = getattr(self.torch.cuda, "mem_get_info", None)
        return get(self.index)[0] if get is not None else math.inf

    def _flush_ms(self, flush) -> float:
        """GPU time of one L2 flush, measured once per device: what a cold sample adds ahead of the call."""
        if flush is None:
            return 0.0
        if self.index not in self.cal.flush_ms:
            raw = self._batch(flush, 5, 0.05, None, sync=False)
            self.cal.flush_ms[self.index] = max(low(raw) - self._timer_overhead_ms(None), 0.0)
        return self.cal.flush_ms[self.index]

    def _sample(self, body: Callable[[], None], host_ms: float, est_ms: float, divisor: int, flush,
                sync: bool, each_ms: float = 0.0, gap_ms: float = 0.0) -> tuple[list[float], list[float]]:
        """Batches of samples until the stop rule holds; returns (samples, batch medians) in ms per call.
        `gap_ms` is taken off once per sample, with the frame's cost: the node gap the frame
        calibration's spin graph holds (node_gap.py)."""
        overhead = self._timer_overhead_ms(flush)
        flush_ms = self._flush_ms(flush)
        samples: list[float] = []
        batch_medians: list[float] = []
        pace = HostPace(each_ms, est_ms, flush_ms, adapt=not sync)
        gaps_ms: list[float] = []
        restarted = False  # once at most: a hold that finds the cap far off leaves the call not loaded

        def next_batch() -> list[float] | None:
            """One batch's raw times, or None when the host fell behind the spins ahead of samples."""
            if self._batch_done is not None:  # the host's time between two batches
                gaps_ms.append((time.perf_counter() - self._batch_done) * 1e3)
            spin_ms = spin_gpu_ms(pace.each_ms)
            per_batch = max(1, min(2000, math.ceil(self.config.batch_s * 1e3 / (est_ms + flush_ms + spin_ms + 0.005))))
            fill = 0
            if self.unbroken and not sync and pace.each_ms == 0:  # a host that needs spins has no time to fill
                fill_ms = max([FILL_FIRST_MS] + [FILL_FACTOR * gap for gap in gaps_ms[-FILL_GAPS:]])
                fill = min(2000, int(min(fill_ms, self.config.batch_s * 1e3) / est_ms))  # none beside long calls
            stamps: list[float] = []
            raw = self._batch(body, per_batch, host_ms, flush, sync, pace.each_ms, stamps=stamps, fill=fill)
            return raw if pace.keep(stamps) else None

        self._batch_done = None
        if self.loaded:  # a capped call's first batch runs slow: a settling batch, dropped (measurement-evidence.md)
            with self.phases(Phase.SETTLING):
                next_batch()
        started = time.perf_counter()
        with self.phases(Phase.SAMPLES):
            while not should_stop(samples, batch_medians, self.config, started):
                raw = next_batch()
                if raw is None:
                    continue
                batch = [max((t - overhead - gap_ms) / divisor, 0.0) for t in raw]
                samples.extend(batch)
                batch_medians.append(statistics.median(batch))
                if self._read_clocks().power_limited and not (self.loaded or restarted):  # the cap engaged only now
                    restarted = True
                    self.phases.move(Phase.SAMPLES, Phase.RESTART, time.perf_counter() - started)
                    self._hold_power_cap(seen=True)
                    self.clocks.clear()  # read before the cap held the clock
                    self._batch_done = None
                    with self.phases(Phase.SETTLING):
                        next_batch()  # the cap engaged: a settling batch, as a loaded call's
                    samples, batch_medians, started = [], [], time.perf_counter()
        self.warnings.extend(pace.warnings)
        return samples, batch_medians

    def _capture(self, fn: Callable[[], Any], calls: int) -> Any:
        """`calls` calls of fn captured in one CUDA graph, or the CaptureFailure that stopped it."""
        torch = self.torch
        caller = torch.cuda.current_stream()
        # Warm up and capture on the caller's stream where it may capture (not the legacy default
        # stream): work fn puts on its caller's stream (a backward on its forward's stream) is then
        # captured in line, and a forward inside fn builds its autograd nodes on the stream of the
        # leaves' AccumulateGrad nodes (on a side stream, torch warns of a stream mismatch).
        stream = caller if caller != torch.cuda.default_stream() else torch.cuda.Stream()
        stream.wait_stream(caller)
        graph = None
        try:
            with torch.cuda.stream(stream):
                fn()
            caller.wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
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
        # Undo what the failed capture left: restore the caller's stream, free the graph (no exception
        # kept: its frames hold it), and end a capture so torch's CUDA RNG is reset (or the next
        # torch.randn raises "Offset increment outside graph capture encountered unexpectedly").
        torch.cuda.set_stream(caller)
        del graph
        torch.cuda.synchronize()
        scratch = torch.zeros(1, device=f"cuda:{self.index}")
        scratch.add_(1)  # loaded before the capture
        clean = torch.cuda.CUDAGraph()
        with torch.cuda.graph(clean):
            scratch.add_(1)
        return failure

    def _slow_replay_us(self, fresh: float | None) -> float | None:
        """µs per node graph replays on this stream run above `fresh`, a fresh process's reading
        (replay_state.py); None below SLOW_REPLAY_US, without a fresh reading, or where the probe
        cannot run (once per device, with a warning). The probe's graphs are captured once per device,
        as the call's own."""
        if fresh is None:
            return None
        probe = self.cal.replay_probes.get(self.index)
        if probe is None:
            graphs = [self._capture(lambda: empty_kernel(self.torch), nodes) for nodes in (NODES, 2 * NODES)]
            failed = next((g for g in graphs if isinstance(g, CaptureFailure)), None)
            spin_cycles = int(SPIN_MS * self.cal.spin_rate(self.torch, self.index))
            probe = failed or ReplayProbe(self.torch, (graphs[0], graphs[1]), spin_cycles)
            self.cal.replay_probes[self.index] = probe
            if failed:
                self.warnings.append(f"the replay-state probe could not be captured ({failed}): slowed graph "
                                     "replays are not detected in this process")
        if isinstance(probe, CaptureFailure):
            return None
        return slowed_by(probe.per_node_us(), fresh)

    def _gpu_ms(self, flush, host_ms: float) -> float:
        """GPU time of one call with the queue kept full, so launch gaps don't count (calibration)."""
        n = 3 if self.long_call else 9
        raw = self._batch(self.fn, n, max(0.5, n * host_ms / 2), flush, sync=False)  # the spin covers all n
        return max(low(raw) - self._timer_overhead_ms(flush), 1e-4)

    def _events(self, host_ms: float, gpu_ms: float, flush_ms: float, flush,
                gap_ms: float) -> tuple[list[float], list[float]]:
        """Samples of one call between two events. Where the host barely keeps up, each sample gets a
        spin of the host's deficit (and a little more), so the device never idles between samples."""
        each_ms = spin_each_ms(host_ms, gpu_ms, flush_ms)
        return self._sample(self.fn, host_ms, gpu_ms, 1, flush, sync=False, each_ms=each_ms, gap_ms=gap_ms)

    def _queued(self, call_host_ms: float, host_ms: float, gpu_ms: float, flush,
                gap_ms: float) -> tuple[int, list[float], list[float]]:
        """(calls per sample, samples, batch medians) of a short uncapturable call: a few calls queued
        behind a spin that covers their launches, about QUEUED_SAMPLE_MS of GPU time a sample."""
        calls = max(1, min(MAX_GRAPH_CALLS, math.ceil(QUEUED_SAMPLE_MS / max(gpu_ms, 1e-4)),
                           math.floor(MAX_QUEUED_HOST_MS / max(call_host_ms, 1e-3))))

        def body() -> None:
            for _ in range(calls):
                self.fn()

        queue_ms = host_ms + call_host_ms * (calls - 1)
        samples, batches = self._sample(body, queue_ms, gpu_ms * calls, calls, flush, sync=False,
                                        each_ms=queue_ms, gap_ms=gap_ms)
        return calls, samples, batches

    def _flushes(self, footprint: int) -> bool:
        """Flush the L2 before each sample? In cold mode, where the call's inputs and allocations fit in
        the L2. A larger call evicts its own inputs before it reads them again, so its samples run back
        to back: each starts as it would in a loop, without its inputs in the L2, and writes back the
        lines the call before it left dirty, as a loop's call does. A flush would leave the L2 clean
        and its next sample would not pay for those writes (docs/measurement.md, "Cold L2")."""
        return self.config.cache == CacheMode.COLD.value and footprint <= self.cal.l2_bytes(self.torch, self.index)

    def run(self) -> Measurement:
        """Measure on the caller's stream, or on the calibration's own stream where the caller is on the
        legacy default stream: kernels replayed from that stream read ~0.33 µs per kernel above
        CUPTI's durations on an H200, from a stream of their own within 0.07 µs (docs/measurement.md)."""
        torch = self.torch
        with self.phases(Phase.CALIBRATION):  # what no other phase claims
            if torch.cuda.current_stream() != torch.cuda.default_stream():
                m = self._run()
            else:
                with self.cal.on_stream(torch, self.index):  # the caller's next work sees what the samples wrote
                    m = self._run()
        m.phases = self.phases.seconds
        return m

    def _run(self) -> Measurement:
        # Before the warm-up: the first lookup in a process may measure the gap in a child process.
        node_gap = self.cal.node_gap(self.index)
        gap_ms = node_gap.for_cache(self.config.cache)
        call_host_ms = self._warmup()
        pending = self._pending_ms()
        value, peak = self._peak_memory()
        flush = self.cal.flush(self.torch, self.index) if self._flushes(peak) else None
        host_ms = call_host_ms + self._frame(flush)[1]  # to queue one sample: the call and its frame
        gpu_ms = self._gpu_ms(flush, host_ms)
        flush_ms = self._flush_ms(flush)
        self._read_clocks()
        calls = graph_calls(gpu_ms)  # per sample, if a graph times it
        if pending > max(PENDING_TOLERANCE_MS, PENDING_FRACTION * gpu_ms):
            self.warnings.append(
                f"work was still running {pending:.3f} ms after the measured stream finished: the callable "
                "uses other streams; each sample waits for the whole device (times include a synchronize)")
            method, calls = Method.DEVICE_SYNC.value, 1
            samples, batches = self._sample(self.fn, host_ms, gpu_ms + pending, 1, flush, sync=True)
            gap_ms = 0.0  # a synchronize per sample: the gap is the least of what a sample adds
        elif graph_timed(gpu_ms, call_host_ms, flush_ms, flush is not None, self.prefer,
                         room=self._free_bytes() >= calls * peak):
            graph = self._capture(self.fn, calls)
            if not isinstance(graph, CaptureFailure):
                method = Method.GRAPH.value
                samples, batches = self._sample(graph.replay, 0.05, gpu_ms * calls, calls, flush, sync=False,
                                                gap_ms=gap_ms)
            elif gpu_ms >= UNCAPTURED_EVENTS_MS or not launch_bound(gpu_ms, call_host_ms, flush_ms, self.prefer):
                method, calls = Method.EVENTS.value, 1
                samples, batches = self._events(host_ms, gpu_ms, flush_ms, flush, gap_ms)
            else:
                self.warnings.append(f"CUDA graph capture failed ({graph}); timed queued eager calls")
                method = Method.QUEUED.value
                calls, samples, batches = self._queued(call_host_ms, host_ms, gpu_ms, flush, gap_ms)
        else:
            method, calls = Method.EVENTS.value, 1
            samples, batches = self._events(host_ms, gpu_ms, flush_ms, flush, gap_ms)
        severe = sorted(self.throttle & SEVERE_THROTTLE)
        if severe:
            self.warnings.append(f"GPU clocks were throttled during the measurement ({', '.join(severe)})")
        slow_replay = self._slow_replay_us(node_gap.node_us) if method == Method.GRAPH.value else None
        return Measurement(
            samples, method, calls, self.config.cache, batches, flushed=flush is not None, value=value,
            peak_memory_bytes=peak,
            node_gap_ms=gap_ms, sm_clock_mhz=int(statistics.median(self.clocks)) if self.clocks else None,
            throttle=sorted(self.throttle), warnings=self.warnings,
            loaded=self.loaded and method in (Method.EVENTS.value, Method.GRAPH.value), slow_replay_us=slow_replay,
        )
