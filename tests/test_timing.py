"""measure/ (timer, CUDA timer, stats) on the CPU: statistics, the stop rule and the host-clock path (CUDA paths run in perf_tests/test_harness.py)."""
from __future__ import annotations

import contextlib

import math
import random
import statistics

import pytest

from pytest_gpuperf.core.records import UNBOUNDED, Entry, Statistics
from pytest_gpuperf.measure.cuda_timer import graph_timed, launch_bound
from pytest_gpuperf.measure.stats import ci_relative, summarize
from pytest_gpuperf.measure.timer import TimingConfig, measure


def test_summarize_order_statistics_and_robust_noise() -> None:
    s = summarize([3.0, 1.0, 100.0, 2.0, 4.0])
    assert isinstance(s, Statistics) and s.data == (3.0, 1.0, 100.0, 2.0, 4.0)  # the samples, in order
    assert (s.median_ms, s.min_ms, s.max_ms, s.samples) == (3.0, 1.0, 100.0, 5)
    assert s.noise == pytest.approx(1.4826 * 1.0 / 3.0)  # MAD ignores the outlier
    assert s.ci_ms.low <= s.median_ms <= s.ci_ms.high
    one = summarize([300.0])  # a call longer than the budget: one sample bounds no interval
    assert one.ci_ms == UNBOUNDED and not one.ci_ms.bounded and one.samples == 1


def test_ci_comes_from_batch_medians_when_there_are_enough() -> None:
    samples = [1.0] * 300  # no spread inside any batch ...
    drifting = [1.0, 1.02, 0.98, 1.03, 0.97]  # ... but the batches drift (clocks, power)
    assert ci_relative(samples) == 0.0
    half = ci_relative(samples, drifting)
    assert half == pytest.approx(2.78 * 0.02549509756796392 / math.sqrt(5), rel=1e-3)


def test_one_disturbed_batch_does_not_widen_the_ci_but_a_settling_trend_does() -> None:
    samples = [0.0576] * 400
    # H100 softmax batches: seven agree within 0.2%, one was interrupted
    disturbed = [0.0577, 0.0577, 0.0580, 0.0731, 0.0573, 0.0573, 0.0577, 0.0576]
    calm = [m for m in disturbed if m < 0.07]
    assert ci_relative(samples, disturbed) == pytest.approx(ci_relative(samples, calm))
    assert ci_relative(samples, disturbed) < 0.005
    # a matmul whose batches were still settling: no single outlier, so every batch counts
    settling = [0.2086, 0.2033, 0.1997, 0.1950, 0.1972, 0.1941, 0.1929, 0.1897, 0.1878, 0.1880, 0.1864]
    half = ci_relative([0.194] * 400, settling)
    assert half == pytest.approx(2.23 * statistics.stdev(settling) / math.sqrt(11) / 0.194, rel=1e-3)
    # four batches are too few to call one of them disturbed
    few = [0.0577, 0.0577, 0.0731, 0.0576]
    assert ci_relative(samples, few) > 0.05


def test_cpu_functions_are_timed_with_the_host_clock_in_batches(virtual_clock) -> None:
    def spin() -> int:  # 0.5 ms of host work
        virtual_clock.advance(5e-4)
        return 7

    config = TimingConfig(budget_s=0.2, batch_s=0.02)
    m = measure(spin, config)
    assert m.value == 7 and m.method == "cpu"
    assert 0.45 <= m.median_ms <= 1.5
    assert m.stats.samples >= 10 and len(m.batch_medians) >= TimingConfig.min_batches
    # the first call, warm-up and sampling, which ends at most one batch past the budget
    assert m.wall_s < 5e-4 + config.warmup_s + config.budget_s + config.batch_s
    assert m.wall_s >= m.measured_s > 0


def test_a_budget_too_small_for_one_batch_still_measures_one() -> None:
    m = measure(lambda: sum(range(100)), TimingConfig(budget_s=1e-9, warmup_s=0.0))
    assert m.stats.samples >= 1 and m.median_ms > 0


def test_precision_target_stops_early_on_a_steady_function(virtual_clock) -> None:
    m = measure(lambda: virtual_clock.advance(2e-5), TimingConfig(budget_s=5.0, precision=0.5, batch_s=0.01))
    assert m.wall_s < 2.0  # the 50% target is met long before the 5 s budget


@pytest.mark.parametrize("gpu_ms, host_ms, flush_ms, prefer, graph", [
    (0.005, 0.001, 0.04, None, True),     # below what events resolve: a graph whatever the host does
    (0.027, 0.015, 0.04, None, False),    # the host outruns call + flush: events (a graph without the flush)
    (0.027, 0.015, 0.0, None, True),      # warm cache, no flush to hide the launch behind: a graph
    (0.5, 0.3, 0.04, None, True),         # launches slower than half the sample: a graph
    (0.027, 0.015, 0.04, "graph", True),  # the baseline's method where it can measure honestly
    (0.005, 0.001, 0.04, "events", False),
    (0.5, 0.3, 0.04, "events", False),    # an events baseline keeps events while a spin per sample can cover the host
    (0.5, 0.6, 0.04, "events", True),     # ... but not once the launch outlasts the whole sample
])
def test_launch_bound_counts_the_flush_in_a_samples_gpu_time(gpu_ms, host_ms, flush_ms, prefer, graph) -> None:
    assert launch_bound(gpu_ms, host_ms, flush_ms, prefer) is graph


@pytest.mark.parametrize("gpu_ms, flushed, prefer, graph", [
    (0.05, False, None, True),       # back to back: a graph times the same calls without the event pair
    (0.05, True, None, False),       # a cold sample behind its own flush: one call between events
    (0.099, False, None, True),
    (0.1, False, None, False),       # from 0.1 ms up the pair's leftover is under 0.5%
    (0.05, False, "events", False),  # a baseline's method is kept
    (0.05, False, "queued", False),
    (0.5, False, "graph", True),
])
def test_calls_sampled_back_to_back_are_timed_in_graphs_below_a_tenth_of_a_ms(gpu_ms, flushed, prefer, graph) -> None:
    assert graph_timed(gpu_ms, 0.01, 0.0, flushed, prefer) is graph


def test_a_call_sampled_back_to_back_keeps_events_where_its_graph_would_not_fit() -> None:
    assert not graph_timed(0.05, 0.01, 0.0, False, room=False)
    assert graph_timed(0.005, 0.01, 0.0, False, room=False)  # too short for events whatever it costs


