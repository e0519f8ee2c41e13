"""A simulated CUDA device on a virtual clock, so the CUDA timer's path (method choice, flush, spins,
graphs, event arithmetic) runs in CPU-only CI, and reads the same on an idle or a busy machine.

The clock (`VirtualClock`) is shared by the device and the timer under test (`use_virtual_clock`
puts it in place of the timer module's `time`): it advances only through the simulation (the host
cost of a launch or an event record, a synchronize waiting for the queue, a function under test
that says what it costs) and by a fixed tick on every read, so no `while clock() < deadline` loop
spins forever. Python's own overhead takes no simulated time, and a stall of the real host none.

A stream (and a second one, for work a callable leaves behind): a launch
queues `ms` of work behind what is queued, starting no earlier than the host's launch (so launch
gaps happen as on a GPU); an event is stamped when the queue reaches it, and reading an event the
queue has not reached is an error, as on a GPU; synchronize waits until both queues
drain. Graph capture records launches and a replay queues them back to back. Work can be given a
host-side launch cost, which is what makes a call launch-bound, and so can recording an event
(`record_host_ms`: with a cheap call, the event pair is then most of what the host spends per sample),
and an event recorded on a drained queue can be stamped late (`idle_event_ms`).
The GPU costs a frame of events adds can be set: an event's own GPU time (`event_ms`), the late
start of a kernel queued right behind an event (`event_latency_ms`), the gap a kernel leaves
before the next one queued eagerly behind it (`gap_ms`) and the shorter one after a node of a graph
(`graph_gap_ms`; `spin_graph_gap_ms` after a spin's node), as on an H100, where a frame of events
adds ~3 µs to a kernel's duration, an eager kernel behind another starts ~1 µs after it, and a
graph node 0.16-0.45 µs after a `torch.cuda._sleep` spin but none after a real kernel.

Streams are modelled only as far as which one is current: the legacy default stream, where each
kernel (and each node of a graph replayed) can cost `legacy_kernel_ms` more, as ~0.33 µs on an H200,
or another; all share one queue.

Not modelled: a bounded launch queue (the host never blocks), capture of side-stream work.
"""
from __future__ import annotations

import contextlib
import importlib
import time
from types import SimpleNamespace

# The modules whose `time` the timer under test reads: each gets the virtual clock in its place.
TIMER_MODULES = ("pytest_gpuperf.measure.cuda_timer", "pytest_gpuperf.measure.measurement", "pytest_gpuperf.measure.timer")


