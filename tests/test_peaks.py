"""Peaks that cannot poison a run: implausible or zero peaks (measured or cached) are re-measured once,
then dropped with one note; % of peak never divides by a missing peak; peaks measured under load are
neither cached nor written into a baseline; `gpuperf device --refresh` replaces the cached ones."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import yaml

from pytest_gpuperf import cli
from pytest_gpuperf.core.records import Entry, Statistics, peak_fraction
from pytest_gpuperf.measure.device import describe, software_versions
from pytest_gpuperf.measure.peaks import (CPU, CUDA, DISTURBED_NOISE, PeakReading, Peaks, cache_key,
                                          peak_problem, valid_peaks)

pytest_plugins = ["pytester"]
GOOD = PeakReading(3000.0, 0.002)


class Probe:
    """A fake peak probe: returns the given readings in turn (the last one again when out)."""

    def __init__(self, *readings: PeakReading) -> None:
        self.readings = list(readings)
        self.calls = 0

    def __call__(self, name: str, dtype_name: str | None) -> PeakReading:
        self.calls += 1
        return self.readings[min(self.calls, len(self.readings)) - 1]


@pytest.mark.parametrize("value", [0.0, 0.5, -1.0, math.nan, math.inf, 1e9, "3000", True, None])
def test_an_impossible_copy_peak_is_a_problem(value) -> None:
    assert peak_problem("copy_gbps", value, CUDA) is not None


def test_plausible_peaks_pass_for_their_device_kind() -> None:
    assert peak_problem("copy_gbps", 3000.0, CUDA) is None and peak_problem("bf16_tflops", 738, CUDA) is None
    assert peak_problem("copy_gbps", 12.7, CPU) is None and peak_problem("fp32_tflops", 0.10, CPU) is None
    assert peak_problem("copy_gbps", 3000.0, CPU) is not None  # no CPU copies 3 TB/s
    good, bad = valid_peaks({"copy_gbps": 0.5, "fp32_tflops": 0.0, "bf16_tflops": 700.0}, CUDA)
    assert good == {"bf16_tflops": 700.0} and set(bad) == {"copy_gbps", "fp32_tflops"}


def test_a_cached_zero_peak_is_not_used_but_measured_again() -> None:
    probe = Probe(GOOD)
    peaks = Peaks({"copy_gbps": 0.0, "bf16_tflops": 700.0}, kind=CUDA, probe=probe)
    assert peaks.copy_gbps() == 3000.0 and probe.calls == 1
    assert peaks.recordable() == {"copy_gbps": 3000.0, "bf16_tflops": 700.0} and not peaks.take_notes()


def test_a_peak_bad_twice_is_dropped_with_one_note_and_not_measured_again() -> None:
    probe = Probe(PeakReading(0.5, 0.01), PeakReading(0.0, 0.01))
    peaks = Peaks({"copy_gbps": 0.5}, kind=CUDA, probe=probe, source="/repo/.pytest_cache/v/gpuperf/peaks/x")
    assert peaks.copy_gbps() is None and peaks.fraction("copy_gbps", 2500.0) is None
    assert probe.calls == 2  # measured, re-measured once, then left alone
    (note,) = peaks.take_notes()
    assert "copy_gbps" in note and "/repo/.pytest_cache/v/gpuperf/peaks/x" in note and "gpuperf device --refresh" in note
    assert "copy_gbps" not in peaks.recordable()


def test_a_disturbed_peak_is_used_but_never_recorded() -> None:
    noisy = PeakReading(2900.0, 4 * DISTURBED_NOISE)
    peaks = Peaks(kind=CUDA, probe=Probe(noisy, noisy))
    assert peaks.copy_gbps() == 2900.0 and peaks.recordable() == {}
    calm = Peaks(kind=CUDA, probe=Probe(noisy, GOOD))  # the re-measurement came out calm: that one counts
    assert calm.copy_gbps() == 3000.0 and calm.recordable() == {"copy_gbps": 3000.0}


def test_a_result_far_above_a_cached_peak_re_measures_it_once_and_then_says_stale() -> None:
    probe = Probe(GOOD)
    peaks = Peaks({"copy_gbps": 1000.0}, kind=CUDA, probe=probe)  # stale: the card moves 3000
    assert peaks.fraction("copy_gbps", 2700.0) == pytest.approx(0.9) and probe.calls == 1
    assert not peaks.take_notes()
    assert peaks.fraction("copy_gbps", 3600.0) == pytest.approx(1.2) and probe.calls == 1  # fresh: not again
    (note,) = peaks.take_notes()
    assert "120% of the copy_gbps peak" in note and "stale" in note


def test_a_result_its_baseline_entry_already_read_above_the_peak_re_measures_nothing() -> None:
    """A matmul whose entry read 2.6% above a stored peak of 688 TFLOP/s reads 725 (5.4% over): no news
    about the peak, so no probe and no note. Further over than its entry by 5%, or against a peak
    since cached 10% lower, the peak is probed again."""
    probe = Probe(PeakReading(690.0, 0.002))
    peaks = Peaks({"bf16_tflops": 688.0}, kind=CUDA, probe=probe)
    assert peaks.fraction("bf16_tflops", 725.0, "bfloat16", recorded=1.026) == pytest.approx(725.0 / 688.0)
    assert probe.calls == 0 and not peaks.take_notes()
    assert peaks.fraction("bf16_tflops", 760.0, "bfloat16", recorded=1.026) == pytest.approx(760.0 / 690.0)
    assert probe.calls == 1 and "stale" in peaks.take_notes()[0]
    lowered = Peaks({"bf16_tflops": 620.0}, kind=CUDA, probe=Probe(PeakReading(690.0, 0.002)))
    assert lowered.fraction("bf16_tflops", 706.0, "bfloat16", recorded=1.026) == pytest.approx(706.0 / 690.0)


def test_an_entry_says_how_far_above_which_peak_it_read() -> None:
    entry = Entry(stats=Statistics(median_ms=0.19), peak="bf16_tflops", pct_of_peak=100.0, above_peak=0.026)
    assert peak_fraction(entry, "bf16_tflops") == pytest.approx(1.026)
    assert peak_fraction(entry, "fp16_tflops") is None and peak_fraction(None, "bf16_tflops") is None
    below = Entry(stats=Statistics(median_ms=0.19), peak="copy_gbps", pct_of_peak=91.0)
    assert peak_fraction(below, "copy_gbps") == pytest.approx(0.91)


def test_peaks_are_kept_per_software_stack() -> None:
    a = {"torch": "2.13.0+cu130", "cuda": "13.0", "driver": "580.1"}
    assert cache_key("nvidia-h100", a) != cache_key("nvidia-h100", dict(a, driver="580.2"))
    assert cache_key("nvidia-h100", a) != cache_key("nvidia-h100", dict(a, torch="2.12.0"))
    assert cache_key("nvidia-h100", a) != cache_key("nvidia-h200", a)


BROKEN_RUN = """
import torch