# ---- the CUDA path on a simulated device (tests/sim_cuda.py) ----------------------------------------------------

@pytest.fixture
def sim(monkeypatch, virtual_clock):
    from pytest_gpuperf.measure import calibration, node_gap
    from sim_cuda import SimDevice

    monkeypatch.setattr(calibration, "_DEFAULT", calibration.Calibration())  # per-device calibrations of earlier tests
    monkeypatch.setattr(node_gap, "lookup", lambda index: node_gap.NodeGap())  # no CUPTI child for the sim
    # a ~370 µs flush: times scaled up ~10x from an H100 so that Python's own overhead stays negligible
    return SimDevice(virtual_clock, l2_bytes=525 << 20, read_bytes_per_ms=3e9)


def _run(sim, fn, prefer=None, cache="cold", loaded=False, baseline_clock_mhz=None):
    from pytest_gpuperf.measure import cuda_timer as timing

    config = TimingConfig(cache=cache, budget_s=0.15, warmup_s=0.05, batch_s=0.01)
    return timing.CudaTimer(fn, config, (), prefer, torch=sim.torch, loaded=loaded,
                            baseline_clock_mhz=baseline_clock_mhz).run()


@pytest.mark.parametrize("footprint_mib, flushed", [(1, True), (600, False)])
def test_sim_a_cold_call_larger_than_the_l2_runs_back_to_back(sim, footprint_mib, flushed) -> None:
    """Cold mode flushes the L2 before each sample of a call that fits in it (the sim's L2: 525 MiB);
    a larger call's samples run back to back, no flush queued, and read the call alone either way."""
    flushes = []
    flush_read = sim.torch.sum
    sim.torch.sum = lambda *a, **k: (flushes.append(1), flush_read(*a, **k))
    sim.torch.cuda.max_memory_allocated = lambda: footprint_mib << 20
    m = _run(sim, sim.kernel(0.25, host_ms=0.05))
    assert m.flushed is flushed
    assert (len(flushes) > m.stats.samples) is flushed
    assert m.median_ms == pytest.approx(0.25, rel=0.02)
    assert not _run(sim, sim.kernel(0.25, host_ms=0.05), cache="warm").flushed


def test_sim_a_call_whose_launch_the_flush_hides_is_timed_with_events(sim) -> None:
    m = _run(sim, sim.kernel(0.25, host_ms=0.15))
    assert m.method == "events"
    assert m.median_ms == pytest.approx(0.25, rel=0.05)


def test_sim_the_latency_of_a_kernel_between_events_is_not_timed(sim) -> None:
    """A kernel queued behind an event starts late (0.03 ms here, ~2 µs on an H100); behind another
    kernel it does not. Subtracting only what an empty event pair reads, a 0.25 ms call read 0.28."""
    sim.event_latency_ms = 0.03
    m = _run(sim, sim.kernel(0.25, host_ms=0.15))
    assert m.method == "events"
    assert m.median_ms == pytest.approx(0.25, rel=0.03)


def test_sim_events_and_graphs_both_read_a_call_as_a_graph_replays_it(sim) -> None:
    """With an event pair's own cost, a kernel's latency behind an event, a gap between kernels
    queued eagerly and a shorter one between graph nodes (H100-like, scaled 10x), both methods read
    the kernel plus the graph's gap. A frame cost taken from two eager spins back to back (2 T1 - T2)
    left the eager gap in every event sample: 0.26 here."""
    sim.event_ms, sim.event_latency_ms, sim.gap_ms, sim.graph_gap_ms = 0.013, 0.017, 0.01, 0.001
    events = _run(sim, sim.kernel(0.25, host_ms=0.15))
    graph = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph")
    assert (events.method, graph.method) == ("events", "graph")
    assert events.median_ms == pytest.approx(0.251, rel=0.01)
    assert graph.median_ms == pytest.approx(0.251, rel=0.01)
    assert not events.warnings


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_sim_the_node_gap_of_the_cache_mode_is_subtracted_once_per_sample(sim, monkeypatch, cache) -> None:
    """A graph node leaves a gap after the frame calibration's spin but none after a real kernel (as
    on H100s and H200s): with the spin's gap known (CUPTI's measurement, node_gap.py) and taken off
    once per sample, both methods read the kernel alone, as a profiler does; the other cache mode's
    gap is not used. Taken off once per call, a graph of 50 calls read 0.23 ms."""
    from pytest_gpuperf.measure import node_gap

    sim.event_ms, sim.event_latency_ms, sim.gap_ms, sim.spin_graph_gap_ms = 0.013, 0.017, 0.01, 0.02
    gaps = {"cold": 0.02, "warm": 0.04} if cache == "cold" else {"cold": 0.04, "warm": 0.02}
    monkeypatch.setattr(node_gap, "lookup", lambda index: node_gap.NodeGap(gaps["cold"], gaps["warm"]))
    events = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="events", cache=cache)
    graph = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph", cache=cache)
    assert (events.method, graph.method) == ("events", "graph")
    assert events.median_ms == pytest.approx(0.25, abs=0.005)  # 0.27 with the gap in, 0.23 with the wrong one
    assert graph.median_ms == pytest.approx(0.25, abs=0.005)
    assert events.node_gap_ms == graph.node_gap_ms == 0.02


def test_sim_a_graph_timed_call_says_when_the_process_replays_graphs_slower_than_a_fresh_one(sim, monkeypatch) -> None:
    """The replay probe (replay_state.py) times a node of a graph of empty kernels after each
    graph-timed measurement; where that runs SLOW_REPLAY_US or more above the fresh process's reading
    (the node-gap child's), the result carries the difference. Events-timed calls are not probed."""
    from pytest_gpuperf.measure import calibration, node_gap

    monkeypatch.setattr(node_gap, "lookup", lambda index: node_gap.NodeGap(node_us=1.0))
    sim.spin_graph_gap_ms = 0.00102  # the empty kernel's node: 1.02 µs, within the threshold of 1.0
    assert _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph").slow_replay_us is None
    sim.spin_graph_gap_ms = 0.0012
    # The sim fixes a node's gap when it is captured (a GPU slows graphs captured before, too).
    monkeypatch.setattr(calibration, "_DEFAULT", calibration.Calibration())
    slowed = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph")
    assert slowed.method == "graph" and slowed.slow_replay_us == pytest.approx(0.2, abs=0.01)
    assert _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="events").slow_replay_us is None


