"""The fixtures: `gpu_benchmark` (measure a call and judge it against the baseline), `gpu_profile`
and `gpu_assert_close`."""
from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from ..core import verdict as verdict_mod
from ..core.records import Entry, Identity, Method, Result, of_peak, peak_fraction
from ..core.units import as_number
from ..core.versions import TIMING_VERSION
from ..core.counters import with_declared_note
from ..measure.device import has_cuda, l2_cache_bytes, peak_name
from ..measure.measurement import Measurement, iter_tensors
from ..measure.timer import measure
from ..measure.tolerance import is_nonnegative_number
from .options import marker_group, marker_threshold
from .session import ITEM_RECORD, STATE, GpuPerf


def _float_dtype(args: Any) -> str | None:
    """Name of the precision that bounds a call's arithmetic: the first floating tensor's dtype,
    'tf32' for float32 when torch may use tf32 matmuls."""
    for t in iter_tensors(args):
        if t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            if name == "float32" and t.is_cuda:
                import torch

                if torch.backends.cuda.matmul.allow_tf32:
                    return "tf32"
            return name
    return None


class GpuBenchmark:
    """Call it like the function it measures: `out = gpu_benchmark(fn, *args, bytes=..., flops=...)`."""

    def __init__(self, perf: GpuPerf, item: pytest.Item) -> None:
        self._perf = perf
        self._item = item
        self.stats: dict[str, Any] | None = None
        self.measurement: Measurement | None = None
        self._called = False

    def __call__(self, fn: Callable[..., Any], *args: Any, bytes: int | None = None, flops: int | None = None,
                 **kwargs: Any) -> Any:
        __tracebackhide__ = True
        for label, value in (("bytes", bytes), ("flops", flops)):
            if value is not None and not is_nonnegative_number(value):
                raise ValueError(f"gpu_benchmark in {self._item.nodeid}: {label}={value!r} must be a number >= 0")
        if self._called:
            raise RuntimeError(f"gpu_benchmark was already called in {self._item.nodeid}; "
                               "call it once per test (parametrize for more cases)")
        self._called = True
        call = functools.partial(fn, *args, **kwargs)
        with _oom_is_skip(self._item.nodeid):
            if not self._perf.settings.enabled:
                return call()
            if self._perf.settings.counter_pass is not None:
                return self._perf.count(self._item.nodeid, call)
            record, measurement = self._measure(call, (args, kwargs), bytes, flops)
        self.stats = record
        self.measurement = measurement
        self._item.stash[ITEM_RECORD] = record
        for warning in record["warnings"]:
            self._item.warn(pytest.PytestWarning(f"gpuperf: {warning}"))
        for note in self._perf.peaks.take_notes():  # each peak problem once per process
            self._item.warn(pytest.PytestWarning(note))
        value, measurement.value = measurement.value, None  # the test owns the result; don't pin it
        return value

    def _measure(self, call: Callable[[], Any], inputs: Any, nbytes: int | None,
                 flops: int | None) -> tuple[dict[str, Any], Measurement]:
        perf, settings = self._perf, self._perf.settings
        threshold = self._threshold()
        stored = perf.baseline.entries.get(self._item.nodeid) if perf.baseline is not None else None
        base = stored if settings.compare else None
        totals = {"wall_s": 0.0, "measured_s": 0.0, "first_call_s": 0.0}  # all attempts: the test's cost
        phases: dict[str, float] = {}

        # The stored method is used again when comparing, and when recording even without a comparison:
        # a recording timed another way would start the entry's history anew.
        planned = settings.plan.methods.get(self._item.nodeid) if settings.plan else None
        prefer = planned or (stored.method if stored is not None and (settings.compare or settings.save) else None)
        # Likewise its power-cap sampling: a capped call whose warm-up ended before the cap engaged
        # would otherwise be sampled with pauses, at a clock the cap lets rise.
        loaded = stored is not None and stored.loaded is True and (settings.compare or settings.save) and not planned

        first_medians: list[float] = []

        def run() -> tuple[Result, Measurement]:
            measurement = measure(call, settings.timing, inputs=inputs, prefer=prefer, loaded=loaded,
                                  baseline_clock_mhz=as_number(base.sm_clock_mhz) if base is not None else None,
                                  calibration=perf.calibration)
            for key in totals:
                totals[key] += getattr(measurement, key)
            for phase, seconds in measurement.phases.items():
                phases[phase] = phases.get(phase, 0.0) + seconds
            record = self._record(measurement, inputs, nbytes, flops, stored)
            first_medians.append(record.stats.median_ms)
            return record, measurement

        result, measurement, verdict, attempt = verdict_mod.remeasure_while_suspect(
            base, run, threshold, settings.retries, judging=settings.compare)
        result.remeasured = attempt
        result.wall_s, result.measured_s, result.first_call_s = totals["wall_s"], totals["measured_s"], \
            totals["first_call_s"]
        result.phases = {phase: round(seconds, 4) for phase, seconds in phases.items()}
        result.threshold = threshold
        result.baseline = base
        if settings.save:  # the recording is the first run, not the fastest of a suspect's re-measurements
            result.history = first_medians[:1]
        if verdict is not None:
            result.judgement = verdict.judgement()
        perf.store_peaks()
        return result.to_dict(), measurement

    def _threshold(self) -> float:
        return marker_threshold(self._item, self._perf.settings.threshold)

    def _record(self, m: Measurement, inputs: Any, nbytes: int | None, flops: int | None,
                stored: Entry | None) -> Result:
        """The measurement as a Result, its rates held against this device's peaks (`stored`: the
        test's baseline entry, whose % of peak says whether a result above a peak is news)."""
        seconds = m.median_ms / 1e3
        # plain ints: numpy scalars (np.prod(shape) * 4) can't cross to an xdist controller
        nbytes = None if nbytes is None else int(nbytes)
        flops = None if flops is None else int(flops)
        gbps = nbytes / seconds / 1e9 if nbytes and seconds > 0 else None
        tflops = flops / seconds / 1e12 if flops and seconds > 0 else None
        pct = bound = peak = above = None
        # A host clock times no L2 flush, so a small working set beats the device's copy rate: % of
        # peak would exceed 100% with nothing wrong. Host-clock (cpu) results carry none.
        if m.method != Method.CPU.value:
            peaks = self._perf.peaks
            fractions: dict[str, tuple[float | None, str | None]] = {}
            if gbps is not None:
                ceiling = peaks.memory_ceiling(nbytes)
                fractions["memory"] = (peaks.fraction(ceiling, gbps, recorded=peak_fraction(stored, ceiling))
                                       if ceiling else None, ceiling)
            dtype = _float_dtype(inputs) if tflops is not None else None
            if dtype is not None:
                name = peak_name(dtype)
                fractions["compute"] = (peaks.fraction(name, tflops, dtype, recorded=peak_fraction(stored, name)),
                                        name)
            fractions = {side: f for side, f in fractions.items() if f[0] is not None}  # no peak, no %
            if fractions:
                bound = max(fractions, key=lambda side: fractions[side][0])  # the nearer roofline side
                (pct, above), peak = of_peak(100 * fractions[bound][0]), fractions[bound][1]
        item = self._item
        counters = self._perf.counters.get(item.nodeid)
        warnings = with_declared_note(m.warnings, nbytes, counters, l2_cache_bytes() if counters is not None else None)
        name = getattr(item, "originalname", item.name)
        return Result(
            Identity(item.nodeid, name, item.callspec.id if hasattr(item, "callspec") else "", marker_group(item, name)),
            m.stats, gbps=gbps, tflops=tflops, pct_of_peak=pct, bytes=nbytes, flops=flops, bound=bound, peak=peak,
            above_peak=above,
            peak_memory_bytes=m.peak_memory_bytes, method=m.method, calls_per_sample=m.calls_per_sample,
            cache=m.cache, timing=TIMING_VERSION, node_gap_ms=m.node_gap_ms, sm_clock_mhz=m.sm_clock_mhz,
            throttle=m.throttle, loaded=m.loaded, slow_replay_us=m.slow_replay_us,
            counters=counters, warnings=warnings,
            wall_s=m.wall_s, measured_s=m.measured_s,
        )