def test_rates(gpu_benchmark):
    a = torch.ones(64, 64)
    out = gpu_benchmark(torch.mm, a, a, bytes=3 * 64 * 64 * 4, flops=2 * 64**3)
    assert out[0, 0] == 64
    s = gpu_benchmark.stats
    assert s["pct_of_peak"] is None or s["pct_of_peak"] <= 100
"""


def test_a_cache_of_broken_peaks_gives_a_clean_run_and_is_replaced(pytester: pytest.Pytester) -> None:
    """The reported failure: cached copy 0.5 GB/s and fp32 0.0 TFLOP/s, also in the baseline."""
    pytester.makepyfile(test_rates=BROKEN_RUN)
    key = cache_key(describe()["key"], software_versions())
    broken = {"copy_gbps": 0.5, "fp32_tflops": 0.0}
    cached = pytester.path / ".pytest_cache" / "v" / key
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(broken))
    args = ("--gpuperf", "--gpuperf-save", "--gpuperf-no-compare", "--gpuperf-budget", "0.1", "-p", "no:randomly")
    for run in range(2):
        if run:  # the second run starts from a baseline that holds the broken peaks too
            data = yaml.safe_load(baseline.read_text())
            data["device"]["peaks"] = broken
            baseline.write_text(yaml.safe_dump(data, explicit_end=True))
            cached.write_text(json.dumps(broken))
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1)
        output = "\n".join(result.outlines + result.errlines)
        assert "Traceback" not in output and "ZeroDivisionError" not in output
        stored = json.loads(cached.read_text())
        assert not valid_peaks(stored, CPU)[1]  # the broken values are gone from the cache
        (baseline,) = (pytester.path / "baselines").glob("*.yaml")
        assert not valid_peaks(yaml.safe_load(baseline.read_text())["device"]["peaks"], CPU)[1]


def test_device_refresh_stores_the_measured_peaks_in_pytests_cache(tmp_path, capsys, monkeypatch) -> None:
    from pytest_gpuperf.measure import device as device_mod
    from pytest_gpuperf.measure import peaks as peaks_mod

    software = {"torch": "2.13.0", "cuda": None, "driver": None}
    dev = {"key": "cpu-x86-test", "name": "test", "peaks": {"copy_gbps": 12.7},
           "peak_notes": ["gpuperf: peak fp32_tflops measured 0 then 0: 0 is not positive"]}
    monkeypatch.setattr(peaks_mod, "current_device", lambda measure_peaks=False: dict(dev))
    monkeypatch.setattr(device_mod, "software_versions", lambda: dict(software))
    assert cli.main(["device", "--refresh", "--cache-dir", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "cache" / "v" / cache_key("cpu-x86-test", software)
    assert json.loads(path.read_text()) == {"copy_gbps": 12.7} and f"stored peaks: {path}" in out
    assert "note: peak fp32_tflops" in out
    assert cli.main(["device", "--refresh", "--no-peaks"]) == 2


def test_merge_keeps_only_plausible_peaks(tmp_path, capsys) -> None:
    from pytest_gpuperf.store import baseline as bl

    device = {"key": "nvidia-h100-80gb-hbm3", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0",
              "sm_count": 132, "memory_gib": 79.2, "peaks": {"copy_gbps": 0.5, "bf16_tflops": 738.0}}
    entry = Entry(Statistics(1.0, noise=0.01, samples=100), method="events", cache="cold")
    src = tmp_path / "a" / "nvidia-h100-80gb-hbm3.yaml"
    bl.save(src, device, {"torch": "2.13.0"}, {"t::a": entry})
    out = tmp_path / "nvidia-h100-80gb-hbm3.yaml"
    assert cli.main(["merge", str(src), "-o", str(out)]) == 0
    assert bl.load(out).device["peaks"] == {"bf16_tflops": 738.0}


def test_without_pytests_cache_peaks_still_work(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rates=BROKEN_RUN)
    result = pytester.runpytest("--gpuperf", "-p", "no:cacheprovider", "--gpuperf-budget", "0.05")
    result.assert_outcomes(passed=1)


def test_a_small_memory_bound_result_is_held_against_copies_of_about_its_own_traffic() -> None:
    """A call whose data stays in the L2 between a graph's calls is held against copies of about its
    traffic measured the same way, where they are faster than the large copy; large results against
    the large copy alone."""
    from pytest_gpuperf.measure.peaks import MATCHED_COPY_BELOW, matched_copy_names

    assert matched_copy_names(8 << 20) == ["copy_8192kib_gbps"]
    assert matched_copy_names((8 << 20) + 40) == ["copy_8192kib_gbps", "copy_16384kib_gbps"]
    assert matched_copy_names(100) == ["copy_64kib_gbps"]
    assert matched_copy_names(MATCHED_COPY_BELOW) == []
    rates = {"copy_gbps": 3000.0, "copy_8192kib_gbps": 3900.0, "copy_16384kib_gbps": 3400.0, "copy_64kib_gbps": 90.0}
    asked = []
    peaks = Peaks({}, kind=CUDA, probe=lambda name, dtype: asked.append(name) or PeakReading(rates[name], 0.002))
    assert peaks.memory_ceiling((8 << 20) + 40) == "copy_8192kib_gbps"
    assert peaks.fraction("copy_8192kib_gbps", 3510.0) == pytest.approx(0.9)
    assert peaks.memory_ceiling(100) == "copy_gbps"  # a tiny copy is launch-bound: the large one is faster
    assert peaks.memory_ceiling(1 << 30) == "copy_gbps" and "copy_1048576kib_gbps" not in asked
    assert peaks.recordable()["copy_8192kib_gbps"] == 3900.0  # cached and written into baselines like the others


def test_a_result_faster_than_its_peak_sets_its_own_ceiling_and_tables_name_each_peak() -> None:
    from pytest_gpuperf.core.records import of_peak, raw_pct_of_peak
    from pytest_gpuperf.core.peak_names import peak_label

    assert of_peak(104.6) == (100.0, pytest.approx(0.046))
    assert of_peak(99.5) == (99.5, None)
    assert raw_pct_of_peak(Entry(Statistics(1.0), pct_of_peak=100.0, above_peak=0.046)) == pytest.approx(104.6)
    assert raw_pct_of_peak(Entry(Statistics(1.0), pct_of_peak=80.0)) == 80.0
    assert raw_pct_of_peak(Entry(Statistics(1.0))) is None
    assert [peak_label(n) for n in ("copy_gbps", "copy_8192kib_gbps", "copy_64kib_gbps", "bf16_tflops", None)] == \
        ["copy", "copy 8 MiB", "copy 64 KiB", "bf16 mm", "-"]
    assert peak_label("bf16_tflops", 0.046) == "kernel"


@pytest.mark.parametrize("stack, cached, expected", [
    ("same", {}, {"copy_gbps": 4254.5, "bf16_tflops": 688.2}),
    ("same", {"bf16_tflops": 700.0}, {"copy_gbps": 4254.5, "bf16_tflops": 700.0}),
    ("other torch", {}, {}),
    ("same", None, {"copy_gbps": 4254.5, "bf16_tflops": 688.2}),  # no pytest cache at all
])
def test_a_fresh_checkout_takes_the_peaks_of_a_baseline_recorded_under_its_stack(stack, cached, expected) -> None:
    """No pytest cache yet (a fresh CI machine; each xdist worker before any wrote one): the peaks are
    the baseline's where it was recorded under this torch, CUDA and driver, with the cache's winning,
    and none (measured on use) under another stack; an implausible stored peak is never taken."""
    from pathlib import Path
    from types import SimpleNamespace

    from pytest_gpuperf.plugin.session import GpuPerf
    from pytest_gpuperf.store.baseline import Baseline

    software = dict(software_versions())
    if stack != "same":
        software["torch"] = "0.0.1"
    device = {"key": "nvidia-h200", "name": "NVIDIA H200", "capability": "9.0",
              "peaks": {"copy_gbps": 4254.5, "bf16_tflops": 688.2, "fp32_tflops": 0.0}}
    cache = None if cached is None else SimpleNamespace(get=lambda key, default: cached)
    perf = SimpleNamespace(baseline=Baseline(Path("b.yaml"), device, software, "now"), device=device,
                           config=SimpleNamespace(cache=cache, rootpath=Path("."), getini=lambda name: ".pytest_cache"),
                           calibration=None, _peaks=None, _peaks_key=lambda: "k")
    perf._baseline_peaks = lambda: GpuPerf._baseline_peaks(perf)
    perf._peaks_file = lambda: Path("peaks")
    assert GpuPerf.peaks.fget(perf).values == expected


@pytest.mark.parametrize("changed", ["torch", "cuda", "driver"])
def test_peaks_of_another_torch_cuda_or_driver_are_not_taken(changed) -> None:
    from pytest_gpuperf.measure.peaks import same_stack

    a = {"torch": "2.11.0+cu130", "cuda": "13.0", "driver": "580.1", "triton": "3.6.0", "python": "3.12"}
    assert same_stack(a, dict(a, triton="3.7.0", python="3.11"))
    assert not same_stack(a, dict(a, **{changed: "other"}))


def test_a_benchmark_holds_its_rate_against_the_peak_with_its_entrys_fraction() -> None:
    """gpu_benchmark's record passes the baseline entry's fraction of the same peak to Peaks.fraction
    (None where the entry was held against another peak), so a known excess re-measures nothing."""
    import torch

    from pytest_gpuperf.measure.measurement import Measurement
    from pytest_gpuperf.plugin.fixtures import GpuBenchmark

    asked: list = []

    class FakePeaks:
        def fraction(self, name, rate, dtype_name=None, recorded=None):
            asked.append((name, dtype_name, recorded))
            return 1.05

    hook = SimpleNamespace(pytest_gpuperf_group=lambda item, group: group)
    item = SimpleNamespace(nodeid="t.py::test_mm[a]", originalname="test_mm", name="test_mm[a]",
                           get_closest_marker=lambda name: None, config=SimpleNamespace(hook=hook))
    bench = GpuBenchmark(SimpleNamespace(peaks=FakePeaks(), counters={}), item)
    m = Measurement([0.19] * 10, "events", 1, "cold")
    a = torch.zeros(4, 4, dtype=torch.bfloat16)
    entry = Entry(stats=Statistics(median_ms=0.19), peak="bf16_tflops", pct_of_peak=100.0, above_peak=0.026)
    result = bench._record(m, ((a,), {}), None, 10**11, entry)
    assert asked == [("bf16_tflops", "bfloat16", pytest.approx(1.026))] and result.above_peak == pytest.approx(0.05)
    bench._record(m, ((a,), {}), None, 10**11, Entry(stats=Statistics(median_ms=0.19), peak="copy_gbps",
                                                     pct_of_peak=80.0))
    assert asked[-1] == ("bf16_tflops", "bfloat16", None)