def test_sim_a_replay_probe_that_cannot_be_captured_costs_the_measurement_nothing(sim, monkeypatch) -> None:
    """Where the probe's graphs cannot be captured, the measurement stands, says so once, and the
    probe is not tried again in the process."""
    from pytest_gpuperf.measure import node_gap

    monkeypatch.setattr(node_gap, "lookup", lambda index: node_gap.NodeGap(node_us=1.0))
    spin = sim.torch.cuda._sleep

    def sleep(cycles):
        if cycles == 0:
            raise RuntimeError("operation not permitted when stream is capturing")
        spin(cycles)

    sim.torch.cuda._sleep = sleep
    first = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph")
    assert first.method == "graph" and first.slow_replay_us is None
    assert first.median_ms == pytest.approx(0.25, rel=0.02)
    assert any("replay-state probe could not be captured (RuntimeError" in w for w in first.warnings)
    again = _run(sim, sim.kernel(0.25, host_ms=0.15), prefer="graph")
    assert again.slow_replay_us is None and not any("replay-state" in w for w in again.warnings)


@pytest.mark.parametrize("caller", ["legacy", "own"])
def test_sim_a_caller_on_the_legacy_stream_is_timed_on_a_stream_of_the_timers(sim, caller) -> None:
    """Kernels launched from the legacy default stream cost more each (~0.33 µs on an H200, scaled
    10x here): a caller there is timed on the calibration's stream, which first waits for the
    caller's work and which the caller then waits for; a caller on a stream of its own is timed on it."""
    from pytest_gpuperf.measure import calibration

    sim.legacy_kernel_ms = 0.0033
    side = sim.torch.cuda.Stream()
    with contextlib.ExitStack() as stack:
        if caller == "own":
            stack.enter_context(sim.torch.cuda.stream(side))
        streams_before = list(sim.streams)
        graph = _run(sim, sim.kernel(0.01, host_ms=0.05))
        events = _run(sim, sim.kernel(0.25, host_ms=0.01))
        assert sim.streams == streams_before
    assert (graph.method, events.method) == ("graph", "events")
    assert graph.median_ms == pytest.approx(0.01, rel=0.02)  # 0.0133 timed from the legacy stream
    assert events.median_ms == pytest.approx(0.25, rel=0.002)
    timers = calibration.default().streams
    if caller == "legacy":
        assert sim.waits[0] == (timers[0], sim.legacy) and sim.waits[-1] == (sim.legacy, timers[0])
    else:
        assert not timers and all(waiter is side for waiter, _ in sim.waits)


def test_sim_events_samples_keep_the_device_busy_when_the_event_pair_is_slow_to_queue(sim) -> None:
    """The call's own launch is cheap (events, not a graph), but recording the pair takes the host
    longer than the call takes the device: without a spin per sample the device would idle and
    the pair would time the host's queuing (0.12 ms here)."""
    sim.record_host_ms = 0.15
    m = _run(sim, sim.kernel(0.12, host_ms=0.03), cache="warm")  # a launch of a quarter of the call
    assert m.method == "events"
    assert m.median_ms == pytest.approx(0.12, rel=0.05)


def test_sim_spins_are_sized_at_the_boost_clock_when_the_gpu_wakes_up_idle(sim) -> None:
    """Read once at an idle clock (a sixth of boost here), the spin rate made every later spin a
    sixth as long as meant, and calibration batches outran their spins."""
    from pytest_gpuperf.measure import calibration

    sim.idle_clock, sim.idle_cycles = 1 / 6, 5e6
    assert calibration.default().spin_rate(sim.torch, 0) == pytest.approx(sim.SPIN_CYCLES_PER_MS, rel=0.05)


@pytest.mark.parametrize("cache, footprint_mib, method", [
    ("cold", 1, "events"), ("cold", 600, "graph"), ("warm", 1, "graph")])
def test_sim_a_call_sampled_back_to_back_is_timed_in_a_graph(sim, cache, footprint_mib, method) -> None:
    """A 0.05 ms call the host keeps up with: behind a flush of its own per sample (cold, fits in the
    sim's 525 MiB L2) it is one call between events; with samples back to back (larger than the L2,
    or warm) a graph of calls runs the same work without the event pair's leftover."""
    sim.event_ms, sim.event_latency_ms, sim.gap_ms, sim.graph_gap_ms = 0.013, 0.017, 0.01, 0.001
    sim.torch.cuda.max_memory_allocated = lambda: footprint_mib << 20
    m = _run(sim, sim.kernel(0.05, host_ms=0.01), cache=cache)
    assert m.method == method
    assert m.median_ms == pytest.approx(0.051 if method == "graph" else 0.05, rel=0.02)


def test_sim_a_call_sampled_back_to_back_whose_graph_would_not_fit_keeps_events(sim) -> None:
    """50 calls of a 600 MiB footprint need more than the 8 GiB free: a capture that keeps each call's
    memory (work on other streams) could run the device out of memory, so events time it."""
    sim.torch.cuda.max_memory_allocated = lambda: 600 << 20
    sim.torch.cuda.mem_get_info = lambda index=0: (8 << 30, 80 << 30)
    m = _run(sim, sim.kernel(0.05, host_ms=0.01))
    assert m.method == "events" and not m.flushed


def test_sim_a_call_sampled_back_to_back_that_cannot_be_captured_keeps_events(sim) -> None:
    def fn() -> None:
        if sim.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")
        sim.launch(0.05, host_ms=0.01)

    m = _run(sim, fn, cache="warm")
    assert m.method == "events" and not m.warnings
    assert m.median_ms == pytest.approx(0.05, rel=0.02)


def _clock_reads(sim, monkeypatch, states, read_ms=1.0):
    """NVML read as `states` say, each read costing the host `read_ms` (a slow NVML), the last state
    repeated; returns the device's idle ms between sampling batches, filled in after the run."""
    from pytest_gpuperf.measure import cuda_timer as timing

    reads = iter(states)
    last = [states[0]]

    def read(index):
        sim.clock.advance(read_ms / 1e3)
        last[0] = next(reads, last[0])
        return last[0]

    monkeypatch.setattr(timing, "read_clocks", read)
    idle: list[float] = []
    sampling = [False]
    launch, sample = sim.launch, timing.CudaTimer._sample

    def launch_and_count(ms, host_ms=0.0, node_gap_ms=None):
        if sampling[0] and sim.capturing is None:
            idle.append(max(sim.now_ms() + host_ms - sim.free_at, 0.0))
        launch(ms, host_ms, node_gap_ms)

    def sample_and_count(self, *args, **kwargs):
        sampling[0] = True
        try:
            return sample(self, *args, **kwargs)
        finally:
            sampling[0] = False

    monkeypatch.setattr(sim, "launch", launch_and_count)
    monkeypatch.setattr(timing.CudaTimer, "_sample", sample_and_count)
    return idle