class VirtualClock:
    """Simulated time, in the shape of the `time` module (perf_counter, monotonic, sleep; any other
    attribute is the real module's). Kept in ms, the device's unit, so that a wait for an event's
    stamp ends exactly on it. Every read moves the clock on by TICK_MS, about what a Python clock
    read costs, so a loop that waits for a deadline ends."""

    TICK_MS = 1e-3

    def __init__(self) -> None:
        self.now_ms = 0.0

    def perf_counter(self) -> float:
        self.now_ms += self.TICK_MS
        return self.now_ms / 1e3

    monotonic = perf_counter

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Host work that takes `seconds`."""
        self.now_ms += max(seconds, 0.0) * 1e3

    def wait_until_ms(self, t_ms: float) -> None:
        """Block until `t_ms` (a no-op when it is past)."""
        self.now_ms = max(self.now_ms, t_ms)

    def __getattr__(self, name: str):
        return getattr(time, name)


def use_virtual_clock(monkeypatch) -> VirtualClock:
    """A fresh virtual clock in place of `time` in every module of TIMER_MODULES (undone by monkeypatch)."""
    clock = VirtualClock()
    for name in TIMER_MODULES:
        monkeypatch.setattr(importlib.import_module(name), "time", clock)
    return clock


class SimDevice:
    SPIN_CYCLES_PER_MS = 1e6

    def __init__(self, clock: VirtualClock, l2_bytes: int = 50 << 20, read_bytes_per_ms: float = 3e9) -> None:
        self.clock = clock
        self.l2_bytes = l2_bytes
        self.read_bytes_per_ms = read_bytes_per_ms
        self.free_at = 0.0  # ms (the virtual clock) at which the queue drains
        self.side_free_at = 0.0  # the same for a second stream, which events on the first don't see
        self.capturing: list[float] | None = None
        self.record_host_ms = 0.0  # host cost of recording an event
        self.event_ms = 0.0  # GPU time of recording an event
        # Extra GPU time of the first kernel queued behind an event. Never quite zero on a GPU, nor here:
        # at zero a frame around a spin costs exactly what an empty pair does, the bound of the frame
        # calibration's range check, and float rounding of the stamps would decide whether it warns.
        self.event_latency_ms = 0.001
        self.gap_ms = 0.0  # extra GPU time of a kernel queued eagerly behind another kernel
        self.graph_gap_ms = 0.0  # the same after a node of a graph
        self.spin_graph_gap_ms = 0.0  # ... after a spin's node
        self.legacy_kernel_ms = 0.0  # extra GPU time of a kernel launched from the legacy default stream
        self._behind_event = False
        self.idle_event_ms = 0.0  # how late an event recorded on a drained queue is stamped
        # SM clock as a fraction of boost until `idle_cycles` spin cycles have run (a GPU waking up)
        self.idle_clock, self.idle_cycles = 1.0, 0.0
        self.torch = self._module()

    # -- the device ----------------------------------------------------------------------------
    def now_ms(self) -> float:
        """The host's time now (reading it costs nothing: the device's own look at the clock)."""
        return self.clock.now_ms

    def _busy(self, ms: float) -> None:
        """Host work of `ms`."""
        self.clock.advance(ms / 1e3)

    def _wait_until(self, t_ms: float) -> None:
        self.clock.wait_until_ms(t_ms)

    def launch(self, ms: float, host_ms: float = 0.0, node_gap_ms: float | None = None) -> None:
        """Queue `ms` of GPU work; the launch itself takes `host_ms` of host time first. Captured in a
        graph, the node leaves `node_gap_ms` (default `graph_gap_ms`) before the next one."""
        self._busy(host_ms)
        if self.capturing is not None:
            self.capturing.append((ms, self.graph_gap_ms if node_gap_ms is None else node_gap_ms))
            return
        self.free_at = max(self.free_at, self.now_ms()) + self._lead_ms() + ms + self._legacy_ms(1)

    def _legacy_ms(self, kernels: int) -> float:
        """What `kernels` kernels launched from the current stream cost more than from another."""
        return kernels * self.legacy_kernel_ms if self.streams[-1] is self.legacy else 0.0

    def _lead_ms(self) -> float:
        """What the next kernel pays before it starts: the latency behind an event, else the gap."""
        lead = self.event_latency_ms if self._behind_event else self.gap_ms
        self._behind_event = False
        return lead

    def spin(self, cycles: float) -> None:
        """torch.cuda._sleep: `cycles` SM cycles, slower while the clock is still idle."""
        idle = min(cycles, self.idle_cycles)
        self.idle_cycles -= idle
        self.launch((idle / self.idle_clock + cycles - idle) / self.SPIN_CYCLES_PER_MS,
                    node_gap_ms=self.spin_graph_gap_ms)

    def launch_on_side_stream(self, ms: float) -> None:
        """Queue work on another stream that first waits for the measured stream's queue (torch's
        `side.wait_stream(current)` pattern), then runs beside whatever is queued after it."""
        self.side_free_at = max(self.side_free_at, self.free_at, self.now_ms()) + ms

    def stamp(self) -> float:
        self.free_at = max(self.free_at, self.now_ms())
        return self.free_at

    def synchronize(self) -> None:
        """The whole device: both streams."""
        self._wait_until(max(self.free_at, self.side_free_at))
        self.free_at = max(self.free_at, self.side_free_at)

    # -- the torch surface the CUDA timer uses ----------------------------------------------------------
    def _module(self) -> SimpleNamespace:
        dev = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None
                self.timing = enable_timing

            def record(self) -> None:
                dev._busy(dev.record_host_ms)
                drained = dev.free_at <= dev.now_ms()
                self.t = dev.stamp() + (dev.idle_event_ms if drained else 0.0)
                dev.free_at = self.t + dev.event_ms
                dev._behind_event = True

            def synchronize(self) -> None:
                dev._wait_until(self.t)

            def elapsed_time(self, end: "Event") -> float:
                if not (self.timing and end.timing):
                    raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
                if self.t is None or end.t is None or dev.now_ms() < end.t:
                    raise RuntimeError("CUDA error: device not ready (an event not yet recorded or reached)")
                return end.t - self.t

        class CUDAGraph:
            def __init__(self) -> None:
                self.nodes: list[tuple[float, float]] = []  # (GPU ms, gap after it)

            def replay(self) -> None:  # the nodes run back to back: a gap after each but the last
                dev.launch(sum(ms + gap for ms, gap in self.nodes) - (self.nodes[-1][1] if self.nodes else 0.0)
                           + dev._legacy_ms(len(self.nodes) - 1))  # launch() charges one kernel

        @contextlib.contextmanager
        def graph(g: CUDAGraph, stream=None):
            dev.capturing = g.nodes
            try:
                yield
            finally:
                dev.capturing = None

        class Stream:
            def __init__(self, device=None) -> None:
                pass

            def wait_stream(self, other: "Stream") -> None:
                dev.waits.append((self, other))

        @contextlib.contextmanager
        def stream(s: Stream):
            dev.streams.append(s)
            try:
                yield
            finally:
                dev.streams.pop()

        def set_stream(s: Stream) -> None:
            dev.streams[-1] = s

        dev.legacy = Stream()
        dev.streams = [dev.legacy]  # the current stream is the last
        dev.waits = []  # (stream, the stream it waited for)

        class Tensor:
            def __init__(self, nbytes: int) -> None:
                self.nbytes = nbytes

            def add_(self, other) -> None:
                dev.launch(0.001)

        def zeros(n: int, dtype=None, device=None) -> Tensor:
            return Tensor(4 * n)

        def total(t: Tensor, dim=None, out=None) -> None:  # the L2 flush: a read of the buffer
            dev.launch(t.nbytes / dev.read_bytes_per_ms)

        cuda = SimpleNamespace(
            Event=Event, CUDAGraph=CUDAGraph, graph=graph, Stream=Stream,
            current_stream=lambda: dev.streams[-1], stream=stream, set_stream=set_stream,
            default_stream=lambda: dev.legacy,
            synchronize=self.synchronize, current_device=lambda: 0,
            _sleep=self.spin,
            get_device_properties=lambda i: SimpleNamespace(L2_cache_size=self.l2_bytes),
            memory_allocated=lambda: 0, max_memory_allocated=lambda: 0, reset_peak_memory_stats=lambda: None,
        )
        return SimpleNamespace(cuda=cuda, zeros=zeros, empty=lambda *a, **k: Tensor(4), sum=total, float32="float32")

    def kernel(self, ms: float, host_ms: float = 0.0):
        """A callable that launches one kernel of `ms` GPU time, its launch costing `host_ms`."""
        return lambda: self.launch(ms, host_ms)
