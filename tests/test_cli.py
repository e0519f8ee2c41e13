"""cli.py: `gpuperf compare/show/plot/device` exit codes (0/1/2), one-line errors without tracebacks, and the
installed `gpuperf` console script."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cli_run import run

from pytest_gpuperf import cli
from pytest_gpuperf.core.records import Entry, Statistics
from pytest_gpuperf.store import baseline as bl
from pytest_gpuperf.store import results as results_store

DEVICE = {"key": "nvidia-h100-80gb-hbm3", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132,
          "memory_gib": 79.2, "peaks": {"copy_gbps": 3000.0, "bf16_tflops": 738.0}}
SOFTWARE = {"torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0"}
IDS = [f"perf_tests/test_softmax.py::test_softmax[{impl}-float32-4096x4096]" for impl in ("torch", "triton", "cuda")]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def entry(median_ms, mem=256 << 20) -> Entry:
    return Entry(Statistics(median_ms, noise=0.005, samples=200), gbps=268.0 / median_ms, pct_of_peak=8.9 / median_ms,
                 peak_memory_bytes=mem, method="events", cache="cold")


def write_baseline(path: Path, medians, device=DEVICE, mem=256 << 20) -> Path:
    bl.save(path, device, SOFTWARE, {i: entry(m, mem) for i, m in zip(IDS, medians)})
    return path


@pytest.fixture
def files(tmp_path):
    old = write_baseline(tmp_path / "old" / "nvidia-h100-80gb-hbm3.yaml", [0.10, 0.09, 0.085])
    same = write_baseline(tmp_path / "same" / "nvidia-h100-80gb-hbm3.yaml", [0.101, 0.0895, 0.0852])
    slow = write_baseline(tmp_path / "slow" / "nvidia-h100-80gb-hbm3.yaml", [0.10, 0.108, 0.085])
    return {"old": old, "same": same, "slow": slow, "dir": tmp_path}


def test_compare_same_is_exit_0(files, capsys):
    code, out, err = run(["compare", str(files["old"]), str(files["same"])], capsys)
    assert code == 0, out + err
    assert "3 tests: 3 same" in out and "test_softmax" in out and "triton-float32-4096x4096" in out


def test_compare_slower_is_exit_1(files, capsys):
    code, out, err = run(["compare", str(files["old"]), str(files["slow"])], capsys)
    assert code == 1
    assert "1 slower" in out and "+20.0%" in out
    assert "REGRESSION perf_tests/test_softmax.py::test_softmax[triton-float32-4096x4096]: slower: baseline" in out


def test_compare_threshold_option(files, capsys):
    assert run(["compare", str(files["old"]), str(files["slow"]), "--threshold", "25%"], capsys)[0] == 0
    assert run(["compare", str(files["old"]), str(files["slow"]), "--threshold=0.1"], capsys)[0] == 1


def test_compare_memory_growth_is_exit_1(files, capsys):
    big = write_baseline(files["dir"] / "big.yaml", [0.10, 0.09, 0.085], mem=512 << 20)
    code, out, _ = run(["compare", str(files["old"]), str(big)], capsys)
    assert code == 1 and "peak memory" in out


def test_compare_new_and_missing_do_not_fail(files, capsys):
    fewer = files["dir"] / "fewer.yaml"
    bl.save(fewer, DEVICE, SOFTWARE, {IDS[0]: entry(0.1), "perf_tests/t.py::test_new[x]": entry(1.0)})
    code, out, _ = run(["compare", str(files["old"]), str(fewer)], capsys)
    assert code == 0 and "2 missing" in out and "1 new" in out


def test_compare_json_against_yaml(files, capsys):
    device, results = results_store.load_results(files["slow"])
    path = files["dir"] / "run.json"
    results_store.write_json(path, results, device, SOFTWARE, "2026-11-23T10:00:00Z")
    assert run(["compare", str(files["old"]), str(path)], capsys)[0] == 1
    assert run(["compare", str(path), str(path)], capsys)[0] == 0


def test_compare_different_devices_notes_it(files, capsys):
    other = write_baseline(files["dir"] / "h200.yaml", [0.1, 0.09, 0.085],
                           device=dict(DEVICE, key="nvidia-h200", name="NVIDIA H200"))
    code, _, err = run(["compare", str(files["old"]), str(other)], capsys)
    assert code == 0 and "different devices" in err


@pytest.mark.parametrize("make_bad", ["missing", "corrupt", "schema", "json", "directory"])
def test_compare_bad_input_is_exit_2_with_one_line(files, capsys, make_bad):
    bad = files["dir"] / "bad.yaml"
    if make_bad == "corrupt":
        bad.write_text("schema_version: 1\nentries: {a: [\n")
    elif make_bad == "schema":
        bad.write_text("schema_version: 99\ndevice: {key: x}\n")
    elif make_bad == "json":
        bad = files["dir"] / "bad.json"
        bad.write_text("{oops")
    elif make_bad == "directory":
        bad = files["dir"]
    before = bad.read_bytes() if bad.is_file() else None
    code, out, err = run(["compare", str(files["old"]), str(bad)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], err
    if before is not None:
        assert bad.read_bytes() == before


@pytest.mark.parametrize("argv", [[], ["compare"], ["compare", "a"], ["frobnicate"], ["plot", "x.yaml"]])
def test_usage_errors_are_exit_2(argv, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2 and err.strip()


def test_bad_threshold_is_exit_2(files, capsys):
    code, _, err = run(["compare", str(files["old"]), str(files["same"]), "--threshold", "abc"], capsys)
    assert code == 2 and "threshold 'abc' is not a number" in err


def test_help_is_exit_0(capsys):
    assert cli.main(["--help"]) == 0
    assert "compare" in capsys.readouterr().out


def test_show_file(files, capsys):
    code, out, _ = run(["show", str(files["old"])], capsys)
    assert code == 0
    assert "NVIDIA H100 80GB HBM3" in out and "3 entries" in out and "cuda-float32-4096x4096" in out
    assert "torch 2.11.0+cu130" in out


def test_show_json(files, capsys):
    device, results = results_store.load_results(files["old"])
    path = files["dir"] / "r.json"
    results_store.write_json(path, results, device, SOFTWARE, "2026-11-23T10:00:00Z")
    code, out, _ = run(["show", str(path)], capsys)
    assert code == 0 and "triton-float32-4096x4096" in out


@pytest.fixture
def fake_device(monkeypatch):
    from pytest_gpuperf.measure import device as device_mod
    from pytest_gpuperf.measure import peaks as peaks_mod

    calls = []

    def current_device(measure_peaks=False):
        calls.append(measure_peaks)
        return dict(DEVICE)

    monkeypatch.setattr(peaks_mod, "current_device", current_device)
    monkeypatch.setattr(device_mod, "software_versions", lambda: dict(SOFTWARE))
    return calls


def test_show_default_is_this_devices_baseline(files, capsys, monkeypatch, fake_device):
    monkeypatch.chdir(files["dir"])
    (files["dir"] / "baselines").mkdir()
    write_baseline(files["dir"] / "baselines" / "nvidia-h100-80gb-hbm3.yaml", [0.1, 0.2, 0.3])
    code, out, _ = run(["show"], capsys)
    assert code == 0 and "baselines/nvidia-h100-80gb-hbm3.yaml" in out and "3 entries" in out
    assert fake_device == [False]  # show only needs the key, not the peaks


def test_show_default_without_baseline_is_exit_2(tmp_path, capsys, monkeypatch, fake_device):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["show"], capsys)
    assert code == 2 and "baselines/nvidia-h100-80gb-hbm3.yaml" in err and "--gpuperf-save" in err


def test_show_bad_file_is_exit_2(files, capsys):
    bad = files["dir"] / "x.yaml"
    bad.write_text(": : :\n  - [")
    code, _, err = run(["show", str(bad)], capsys)
    assert code == 2 and str(bad) in err and "corrupt YAML" in err
    assert run(["show", str(files["dir"] / "nope.yaml")], capsys)[0] == 2


def test_plot(files, capsys):
    out_png = files["dir"] / "plots" / "cmp.png"
    code, out, _ = run(["plot", str(files["old"]), str(files["slow"]), "-o", str(out_png)], capsys)
    assert code == 0 and out_png.read_bytes()[:8] == PNG_MAGIC


def test_plot_bad_input_is_exit_2(files, capsys):
    bad = files["dir"] / "bad.json"
    bad.write_text(json.dumps({"benchmarks": "nope"}))
    code, _, err = run(["plot", str(files["old"]), str(bad), "-o", str(files["dir"] / "x.png")], capsys)
    assert code == 2 and str(bad) in err
    assert not (files["dir"] / "x.png").exists()


def test_device(capsys, fake_device):
    code, out, _ = run(["device"], capsys)
    assert code == 0 and fake_device == [True]
    assert "key: nvidia-h100-80gb-hbm3" in out and "capability: 9.0" in out and "copy 3,000 GB/s" in out
    assert "torch 2.11.0+cu130" in out


def test_device_failure_is_one_line(capsys, monkeypatch):
    from pytest_gpuperf.measure import peaks as peaks_mod

    def broken(measure_peaks=False):
        raise RuntimeError("NVML: driver not loaded")

    monkeypatch.setattr(peaks_mod, "current_device", broken)
    code, _, err = run(["device"], capsys)
    assert code == 2 and "driver not loaded" in err and len(err.strip().splitlines()) == 1


def test_a_closed_output_pipe_is_no_error(tmp_path):
    """`gpuperf show FILE | head`: the reader closing the pipe early ends the command quietly."""
    exe = Path(sys.executable).parent / "gpuperf"
    if not exe.exists():
        pytest.skip("the gpuperf console script is not installed (pip install -e .)")
    big = tmp_path / "nvidia-h100-80gb-hbm3.yaml"  # more than a pipe's buffer of table
    bl.save(big, DEVICE, SOFTWARE, {f"t.py::test_{i}[case-{i}]": entry(0.1) for i in range(3000)})
    proc = subprocess.run(f"'{exe}' show '{big}' | head -1", shell=True, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() and "Error" not in proc.stderr, proc.stderr


def test_installed_console_script(files):
    exe = Path(sys.executable).parent / "gpuperf"
    if not exe.exists():
        pytest.skip("the gpuperf console script is not installed (pip install -e .)")
    proc = subprocess.run([str(exe), "compare", str(files["old"]), str(files["slow"])], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 slower" in proc.stdout
    proc = subprocess.run([str(exe), "show", str(files["dir"] / "nope.yaml")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "nope.yaml" in proc.stderr


def test_merge_learns_the_spread_and_then_compare_is_quiet(files, capsys, tmp_path):
    later = write_baseline(tmp_path / "later" / "nvidia-h100-80gb-hbm3.yaml", [0.10, 0.0985, 0.085])
    out = tmp_path / "merged.yaml"
    code, text, err = run(["merge", str(files["old"]), str(later), "-o", str(out)], capsys)
    assert code == 0, err
    assert "2 recordings of nvidia-h100-80gb-hbm3" in text and "3 entries" in text
    assert f"   6.4%  {IDS[1]}" in text  # the least reproducible tests are listed (sd of log 0.09, 0.0985)
    merged = bl.load(out)
    assert merged.entries[IDS[1]].history == [0.09, 0.0985]
    assert merged.software == SOFTWARE and merged.device["key"] == DEVICE["key"]
    # the 9% swing seen between two recordings is no regression against the merged baseline
    assert run(["compare", str(out), str(later)], capsys)[0] == 0
    assert run(["compare", str(files["old"]), str(later)], capsys)[0] == 1


def test_merge_and_compare_keep_timing_versions_apart(files, capsys, tmp_path):
    """Recordings of two timing versions are not combined (their difference is a change of method,
    not drift), and compare says when its two sides were timed differently."""
    later = tmp_path / "later" / "nvidia-h100-80gb-hbm3.yaml"
    bl.save(later, DEVICE, SOFTWARE, {i: replace(entry(m, 256 << 20), timing=2) for i, m in zip(IDS, [0.1, 0.0985, 0.085])})
    out = tmp_path / "merged.yaml"
    code, text, err = run(["merge", str(files["old"]), str(later), "-o", str(out)], capsys)
    assert code == 0, err
    assert "note: 3 tests (e.g. " in text and "also recorded with an older timing version" in text
    merged = bl.load(out)
    kept = merged.entries[IDS[1]]
    assert kept.stats.median_ms == pytest.approx(0.0985) and kept.history == [0.0985]
    code, text, err = run(["compare", str(files["old"]), str(later)], capsys)
    assert "3 tests were timed with different timing versions" in err and "version 1 in" in err


def test_compare_says_when_its_sides_were_timed_with_different_methods(files, capsys, tmp_path):
    """Results of one timing version taken without a baseline can differ in method (a call sampled
    back to back is graph-timed under 0.1 ms since that rule came in): compare says so."""
    later = tmp_path / "later" / "nvidia-h100-80gb-hbm3.yaml"
    bl.save(later, DEVICE, SOFTWARE, {i: replace(entry(m, 256 << 20), method="graph") for i, m in zip(IDS, [0.1, 0.1, 0.1])})
    code, text, err = run(["compare", str(files["old"]), str(later)], capsys)
    assert "3 tests were timed with different methods or cache modes" in err and "graph, cold L2 in" in err
    assert "timing versions" not in err
    # one version whose changes moved events and graphs in different versions: still one version
    from pytest_gpuperf.core.versions import TIMING_VERSION

    for path, method in ((files["old"], "events"), (later, "graph")):
        bl.save(path, DEVICE, SOFTWARE, {i: replace(entry(0.1, 256 << 20), method=method, timing=TIMING_VERSION)
                                         for i in IDS})
    code, text, err = run(["compare", str(files["old"]), str(later)], capsys)
    assert "3 tests were timed with different methods" in err and "timing versions" not in err


def test_merge_accepts_results_json_and_can_write_over_an_input(files, capsys, tmp_path):
    results = [replace(r, stats=r.stats.scaled(1.02), history=None)  # a run's result: one median of its own
               for r in results_store.results_from_baseline(bl.load(files["old"]))]
    js = tmp_path / "run.json"
    results_store.write_json(js, results, DEVICE, SOFTWARE, "2026-11-23T12:00:00")
    code, text, err = run(["merge", str(files["old"]), str(js), "-o", str(files["old"])], capsys)
    assert code == 0, err
    assert bl.load(files["old"]).entries[IDS[0]].history == pytest.approx([0.1, 0.102])


def test_merge_restart_starts_the_named_tests_history_again(files, capsys, tmp_path):
    """A faster kernel of the same work (counters unchanged): --restart drops the first input's
    recordings of the tests it names, the others' histories go on; a TEXT that names no test of the
    later inputs is one line, exit 2, and nothing is written."""
    results = [replace(r, stats=r.stats.scaled(0.9), history=None)
               for r in results_store.results_from_baseline(bl.load(files["old"]))]
    js = tmp_path / "run.json"
    results_store.write_json(js, results, DEVICE, SOFTWARE, "2026-11-29T12:00:00")
    out = tmp_path / "merged" / "nvidia-h100-80gb-hbm3.yaml"
    code, text, err = run(["merge", str(files["old"]), str(js), "-o", str(out), "--restart", "[triton-"], capsys)
    assert code == 0, err
    merged = bl.load(out).entries
    assert merged[IDS[1]].history == pytest.approx([0.081]) and merged[IDS[1]].stats.median_ms == pytest.approx(0.081)
    assert merged[IDS[0]].history == pytest.approx([0.1, 0.09])
    assert f"{IDS[1]}: its history starts again (--restart)" in text

    code, text, err = run(["merge", str(files["old"]), str(js), "-o", str(tmp_path / "x" / "nvidia-h100-80gb-hbm3.yaml"),
                           "--restart", "[tilelang-"], capsys)
    assert code == 2 and "--restart '[tilelang-'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_merge_bad_input_is_exit_2(files, capsys, tmp_path):
    other = write_baseline(tmp_path / "a100" / "nvidia-a100.yaml", [0.1, 0.1, 0.1], device=dict(DEVICE, key="nvidia-a100"))
    code, _, err = run(["merge", str(files["old"]), str(other), "-o", str(tmp_path / "m.yaml")], capsys)
    assert code == 2 and "nvidia-a100" in err and "one GPU model" in err
    corrupt = tmp_path / "corrupt.yaml"
    corrupt.write_text("entries: [")
    code, _, err = run(["merge", str(files["old"]), str(files["same"]), "-o", str(corrupt)], capsys)
    assert code == 2 and str(corrupt) in err and corrupt.read_text() == "entries: ["  # reported, never overwritten
    code, _, err = run(["merge", str(files["old"]), "-o", str(tmp_path / "m.yaml"), "--max-drift", "abc"], capsys)
    assert code == 2 and "--max-drift" in err and "abc" in err
    code, _, err = run(["merge", str(files["old"]), str(files["same"]), "-o", str(files["slow"])], capsys)
    assert code == 2 and "not one of the inputs" in err  # its entries would be lost
    code, _, err = run(["merge", str(files["old"]), "-o", str(tmp_path / "m.json")], capsys)
    assert code == 2 and "YAML" in err


def test_merge_keeps_peaks_and_survives_null_ones(files, capsys, tmp_path):
    no_peaks = write_baseline(tmp_path / "np" / "nvidia-h100-80gb-hbm3.yaml", [0.1, 0.09, 0.085],
                              device=dict(DEVICE, peaks=None))
    other = write_baseline(tmp_path / "o" / "nvidia-h100-80gb-hbm3.yaml", [0.1, 0.09, 0.085],
                           device=dict(DEVICE, peaks={"copy_gbps": 3100.0, "fp32_tflops": 51.0}))
    out = tmp_path / "m.yaml"
    assert run(["merge", str(files["old"]), str(no_peaks), str(other), "-o", str(out)], capsys)[0] == 0
    assert bl.load(out).device["peaks"] == {"copy_gbps": 3100.0, "bf16_tflops": 738.0, "fp32_tflops": 51.0}


def test_show_has_a_runs_column_for_merged_baselines(files, capsys, tmp_path):
    later = write_baseline(tmp_path / "later" / "nvidia-h100-80gb-hbm3.yaml", [0.10, 0.0985, 0.085])
    out = tmp_path / "merged.yaml"
    run(["merge", str(files["old"]), str(later), "-o", str(out)], capsys)
    code, text, _ = run(["show", str(out)], capsys)
    lines = text.splitlines()
    header = next(line for line in lines if " runs" in line)
    row = next(line for line in lines if "triton-float32-4096x4096" in line)
    at = header.index("runs") + len("runs")
    assert code == 0 and row[at - 4:at].strip() == "2"  # two recordings in its history
    code, text, _ = run(["compare", str(out), str(later)], capsys)
    assert code == 0