@pytest.mark.parametrize("host_ms, cache, method", [(0.15, "warm", "graph"), (0.01, "cold", "events")])
@pytest.mark.parametrize("clock_mhz, reasons, loaded, unbroken", [
    (1965, [], False, False), (1965, ["sw_power_cap"], False, True), (1400, ["sw_power_cap"], True, True)])
def test_sim_a_call_the_power_cap_holds_down_is_warmed_longer_and_sampled_in_an_unbroken_loop(
        sim, monkeypatch, clock_mhz, reasons, loaded, unbroken, host_ms, cache, method) -> None:
    """With the clock held down, the call is warmed up a second longer, and calls queued after each
    batch keep the device busy while the host reads it (here 1 ms per NVML read), as a loop would:
    the pauses had let the cap raise the clock. NVML keeps the cap's reason set after the load that
    raised it: at boost clock the reason alone fills the pauses (the cap may engage later), without
    the longer warm-up or `loaded`."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    idle = _clock_reads(sim, monkeypatch, [ClockState(clock_mhz, reasons, 1980)])
    calls = []
    kernel = sim.kernel(0.25, host_ms=host_ms)

    def fn() -> None:
        calls.append(1)
        kernel()

    m = _run(sim, fn, cache=cache)
    assert m.loaded is loaded and m.method == method
    assert ("power cap" in m.phases) is loaded
    if loaded:  # a clock the cap holds steady: the longer warm-up ends once it has settled
        assert timing.POWER_CAP_MIN_S <= m.phases["power cap"] < timing.POWER_CAP_WARMUP_S / 2
        assert len(calls) * 0.25e-3 > timing.POWER_CAP_MIN_S  # the calls' GPU seconds
    assert m.median_ms == pytest.approx(0.25, rel=0.05)
    gaps = len(m.batch_medians) - 1  # between sampled batches (a loaded call's settling batch absorbs the first)
    between = sum(idle[1:])
    assert between < 0.01 * gaps if unbroken else between >= 0.99 * gaps  # else each waits 1 ms for the host


@pytest.mark.parametrize("after_hold, loaded", [(1980, False), (1400, True)])
def test_sim_a_call_whose_baseline_was_loaded_is_warmed_longer_and_sampled_unbroken_at_boost_clock(
        sim, monkeypatch, after_hold, loaded) -> None:
    """The cap engages up to a second into a load, and pauses between batches can keep it from ever
    engaging: a call whose baseline was sampled loaded is warmed longer and sampled in an unbroken
    loop whatever its warm-up's clock, so both sides of a comparison are sampled alike. It is
    `loaded` only if the cap holds it by the end of that longer warm-up."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    reasons = ["sw_power_cap"] if after_hold < 1900 else []
    idle = _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980), ClockState(after_hold, reasons, 1980)])
    calls = []
    kernel = sim.kernel(0.25, host_ms=0.01)

    def fn() -> None:
        calls.append(1)
        kernel()

    m = _run(sim, fn, loaded=True)
    assert m.loaded is loaded and m.method == "events"
    if loaded:  # held steady by the cap: settled
        assert timing.POWER_CAP_MIN_S <= m.phases["power cap"] < timing.POWER_CAP_WARMUP_S / 2
    else:  # the cap never engaged: the whole longer warm-up, in case it engages late
        assert len(calls) * 0.25e-3 > timing.POWER_CAP_WARMUP_S  # the calls' GPU seconds
    assert sum(idle[1:]) < 0.01 * (len(m.batch_medians) - 1)


@pytest.mark.parametrize("baseline_mhz, matched", [(1965, True), (1600, False), (None, False)])
def test_sim_a_loaded_call_at_its_baselines_clock_ends_its_longer_warm_up(sim, monkeypatch, baseline_mhz,
                                                                           matched) -> None:
    """A call whose baseline was loaded, now at boost clock: where the baseline's samples ran at that
    clock too (within POWER_CAP_SETTLED_MHZ) both sides are sampled alike, and the longer warm-up ends
    after POWER_CAP_MIN_S; at another clock, or none recorded, it takes the whole warm-up."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980)], read_ms=0.0)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01), loaded=True, baseline_clock_mhz=baseline_mhz)
    if matched:
        assert timing.POWER_CAP_MIN_S <= m.phases["power cap"] < timing.POWER_CAP_WARMUP_S / 2
    else:
        assert m.phases["power cap"] >= timing.POWER_CAP_WARMUP_S
    assert not m.loaded


def test_clock_matched_needs_four_readings_near_each_other_and_the_baseline():
    from pytest_gpuperf.measure.device import ClockState
    from pytest_gpuperf.measure.power_cap import POWER_CAP_READS, clock_matched

    steady = [ClockState(mhz, ["sw_power_cap"], 1980) for mhz in (1530, 1545, 1530, 1545)]
    assert clock_matched(steady, 1530) and clock_matched(steady, 1560)
    assert not clock_matched(steady, 1500) and not clock_matched(steady, None)
    assert not clock_matched(steady[:POWER_CAP_READS - 1], 1530)
    assert not clock_matched(steady[:3] + [ClockState(1590, [], 1980)], 1560)
    assert not clock_matched([ClockState()] * POWER_CAP_READS, 1530)  # no NVML readings


@pytest.mark.parametrize("held_first", [False, True])
@pytest.mark.parametrize("share, clear", [(0.5, True), (0.9, False)])
def test_sim_a_call_drawing_far_under_the_power_limit_ends_its_longer_warm_up(
        sim, monkeypatch, share, clear, held_first) -> None:
    """A call whose baseline was loaded but which the cap does not hold now, or whose warm-up saw a
    clock held down by an earlier, heavier call (`held_first`): where it draws under
    POWER_CLEAR_SHARE of the power limit the cap is far off, the longer warm-up ends after
    POWER_CAP_MIN_S and the call is not loaded; near the limit the cap may still engage, and it
    takes the whole warm-up."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    boost = ClockState(1980, [], 1980)
    _clock_reads(sim, monkeypatch, [ClockState(1500, ["sw_power_cap"], 1980)] * 2 * held_first + [boost], read_ms=0.0)
    monkeypatch.setattr(timing, "power_share", lambda index: share)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01), loaded=not held_first)
    assert m.loaded is (held_first and not clear)
    if clear:
        assert timing.POWER_CAP_MIN_S <= m.phases["power cap"] < timing.POWER_CAP_MIN_S + 2 * timing.POWER_CAP_STEP_S
    else:
        assert m.phases["power cap"] >= timing.POWER_CAP_WARMUP_S