class _oom_is_skip:
    """Turn a CUDA out-of-memory error into a skip that names the test and the allocation."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        torch = sys.modules.get("torch")
        if exc is None or torch is None or not isinstance(exc, torch.cuda.OutOfMemoryError):
            return False
        torch.cuda.empty_cache()
        pytest.skip(f"CUDA out of memory in {self.nodeid}: {str(exc).splitlines()[0]}")
        return True  # pragma: no cover - pytest.skip raises


@pytest.fixture
def gpu_benchmark(request: pytest.FixtureRequest) -> GpuBenchmark:
    """Measure a GPU call (warm-up, CUDA events or graphs, L2 flush, adaptive samples) under --gpuperf;
    otherwise call it once. Returns the call's result; `.stats` holds the measurement."""
    return GpuBenchmark(request.config.stash[STATE], request.node)


@pytest.fixture
def gpu_profile(request: pytest.FixtureRequest):
    """`gpu_profile(fn, *args, **kwargs)` -> Profile of one warm call (kernels, launches, CUDA time)."""
    from ..measure.profile import Profile, capture

    perf: GpuPerf = request.config.stash[STATE]
    exported: list[Path] = []

    def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Profile:
        if not has_cuda():
            pytest.skip("gpu_profile needs a CUDA device; none is visible")
        prof = capture(functools.partial(fn, *args, **kwargs))
        if perf.settings.trace_dir is not None:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
            suffix = f"-{len(exported) + 1}" if exported else ""
            exported.append(prof.export_chrome_trace(perf.settings.trace_dir / f"{stem}{suffix}.json"))
        return prof

    return run


@pytest.fixture
def gpu_assert_close():
    """`gpu_assert_close(actual, expected, *, rtol=None, atol=None, precision=None)` with per-dtype defaults."""
    from ..measure.tolerance import assert_close

    return assert_close