def test_the_cap_is_clear_only_where_every_one_of_the_last_readings_says_so() -> None:
    """cap_clear: the last POWER_CAP_READS readings not held down and each drawing under
    POWER_CLEAR_SHARE of the limit; an unknown draw (None), one held reading or too few is not clear."""
    from pytest_gpuperf.measure.device import ClockState
    from pytest_gpuperf.measure.power_cap import POWER_CAP_READS, POWER_CLEAR_SHARE, cap_clear

    boost, held = ClockState(1980, [], 1980), ClockState(1400, ["sw_power_cap"], 1980)
    far, near = POWER_CLEAR_SHARE / 2, POWER_CLEAR_SHARE
    n = POWER_CAP_READS
    assert cap_clear([held] + [boost] * n, [near] + [far] * n)  # only the last readings count
    assert not cap_clear([boost] * (n - 1), [far] * (n - 1))
    assert not cap_clear([boost] * n, [far] * (n - 1) + [None])
    assert not cap_clear([boost] * n, [far] * (n - 1) + [near])
    assert not cap_clear([boost] * (n - 1) + [held], [far] * n)


@pytest.mark.parametrize("call_ms", [20.0, 100.0])
def test_sim_the_longer_warm_up_of_a_long_call_keeps_its_bound(sim, monkeypatch, call_ms) -> None:
    """Long calls are queued two at a time in the power cap's warm-up: the host's clock then follows
    the device's, and a clock that never settles costs the bound plus about two calls (a queue of 64
    such calls had run it to 1.6 s)."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980)])  # never held down: never settles
    m = _run(sim, sim.kernel(call_ms, host_ms=0.01), loaded=True)
    assert timing.POWER_CAP_WARMUP_S <= m.phases["power cap"] <= timing.POWER_CAP_WARMUP_S + 2 * call_ms / 1e3


def test_sim_the_longer_warm_up_lasts_while_the_cap_still_lowers_the_clock(sim, monkeypatch) -> None:
    """A clock the cap is still bringing down has not settled: the warm-up goes on until the last
    readings agree (here the clock falls for 0.6 s), and never past POWER_CAP_WARMUP_S."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    falling = [ClockState(1800 - 45 * i, ["sw_power_cap"], 1980) for i in range(12)]
    _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980)] + falling)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01), loaded=True)
    assert m.loaded and 0.6 < m.phases["power cap"] < timing.POWER_CAP_WARMUP_S
    _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980)] + falling * 3)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01), loaded=True)
    assert timing.POWER_CAP_WARMUP_S <= m.phases["power cap"] < timing.POWER_CAP_WARMUP_S + 0.1


def test_sim_a_cap_that_engages_while_a_call_is_sampled_unbroken_restarts_it_loaded(sim, monkeypatch) -> None:
    """The cap's reason, left set by an earlier load, makes a call at boost clock fill the host's gaps
    without the longer warm-up; when the cap then holds it down during sampling, the samples start
    again, loaded."""
    from pytest_gpuperf.measure.device import ClockState

    boost, held = ClockState(1980, ["sw_power_cap"], 1980), ClockState(1400, ["sw_power_cap"], 1980)
    _clock_reads(sim, monkeypatch, [boost] * 3 + [held])
    m = _run(sim, sim.kernel(0.25, host_ms=0.01))
    assert m.loaded and m.sm_clock_mhz == 1400  # the readings of the dropped batches went with them
    assert len(m.batch_medians) >= 5 and m.median_ms == pytest.approx(0.25, rel=0.05)
    assert m.phases["restart"] > 0 and m.phases["settling"] > 0  # samples dropped, then a settling batch


def test_sim_a_call_the_power_cap_holds_down_only_while_sampled_starts_its_samples_again(sim, monkeypatch) -> None:
    """The cap can engage a second into a load, after a short warm-up ended: the samples taken at the
    clock before it are dropped, and the call is warmed and sampled again as above."""
    from pytest_gpuperf.measure.device import ClockState

    boost, held = ClockState(1980, [], 1980), ClockState(1400, ["sw_power_cap"], 1980)
    _clock_reads(sim, monkeypatch, [boost] * 3 + [held])
    m = _run(sim, sim.kernel(0.25, host_ms=0.15))
    assert m.loaded and m.throttle == ["sw_power_cap"]
    assert m.sm_clock_mhz == 1400  # the readings of the dropped batches went with them
    assert len(m.batch_medians) >= 5 and m.median_ms == pytest.approx(0.25, rel=0.05)
    assert m.phases["restart"] > 0 and m.phases["power cap"] >= 0.25  # the dropped samples, the longer warm-up
    assert m.phases["settling"] > 0  # not loaded at first: its only settling batch follows the restart


def test_sim_the_samples_start_again_at_most_once(sim, monkeypatch) -> None:
    """A call whose samples read the clock held down but whose longer warm-up finds the cap far off
    (`cap_clear`: not loaded) starts its samples again once, not at every held reading after."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    boost, held = ClockState(1980, [], 1980), ClockState(1400, ["sw_power_cap"], 1980)
    holds: list[bool] = []
    hold = timing.CudaTimer._hold_power_cap

    def counted(self, seen):
        holds.append(seen)
        hold(self, seen)

    monkeypatch.setattr(timing.CudaTimer, "_hold_power_cap", counted)
    monkeypatch.setattr(timing.CudaTimer, "_read_clocks", lambda self: held if len(holds) < 10 else boost)
    monkeypatch.setattr(timing, "read_clocks", lambda index: boost)  # the warm-ups' readings
    monkeypatch.setattr(timing, "power_share", lambda index: 0.5)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01))
    assert holds == [True] and not m.loaded and m.samples_ms


def test_sim_the_phases_of_a_measurement_add_up_to_its_wall_time(sim, monkeypatch) -> None:
    """Each phase's time is its own (nested phases are not counted twice), so the closing summary's
    breakdown adds up; a call at boost clock spends nothing on the power cap."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(1980, [], 1980)])
    began = sim.clock.now_ms
    m = _run(sim, sim.kernel(0.25, host_ms=0.01))
    assert set(m.phases) == {"warm-up", "calibration", "samples"}  # no settling batch: not capped
    assert sum(m.phases.values()) == pytest.approx((sim.clock.now_ms - began) / 1e3, rel=1e-3)
    # the first clock reading is at the maximum: the warm-up ends there, short of the config's 0.05 s
    assert m.phases["samples"] > 0 and timing.WARMUP_STEP_S <= m.phases["warm-up"] < 0.05


@pytest.mark.parametrize("clocks, ends_after", [((1200, 1500, 1755, 1770), 4), ((None,), None)])
def test_sim_the_warm_up_ends_once_the_clock_is_up(sim, monkeypatch, clocks, ends_after) -> None:
    """The warm-up reads the clock every WARMUP_STEP_S and ends once two readings agree (a clock below
    the maximum: application clocks, say); without clock readings it takes its whole budget."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(c, [], 1980 if c else None) for c in clocks], read_ms=0.0)
    m = _run(sim, sim.kernel(0.02, host_ms=0.01))
    if ends_after:
        assert m.phases["warm-up"] == pytest.approx(ends_after * timing.WARMUP_STEP_S, abs=0.003)
    else:
        assert m.phases["warm-up"] >= 0.05  # the config's warm-up


def test_sim_the_untimed_calls_grow_to_cover_a_host_slower_than_the_first_guess(sim, monkeypatch) -> None:
    """An 8 ms NVML read outlasts the first fill (FILL_FIRST_MS): the device idles once, before the
    second batch, and the fill covers every gap after it."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    idle = _clock_reads(sim, monkeypatch, [ClockState(1400, ["sw_power_cap"], 1980)], read_ms=8.0)
    m = _run(sim, sim.kernel(0.25, host_ms=0.01))
    assert m.loaded and len(m.batch_medians) >= 3
    gaps = [t for t in idle[1:] if t > 0.01]
    assert len(gaps) == 1 and gaps[0] == pytest.approx(8.0 - timing.FILL_FIRST_MS, abs=0.5)


def test_sim_a_capped_call_that_waits_for_other_streams_is_not_sampled_in_a_loop(sim, monkeypatch) -> None:
    """A call timed with a device synchronize in every sample cannot run in a loop: warmed longer, it
    is not `loaded`."""
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(1400, ["sw_power_cap"], 1980)])

    def fn() -> None:
        sim.launch(0.25, host_ms=0.01)
        sim.launch_on_side_stream(1.0)

    m = _run(sim, fn)
    assert m.method == "device-sync" and not m.loaded


def test_sim_the_same_call_on_a_warm_cache_is_launch_bound(sim) -> None:
    m = _run(sim, sim.kernel(0.25, host_ms=0.15), cache="warm")
    assert m.method == "graph" and m.calls_per_sample >= 10
    assert m.median_ms == pytest.approx(0.25, rel=0.05)


@pytest.mark.parametrize("prefer", [None, "events"])
def test_sim_launch_bound_calls_are_timed_without_launch_gaps(sim, prefer) -> None:
    m = _run(sim, sim.kernel(0.1, host_ms=0.6), prefer=prefer)
    assert m.method == "graph"  # an events baseline does not force events that would time the gaps
    assert m.median_ms == pytest.approx(0.1, rel=0.05)


def test_sim_an_events_baseline_keeps_events_while_spins_can_cover_the_launch(sim) -> None:
    # launch 0.3 ms against 0.1 + ~0.37 ms of GPU per sample: over half, so a graph without a
    # baseline, but events with a spin ahead of each sample time it as well
    assert _run(sim, sim.kernel(0.1, host_ms=0.3)).method == "graph"
    m = _run(sim, sim.kernel(0.1, host_ms=0.3), prefer="events")
    assert m.method == "events"
    assert m.median_ms == pytest.approx(0.1, rel=0.05)


def test_sim_short_calls_are_timed_in_graphs(sim) -> None:
    from pytest_gpuperf.measure import cuda_timer as timing

    m = _run(sim, sim.kernel(0.005))
    assert m.method == "graph" and m.calls_per_sample == timing.MAX_GRAPH_CALLS  # 2 ms would take 400
    assert m.median_ms == pytest.approx(0.005, rel=0.05)


def test_sim_a_slow_host_during_calibration_does_not_make_a_short_call_look_long(sim, monkeypatch) -> None:
    """Host hiccups while the calibration batch is queued (the GC, the OS, a slow first call) let
    the queue run dry, and the calls queued after that read the host's pace: with the median of
    that batch as the call's GPU time, a ~6 µs attention forward on an H100 was judged a 60 µs
    call and timed with events at 59-86 µs. A stall can only lengthen a sample, so the fastest
    of them is the call's time."""
    from pytest_gpuperf.measure import cuda_timer as timing

    slow = []
    calibrate = timing.CudaTimer._gpu_ms

    def slow_host_while_calibrating(self, flush, host_ms):
        slow.append(True)
        try:
            return calibrate(self, flush, host_ms)
        finally:
            slow.clear()

    monkeypatch.setattr(timing.CudaTimer, "_gpu_ms", slow_host_while_calibrating)

    def fn() -> None:
        sim.launch(0.005, host_ms=1.0 if slow else 0.05)  # a launch 0.6 ms slower than the flush

    m = _run(sim, fn)
    assert m.method == "graph"
    assert m.median_ms == pytest.approx(0.005, rel=0.05)


def test_sim_work_left_on_another_stream_is_waited_for_not_missed(sim) -> None:
    def fn() -> None:
        sim.launch(0.05)                  # on the measured stream ...
        sim.launch_on_side_stream(1.0)    # ... and 1 ms more that an event on it would not see

    m = _run(sim, fn)
    assert m.method == "device-sync" and any("other streams" in w for w in m.warnings)
    assert m.median_ms == pytest.approx(1.05, rel=0.05)


def test_sim_a_late_event_on_an_idle_device_is_not_taken_for_work_on_another_stream(sim) -> None:
    sim.idle_event_ms = 0.5  # the probe's event after the synchronize, recorded on a drained queue

    m = _run(sim, sim.kernel(0.2))
    assert m.method == "events" and not m.warnings
    assert m.median_ms == pytest.approx(0.2, rel=0.05)


def test_sim_a_short_call_that_cannot_be_captured_is_timed_as_queued_calls(sim) -> None:
    from pytest_gpuperf.measure import cuda_timer as timing

    def fn() -> None:
        if sim.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")
        sim.launch(0.005)

    m = _run(sim, fn)
    assert m.method == "queued"
    assert any("graph capture failed (RuntimeError: operation not permitted" in w for w in m.warnings)
    # a sample of ~QUEUED_SAMPLE_MS (20-21 calls of the estimated ~5 µs), not a graph's 50
    assert abs(m.calls_per_sample - timing.QUEUED_SAMPLE_MS / 0.005) <= 1
    assert m.median_ms == pytest.approx(0.005, rel=0.1) and m.stats.noise < 0.02


def test_sim_a_long_call_that_cannot_be_captured_is_timed_with_events(sim) -> None:
    """A call that waits for the device inside (an `.item()`, as Liger-Kernel's ~1 ms cross entropy
    does) cannot be captured, and its host time is never below its GPU time, so it is launch-bound by
    the host rule; at 1 ms it needs no graph. Its host gap after the wait varies by a few µs."""
    jitter = random.Random(0)

    def fn() -> None:
        if sim.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")
        sim.launch(0.01)
        sim.synchronize()  # the .item()
        sim.launch(1.0, host_ms=jitter.uniform(0.01, 0.03))

    m = _run(sim, fn)
    assert m.method == "events" and m.calls_per_sample == 1 and not m.warnings
    assert m.median_ms == pytest.approx(1.03, rel=0.02) and m.stats.noise < 0.02


@pytest.mark.parametrize("capped", [True, False])
def test_sim_the_first_batch_of_a_capped_call_settles_the_device_and_is_not_counted(sim, monkeypatch, capped) -> None:
    """A call the power cap holds (`loaded`) runs its first batch as a settling batch, dropped; any other
    call's first batch counts (its first batch read as its others on an H200: measurement-evidence.md)."""
    from pytest_gpuperf.measure import cuda_timer as timing
    from pytest_gpuperf.measure.device import ClockState

    _clock_reads(sim, monkeypatch, [ClockState(1400 if capped else 1965, ["sw_power_cap"] if capped else [], 1980)],
                 read_ms=0.0)
    state = {"sampling": False, "batches": 0}

    def fn() -> None:  # twice as slow in the first batch of the sampling phase, as a device settling
        sim.launch(0.5 if capped and state["sampling"] and state["batches"] == 0 else 0.25)

    timer = timing.CudaTimer(fn, TimingConfig(budget_s=0.15, warmup_s=0.05, batch_s=0.01), (), None,
                             torch=sim.torch)
    batch, sample = timer._batch, timer._sample

    def counted_batch(*args, **kwargs):
        raw = batch(*args, **kwargs)
        state["batches"] += state["sampling"]
        return raw

    def sampling(*args, **kwargs):
        state["sampling"] = True
        return sample(*args, **kwargs)

    timer._batch, timer._sample = counted_batch, sampling
    m = timer.run()
    assert m.loaded is capped and ("settling" in m.phases) is capped
    assert state["batches"] == len(m.batch_medians) + capped
    assert m.stats.max_ms < 0.3 and m.median_ms == pytest.approx(0.25, rel=0.05)


def test_sim_warm_up_of_a_long_call_with_a_cheap_launch_waits_for_the_device(sim) -> None:
    """Warm-up is judged on the host clock, but must not queue more device work than it has seen
    done: a 20 ms call launched in 0.1 ms, waited for only every 64th call, warmed up for 1.3 s."""
    from pytest_gpuperf.measure import cuda_timer as timing

    calls = []

    def fn() -> None:  # a 20 ms call launched in 0.1 ms
        calls.append(1)
        sim.launch(20.0, host_ms=0.1)

    config = TimingConfig(warmup_s=0.05)
    timer = timing.CudaTimer(fn, config, (), None, torch=sim.torch)
    started = sim.now_ms()
    timer._warmup()
    sim.synchronize()
    assert len(calls) <= 4  # waited for after calls 1, 2 and 4 at most
    assert sim.now_ms() - started <= 2 * config.warmup_s * 1e3 + 20.0  # 2 x warm-up plus a call
    assert timer.long_call


def test_sim_sampling_stops_once_the_median_is_known_to_the_target_precision(sim) -> None:
    from pytest_gpuperf.measure import cuda_timer as timing

    fn = sim.kernel(0.25, host_ms=0.05)
    tight = timing.CudaTimer(fn, TimingConfig(precision=0.005, budget_s=5.0, warmup_s=0.02, batch_s=0.01),
                              (), None, torch=sim.torch)
    started = sim.now_ms()
    m = tight.run()
    # a noiseless device: the CI closes at the first check that may stop, long before the 5 s budget
    assert sim.now_ms() - started < 1e3 and len(m.batch_medians) == TimingConfig.min_batches
    assert m.stats.samples >= TimingConfig.min_samples and len(m.batch_medians) >= TimingConfig.min_batches


def test_version_note_says_what_changed_since_an_entrys_timing_version() -> None:
    from pytest_gpuperf.core.versions import TIMING_VERSION, recorded_version, version_note

    assert recorded_version(_entry({})) == 1 and recorded_version(_entry({"timing": "2"})) == 2  # none recorded: 1
    assert recorded_version(_entry({"timing": "fast"})) is None
    assert version_note(_entry({"timing": TIMING_VERSION, "method": "events"})) is None
    old = version_note(_entry({"method": "events"}))
    assert old.startswith("timing version 1") and "latency of a kernel launched between two events" in old
    assert "gap between two kernels queued eagerly" in old
    assert "upgrade pytest-gpuperf" in version_note(_entry({"timing": TIMING_VERSION + 1, "method": "graph"}))
    assert "unknown timing version" in version_note(_entry({"timing": "fast"}))
    assert version_note(_entry({"timing": 1, "method": "cpu"})) is None  # host clocks: no version changed them
    # version 7 (collection on the session's stream) moved graph-timed results only
    assert "collection runs on the session's stream" in version_note(_entry({"timing": 6, "method": "graph"}))
    assert version_note(_entry({"timing": 6, "method": "events"})) is None
    assert version_note(_entry({"timing": 6, "method": "queued"})) is None


def test_a_timing_version_changes_only_the_methods_it_names(monkeypatch) -> None:
    from pytest_gpuperf.core import versions as timing

    old, new = timing.TIMING_VERSION, timing.TIMING_VERSION + 1
    monkeypatch.setattr(timing, "TIMING_VERSION", new)
    monkeypatch.setattr(timing, "TIMING_CHANGES", {**timing.TIMING_CHANGES, new: timing.TimingChange(("events",), "events moved")})
    assert timing.version_note(_entry({"timing": old, "method": "graph"})) is None
    assert timing.timing_epoch(_entry({"timing": old, "method": "graph"})) == timing.timing_epoch(_entry({"timing": new, "method": "graph"}))
    assert timing.version_note(_entry({"timing": old, "method": "events"})).endswith(f"measures with {new}: events moved")
    assert "events moved" in timing.version_note(_entry({"timing": old}))  # method unknown: every change may apply


def test_a_timing_version_changes_only_the_cache_modes_it_names() -> None:
    """Version 5 moved cold samples only (back to back above the L2's size): warm entries of version 4
    compare with this gpuperf's, cold ones do not, and an entry that names no cache mode may have moved."""
    from pytest_gpuperf.core import versions as timing

    assert timing.version_note(_entry({"timing": 4, "method": "events", "cache": "warm"})) is None
    assert "back to back" in timing.version_note(_entry({"timing": 4, "method": "events", "cache": "cold"}))
    assert "back to back" in timing.version_note(_entry({"timing": 4, "method": "graph"}))
    assert timing.version_note(_entry({"timing": 4, "method": "cpu", "cache": "n/a"})) is None
    assert "events moved" not in timing.version_note(_entry({"timing": 2, "method": "graph"}))


def test_calls_of_finds_each_run_of_a_functions_ops_and_skips_others() -> None:
    """A profiled session's calls of a two-op function (a memset and a GEMM), with flushes between."""
    from types import SimpleNamespace

    from pytest_gpuperf.measure.profile import calls_of

    ops = [SimpleNamespace(name=n) for n in ["flush", "memset", "gemm", "flush", "memset", "gemm", "memset"]]
    calls = calls_of(ops, ["memset", "gemm"])
    assert [[e.name for e in call] for call in calls] == [["memset", "gemm"]] * 2
    assert calls[1][0] is ops[4]


def test_sim_events_samples_stay_the_calls_when_the_host_slows_down_after_calibration(sim, monkeypatch) -> None:
    """The host launches the call in 0.05 ms while the timer calibrates, then in 0.3 ms (another
    process took the CPU) against 0.25 ms of GPU work: the device would idle inside every sample
    and the pair time the host. Each batch's queuing time is watched, and the spin ahead of each
    sample grows to cover it; without that the median read 0.30."""
    from pytest_gpuperf.measure import cuda_timer as timing

    slow = [False]
    sample = timing.CudaTimer._sample

    def slowed(self, *args, **kwargs):
        slow[0] = True
        return sample(self, *args, **kwargs)

    monkeypatch.setattr(timing.CudaTimer, "_sample", slowed)
    m = _run(sim, lambda: sim.launch(0.25, host_ms=0.3 if slow[0] else 0.05), prefer="events", cache="warm")
    assert m.method == "events"
    assert m.median_ms == pytest.approx(0.25, rel=0.03)


def test_sim_the_spins_keep_growing_while_the_host_keeps_slowing_down(sim, monkeypatch) -> None:
    """The host slows down twice while samples are taken (0.05, then 0.3, then 0.6 ms a launch against
    0.25 ms of GPU work): the spins grow each time, and growing queuing is not taken for a call that
    waits for the device inside. Read as such, the spins went back to none and the median read 0.60."""
    from pytest_gpuperf.measure import cuda_timer as timing

    launches = [0]
    sample = timing.CudaTimer._sample

    def counted(self, *args, **kwargs):
        launches[0] = 1
        return sample(self, *args, **kwargs)

    def fn():
        if launches[0]:
            launches[0] += 1
        sim.launch(0.25, host_ms=0.05 if not launches[0] else 0.3 if launches[0] < 150 else 0.6)

    monkeypatch.setattr(timing.CudaTimer, "_sample", counted)
    m = _run(sim, fn, prefer="events", cache="warm")
    assert m.method == "events" and not m.warnings
    assert m.median_ms == pytest.approx(0.25, rel=0.03)


def test_sim_peak_memory_counts_the_bytes_asked_for_not_the_allocators_rounding(sim) -> None:
    """Where torch counts requested bytes, the peak is theirs: the allocated bytes include rounding
    that depends on what the allocator holds cached (3 MB of 220 MB between processes on an H100)."""
    stats = {"requested_bytes.all.current": 5 << 20, "requested_bytes.all.peak": 205 << 20}
    sim.torch.cuda.memory_stats = lambda: stats
    sim.torch.cuda.memory_allocated = lambda: 6 << 20
    sim.torch.cuda.max_memory_allocated = lambda: 209 << 20
    assert _run(sim, sim.kernel(0.25, host_ms=0.05)).peak_memory_bytes == 200 << 20
    sim.torch.cuda.memory_stats = lambda: {"allocated_bytes.all.current": 6 << 20}  # no request counts
    assert _run(sim, sim.kernel(0.25, host_ms=0.05)).peak_memory_bytes == 203 << 20
    del sim.torch.cuda.memory_stats
    assert _run(sim, sim.kernel(0.25, host_ms=0.05)).peak_memory_bytes == 203 << 20


def _entry(stored: dict) -> Entry:
    """A stored entry of a test with `stored`'s keys (its median aside)."""
    return Entry.from_dict({"median_ms": 1.0, **stored})


@pytest.mark.parametrize("drawn_mw, value_type, status, share", [
    (350_000, 1, 0, 0.5), (350_000.0, 0, 0, 0.5), (0, 1, 0, None), (350_000, 1, 3, None)])
def test_the_power_share_is_the_instant_draw_over_the_enforced_limit(monkeypatch, drawn_mw, value_type, status,
                                                                      share) -> None:
    """NVML's instant power field, decoded by its value type, over the enforced limit (700 W here);
    a refused field, or a draw of 0 (a virtualised GPU that does not say), is unknown."""
    import sys
    import types

    from pytest_gpuperf.measure import device

    members = {0: "dVal", 1: "uiVal"}
    field = types.SimpleNamespace(nvmlReturn=status, valueType=value_type,
                                  value=types.SimpleNamespace(**{members[value_type]: drawn_mw}))
    fake = types.SimpleNamespace(NVML_SUCCESS=0, NVML_FI_DEV_POWER_INSTANT=186,
                                 nvmlDeviceGetFieldValues=lambda handle, ids: [field],
                                 nvmlDeviceGetEnforcedPowerLimit=lambda handle: 700_000)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(device, "_nvml_handle", lambda index: object())
    assert device.power_share(0) == share
    assert device.power_share(None) is None
