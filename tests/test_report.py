"""report/ and store/results.py: terminal table, Markdown, pytest-benchmark JSON (read back by pytest-benchmark itself),
PNG plots, and load_results for baselines and JSON files."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from typed import judge, judged, result
from pytest_gpuperf.core.records import Entry
from pytest_gpuperf.report import markdown as md_report
from pytest_gpuperf.report import plots as plot_report
from pytest_gpuperf.report import rows as report_rows
from pytest_gpuperf.report import table as report_table
from pytest_gpuperf.store import baseline as bl
from pytest_gpuperf.store import results as results_store

DEVICE = {"key": "nvidia-h100-80gb-hbm3", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132,
          "memory_gib": 79.2, "peaks": {"copy_gbps": 3000.0, "bf16_tflops": 738.0}}
SOFTWARE = {"torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0", "driver": "580.1", "python": "3.12.3",
            "gpuperf": "0.1.0"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_results(seed=0, slow=None, with_baseline=True):
    """A softmax group (memory-bound: GB/s) and a matmul group (compute-bound: TFLOP/s), 3 impls x 2 cases."""
    rng = random.Random(seed)
    out = []
    for group, impls, cases in (("test_softmax", ("torch", "triton", "cuda"), ("float32-4096x4096", "bfloat16-1024x1024")),
                                ("test_matmul", ("torch", "triton", "compiled"), ("bfloat16-4096", "bfloat16-1024"))):
        for i, impl in enumerate(impls):
            for j, case in enumerate(cases):
                param = f"{impl}-{case}"
                eff = 0.5 + 0.15 * i - 0.2 * j
                if group == "test_softmax":
                    nbytes = 2 * 16384 * 16384 * 4 // (1 + 255 * j)
                    ms = nbytes / (3000e9 * eff) * 1e3
                    gbps, tflops, flops = nbytes / ms / 1e6, None, None
                    pct = gbps / 30
                else:
                    n = 4096 // (1 + 3 * j)
                    flops, nbytes = 2 * n ** 3, 3 * n * n * 2
                    ms = flops / (738e12 * eff) * 1e3
                    gbps, tflops = nbytes / ms / 1e6, flops / ms / 1e9
                    pct = tflops / 7.38
                data = [ms * (1 + rng.gauss(0, 0.01)) for _ in range(40)]
                nodeid = f"perf_tests/{group}.py::{group}[{param}]"
                out.append({"nodeid": nodeid, "name": group, "param": param, "group": group, "median_ms": ms,
                            "mean_ms": ms * 1.003, "min_ms": min(data), "max_ms": max(data), "stddev_ms": ms * 0.01,
                            "noise": 0.01, "ci_ms": [ms * 0.997, ms * 1.003], "samples": 40, "gbps": gbps,
                            "tflops": tflops, "pct_of_peak": pct, "bytes": nbytes, "flops": flops,
                            "bound": "memory" if group == "test_softmax" else "compute",
                            "peak_memory_bytes": 2 * nbytes, "method": "events", "cache": "cold",
                            "sm_clock_mhz": 1980, "throttle": [], "data": data})
    if with_baseline:
        for r in out:
            base = bl.entry_from_result(result(r))
            if r["param"] == (slow or "triton-float32-4096x4096"):
                for k in ("median_ms", "mean_ms", "min_ms", "max_ms", "stddev_ms"):
                    r[k] *= 1.2
                r["ci_ms"] = [x * 1.2 for x in r["ci_ms"]]
                r["data"] = [x * 1.2 for x in r["data"]]
                r["pct_of_peak"] /= 1.2
                r["gbps"] /= 1.2
            v = judge(base, r, 0.05)
            r.update(verdict=v.time, memory_verdict=v.memory, change=v.change, baseline=base, threshold=0.05,
                     noise_bound=v.noise_bound, fixed_bound=v.fixed_bound)
    return [result(r) for r in out]


# ---- terminal ----------------------------------------------------------------------------------------------


def column(lines, name):
    """A terminal table's column by its (right-aligned) header: {first cell of each row: its cell}."""
    header = next(line for line in lines if line.lstrip().startswith("param"))
    end = header.index(name) + len(name)
    return {line.split()[0]: line[:end].split()[-1] for line in lines
            if line.startswith("  ") and not line.lstrip().startswith("param")}


def test_terminal_lines_grouped_sorted_human_units():
    results = make_results()
    lines = report_table.terminal_lines(results, DEVICE, width=120)
    text = "\n".join(lines)
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)
    assert "NVIDIA H100 80GB HBM3" in lines[0]
    assert lines.index("test_matmul") < lines.index("test_softmax")
    for word in ("median", "±noise", "detects", "GB/s", "TFLOP/s", "% peak", "peak mem", "vs base", "verdict"):
        assert word in text
    assert "drift" not in text and "runs" not in text
    assert " µs" in text and " ms" in text and "MiB" in text and "GiB" in text
    slow_row = next(line for line in lines if "triton-float32-4096x4096" in line)
    assert "+20.0%" in slow_row and slow_row.rstrip().endswith("slower")
    # each judged row shows its smallest detectable change, under the "detects" header
    slow = next(r for r in results if r.id.param == "triton-float32-4096x4096")
    detects = column(lines[lines.index("test_softmax"):], "detects")
    assert detects[slow.id.param] == f"{slow.judged.noise_bound * 100:.1f}%" and 0 < slow.judged.noise_bound < 0.05
    # the impls of one case are adjacent
    rows = [line.split()[0] for line in lines if line.startswith("  ") and "float32-4096x4096" in line]
    assert rows == ["cuda-float32-4096x4096", "torch-float32-4096x4096", "triton-float32-4096x4096"]
    assert lines[-1].startswith("12 measured: 1 slower")


def test_terminal_lines_truncates_long_params_in_the_middle():
    r = make_results(with_baseline=False)[0]
    r.id = replace(r.id, param="triton-" + "x" * 200 + "-END")
    lines = report_table.terminal_lines([r], DEVICE, width=120)
    row = next(line for line in lines if "triton-" in line)
    assert len(row) <= 120 and "…" in row and "-END" in row


def test_terminal_lines_keep_params_readable_in_an_80_column_log():
    r = make_results(with_baseline=False)[0]
    r.id = replace(r.id, param="torch_efficient-bfloat16-causal-B4H16N4096D128")
    lines = report_table.terminal_lines([r], DEVICE, width=80)
    assert any(line.startswith("  torch_efficient-bfloat16-causal-B4H16N4096D128 ") for line in lines)


def test_terminal_lines_without_baseline_or_results():
    lines = report_table.terminal_lines(make_results(with_baseline=False), DEVICE)
    assert lines[-1] == "12 measured"
    assert report_table.terminal_lines([], DEVICE)[-1] == "no measurements"


# ---- markdown ----------------------------------------------------------------------------------------------


def test_markdown_is_a_table(tmp_path):
    results = make_results()
    md = md_report.markdown(results, DEVICE, SOFTWARE)
    lines = md.splitlines()
    assert lines[0].startswith("## ") and "NVIDIA H100" in lines[0]
    table = [line for line in lines if line.startswith("|")]
    headers = [line for line in table if line.startswith("| param |")]
    assert len(headers) == 2
    seps = [line for line in table if set(line) <= set("|:- ")]
    assert len(seps) == 2
    rows = [line for line in table if line not in headers and line not in seps]
    assert len(rows) == len(results)
    assert all(line.count("|") == 11 for line in rows)
    columns = [c.strip() for c in headers[0].strip("|").split("|")]
    assert "detects" in columns and "drift" not in columns and "runs" not in columns
    slow = next(r for r in results if r.id.param == "triton-float32-4096x4096")
    slow_row = next(line for line in rows if "`triton-float32-4096x4096`" in line)
    assert slow_row.strip("|").split("|")[columns.index("detects")].strip() == f"{slow.judged.noise_bound * 100:.1f}%"
    assert "### Regressions" in md and "triton-float32-4096x4096" in md and "**slower**" in md
    path = tmp_path / "sub" / "summary.md"
    md_report.write_markdown(path, results, DEVICE, SOFTWARE)
    assert path.read_text() == md


def test_markdown_escapes_pipes():
    r = make_results(with_baseline=False)[0]
    r.id = replace(r.id, param="a|b")
    assert "a\\|b" in md_report.markdown([r], DEVICE, SOFTWARE)


# ---- JSON --------------------------------------------------------------------------------------------------


def test_json_layout_and_units(tmp_path):
    results = make_results()
    path = tmp_path / "out" / "results.json"
    results_store.write_json(path, results, DEVICE, SOFTWARE, "2026-11-23T10:00:00+00:00")
    doc = json.loads(path.read_text())
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert doc["datetime"] == "2026-11-23T10:00:00+00:00"
    assert doc["machine_info"]["gpuperf_device"]["key"] == DEVICE["key"]
    assert len(doc["benchmarks"]) == len(results)
    b = next(b for b in doc["benchmarks"] if b["param"] == "triton-float32-4096x4096")
    r = next(r for r in results if r.id.param == "triton-float32-4096x4096")
    assert b["group"] == "test_softmax" and b["name"] == "test_softmax[triton-float32-4096x4096]"
    assert b["fullname"] == r.id.nodeid
    st = b["stats"]
    for k in ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
              "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total", "data", "iterations"):
        assert k in st, k
    assert st["median"] == pytest.approx(r.stats.median_ms / 1e3)  # seconds
    assert st["min"] == pytest.approx(r.stats.min_ms / 1e3) and st["rounds"] == 40
    assert st["data"][0] == pytest.approx(r.stats.data[0] / 1e3)
    assert st["q1"] <= st["median"] <= st["q3"]
    ex = b["extra_info"]
    assert ex["gbps"] == pytest.approx(r.gbps) and ex["verdict"] == "slower" and ex["device"] == DEVICE["key"]
    assert ex["change"] == pytest.approx(0.2, rel=1e-4)
    assert ex["baseline_median_ms"] == pytest.approx(r.baseline.stats.median_ms)
    # what a baseline entry keeps survives the JSON (gpuperf merge reads results JSON)
    _, loaded = results_store.load_results(path)
    back = next(x for x in loaded if x.id.nodeid == r.id.nodeid)
    assert back.id == r.id
    kept, kept_back = Entry.of(r).to_dict(), Entry.of(back).to_dict()
    for k in set(bl.ENTRY_KEYS) - {"group"}:
        value = kept.get(k)
        assert kept_back.get(k) == (pytest.approx(value) if isinstance(value, (int, float, list)) else value), k


def test_json_without_samples_and_with_nan(tmp_path):
    r = make_results(with_baseline=False)[0]
    r.stats = replace(r.stats, data=())
    r.gbps = float("nan")
    path = tmp_path / "r.json"
    results_store.write_json(path, [r], DEVICE, SOFTWARE, "2026-11-23T10:00:00Z")
    doc = json.loads(path.read_text())  # strict: no NaN
    st = doc["benchmarks"][0]["stats"]
    assert "data" not in st and doc["benchmarks"][0]["extra_info"]["gbps"] is None
    assert st["q1"] < st["median"] < st["q3"]


def _pytest_benchmark_cmd():
    exe = Path(sys.executable).parent / "pytest-benchmark"
    return str(exe) if exe.exists() else shutil.which("pytest-benchmark")


def test_pytest_benchmark_compare_reads_our_json(tmp_path):
    cmd = _pytest_benchmark_cmd()
    if not cmd:
        pytest.skip("the pytest-benchmark command is not installed")
    path = tmp_path / "results.json"
    results_store.write_json(path, make_results(), DEVICE, SOFTWARE, "2026-11-23T10:00:00+00:00")
    proc = subprocess.run([cmd, "compare", str(path), "--group-by", "group", "--columns", "min,median,max,rounds"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Failed to load" not in out, out
    assert "test_softmax[triton-float32-4096x4096]" in out and "test_matmul[compiled-bfloat16-1024]" in out, out
    assert "Median" in out


def test_pytest_benchmark_storage_loads_our_json(tmp_path):
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage

    path = tmp_path / "results.json"
    results_store.write_json(path, make_results(), DEVICE, SOFTWARE, "2026-11-23T10:00:00+00:00")
    storage = FileStorage(str(tmp_path / "storage"), logger=Logger(Logger.QUIET))
    benches = list(storage.load_benchmarks(str(path)))
    assert len(benches) == 12 and all(b["median"] > 0 and b["ops"] > 0 for b in benches)


# ---- load_results ------------------------------------------------------------------------------------------


def test_load_results_from_our_json_round_trip(tmp_path):
    results = make_results()
    path = tmp_path / "r.json"
    results_store.write_json(path, results, DEVICE, SOFTWARE, "2026-11-23T10:00:00Z")
    device, back = results_store.load_results(path)
    assert device["key"] == DEVICE["key"]
    by = {r.id.nodeid: r for r in back}
    for r in results:
        b = by[r.id.nodeid]
        assert b.stats.median_ms == pytest.approx(r.stats.median_ms) and b.id.group == r.id.group
        assert b.id.param == r.id.param and b.id.name == r.id.name and b.stats.noise == pytest.approx(0.01)
        assert b.gbps == pytest.approx(r.gbps) and b.stats.samples == 40


def test_load_results_from_baseline(tmp_path):
    results = make_results(with_baseline=False)
    path = tmp_path / "k.yaml"
    bl.save(path, DEVICE, SOFTWARE, {r.id.nodeid: bl.entry_from_result(r) for r in results})
    device, back = results_store.load_results(path)
    assert device["key"] == DEVICE["key"] and len(back) == 12
    b = next(x for x in back if x.id.param == "torch-bfloat16-4096")
    assert b.id.name == "test_matmul" and b.id.group == "test_matmul" and b.id.nodeid.endswith("[torch-bfloat16-4096]")


def test_load_results_from_real_pytest_benchmark_json(tmp_path):
    """A JSON written by pytest-benchmark itself (no gpuperf extras) reads as result records."""
    (tmp_path / "test_pb.py").write_text(textwrap.dedent("""\
        import pytest
        @pytest.mark.parametrize("n", [10, 20])
        def test_sum(benchmark, n):
            benchmark(sum, range(n))
        """))
    out = tmp_path / "pb.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:gpuperf",
                           "test_pb.py", f"--benchmark-json={out}", "--benchmark-max-time=0.01",
                           "--benchmark-min-rounds=5"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})  # not an xdist worker
    assert proc.returncode == 0, proc.stdout + proc.stderr
    device, back = results_store.load_results(out)
    assert device is None and len(back) == 2
    r = next(r for r in back if r.id.param == "20")
    assert r.id.name == "test_sum" and r.stats.median_ms > 0 and r.stats.noise is not None and r.stats.samples >= 5
    assert r.id.nodeid == "test_pb.py::test_sum[20]"


@pytest.mark.parametrize("name, content, words", [
    ("missing.json", None, "no such file"),
    ("bad.json", "{not json", "invalid JSON at line 1"),
    ("list.json", "[1, 2]", "without 'benchmarks'"),
    ("nostats.json", '{"benchmarks": [{"name": "x"}]}', "has no 'stats'"),
    ("zero.json", '{"benchmarks": [{"name": "x", "stats": {"median": 0}}]}', "stats.median must be a positive"),
])
def test_load_results_bad_json(tmp_path, name, content, words):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError) as err:
        results_store.load_results(path)
    assert str(path) in str(err.value) and words in str(err.value)


def test_load_results_bad_yaml_and_directory(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("schema_version: 7\ndevice: {key: k}\n")
    with pytest.raises(bl.BaselineError, match="schema_version 7"):
        results_store.load_results(path)
    with pytest.raises(ValueError, match="is a directory"):
        results_store.load_results(tmp_path)


# ---- plots -------------------------------------------------------------------------------------------------


def test_write_plots_one_png_per_group(tmp_path):
    results = make_results()
    paths = plot_report.write_plots(tmp_path / "plots", results)
    assert sorted(p.name for p in paths) == ["test_matmul.png", "test_softmax.png"]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000


def test_write_plots_with_a_baseline_object_and_time_only(tmp_path):
    results = make_results(with_baseline=False)
    base = bl.Baseline(tmp_path / "b.yaml", DEVICE, SOFTWARE, "2026-11-23T10:00:00Z",
                       {r.id.nodeid: bl.entry_from_result(replace(r, stats=r.stats.scaled(0.9))) for r in results})
    for r in results:  # a generic suite without cost models: time is all there is
        r.pct_of_peak = r.gbps = r.tflops = None
    paths = plot_report.write_plots(tmp_path, results, base)
    assert len(paths) == 2 and all(p.read_bytes()[:8] == PNG_MAGIC for p in paths)
    assert plot_report.write_plots(tmp_path / "none", []) == []
    for r in results:  # ids that do not split into impl-case uniquely still get one bar each
        r.id = replace(r.id, param=r.id.param.split("-", 1)[1])
    assert len(plot_report.write_plots(tmp_path / "dups", results)) == 2


def test_plot_files(tmp_path):
    out = plot_report.plot_files(tmp_path / "cmp.png", [("old", make_results(1, with_baseline=False)),
                                                    ("new", make_results(2))])
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_report_module_does_not_import_torch_or_matplotlib():
    code = ("import sys, pytest_gpuperf.report.table, pytest_gpuperf.report.markdown, pytest_gpuperf.report.plots, "
            "pytest_gpuperf.store.results, pytest_gpuperf.core.verdict, pytest_gpuperf.store.baseline, pytest_gpuperf.cli;"
            "print('torch' in sys.modules, 'matplotlib' in sys.modules)")
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.split() == ["False", "False"], proc.stdout + proc.stderr


def test_summary_says_how_many_unsure_results_could_not_see_the_threshold():
    results = make_results(with_baseline=False)[:6]
    # a judged test's noise bound is its smallest detectable change; `threshold` the configured one
    for r, verdict, bound in zip(results, ("unsure", "unsure", "unsure", "unsure", "same", "slower"),
                                 (0.26, 0.061, 0.08, 0.049, 0.02, 0.09)):
        judged(r, verdict=verdict, noise_bound=bound, threshold=0.05)
    lines = report_table.terminal_lines(results, DEVICE)
    assert lines[-1] == ("6 measured: 1 slower, 4 unsure (3 could not see a 5% change; they could see 6.1-26%, "
                         "median 8.0%), 1 same")
    assert f"**{lines[-1]}**" in md_report.markdown(results, DEVICE, SOFTWARE)


def test_summary_of_unsure_tests_with_different_thresholds():
    results = make_results(with_baseline=False)[:3]
    judged(results[0], verdict="unsure", noise_bound=0.12, threshold=0.1)
    judged(results[1], verdict="unsure", noise_bound=0.04, threshold=0.02)
    judged(results[2], verdict="unsure")  # could not compare medians: no bound
    assert report_rows.summary_counts(results) == (
        "3 measured: 3 unsure (2 could not see a change of their threshold (2-10%); they could see 4.0-12%)")
    judged(results[1], noise_bound=0.01)
    assert report_rows.summary_counts(results) == (
        "3 measured: 3 unsure (1 could not see a 10% change; it could see 12%)")


def test_detects_column_shows_each_judged_tests_noise_bound():
    results = make_results(with_baseline=False)[:2]
    judged(results[0], verdict="same", noise_bound=0.021, threshold=0.05)
    judged(results[1], verdict="new")  # no bound: no detectable change to show
    lines = report_table.terminal_lines(results, DEVICE)
    assert column(lines, "detects") == {results[0].id.param: "2.1%", results[1].id.param: "-"}


def test_show_of_a_baseline_has_a_runs_column(tmp_path):
    results = make_results(with_baseline=False)[:3]
    entries = {r.id.nodeid: bl.entry_from_result(r) for r in results}
    ids = list(entries)
    entries[ids[0]].history = [1.0, 1.01, 0.99]
    entries[ids[1]].history = [1.0]
    entries[ids[2]].history = None  # a schema 1 entry: one recording
    base = bl.Baseline(tmp_path / "b.yaml", DEVICE, SOFTWARE, "2026-11-23T10:00:00Z", entries)
    lines = report_table.terminal_lines(results_store.results_from_baseline(base), DEVICE)
    header = next(line for line in lines if line.lstrip().startswith("param"))
    assert "detects" not in header and "drift" not in header
    assert column(lines, "runs") == {results[0].id.param: "3", results[1].id.param: "1", results[2].id.param: "1"}
    md = md_report.markdown(results_store.results_from_baseline(base), DEVICE, SOFTWARE)
    assert "| runs |" in md
    # entries of one recording each (and a plain run's records) say nothing there: the column is left out
    entries[ids[0]].history = [1.0]
    lines = report_table.terminal_lines(results_store.results_from_baseline(base), DEVICE)
    assert not any("runs" in line for line in lines)
    assert not any("runs" in line for line in report_table.terminal_lines(results, DEVICE))


def test_compare_lines_show_detects_and_what_the_unsure_could_see():
    old = {f"t.py::test_k[{p}]": {"median_ms": 0.005, "noise": noise, "samples": 40}
           for p, noise in (("a", 0.2), ("b", 0.3), ("c", 0.4))}
    old["t.py::test_k[d]"] = {"median_ms": 1.0, "noise": 0.005, "samples": 200, "ci_ms": [0.999, 1.001]}
    new = {k: dict(v) for k, v in old.items()}
    new["t.py::test_k[d]"].update(median_ms=1.2, ci_ms=[1.199, 1.201])
    old, new = ({k: result(v) for k, v in side.items()} for side in (old, new))
    verdicts = {k: judge(old[k], new[k], 0.05) for k in old}
    lines = report_table.compare_lines(verdicts, old, new)
    header = next(line for line in lines if line.lstrip().startswith("param"))
    assert "detects" in header and "noise ±" not in header
    assert column(lines, "detects") == {p: f"{verdicts[f't.py::test_k[{p}]'].detectable * 100:.1f}%"
                                        for p in "abcd"}
    # past the noise bound and the threshold: the 1 ms test's bound (3.0%) is under its 5%
    d = verdicts["t.py::test_k[d]"]
    assert d.noise_bound < 0.05 and d.detectable == pytest.approx(0.05)
    unsure = [v for v in verdicts.values() if v.time == "unsure"]
    assert len(unsure) == 3 and all(v.noise_bound > v.threshold for v in unsure)
    bounds = sorted(v.noise_bound for v in unsure)
    (threshold,) = {v.threshold for v in unsure}  # held to the 1.25 µs a 5 µs kernel can show

    def pct(x):
        return f"{x * 100:.1f}%" if x < 0.1 else f"{x * 100:.0f}%"

    seen = pct(bounds[0]) if pct(bounds[0]) == pct(bounds[-1]) else f"{pct(bounds[0])[:-1]}-{pct(bounds[-1])}"
    summary = next(line for line in lines if line.startswith("4 tests: "))
    assert summary == (f"4 tests: 1 slower, 3 unsure (3 could not see a {threshold * 100:.3g}% change; they could "
                       f"see {seen}, median {pct(bounds[1])})")


def test_time_line_says_where_the_session_went():
    results = make_results(with_baseline=False)[:2]
    vars(results[0]).update(wall_s=1.5, first_call_s=1.0, measured_s=0.2, remeasured=1)
    vars(results[1]).update(wall_s=0.5, first_call_s=0.1, measured_s=0.2)
    assert report_rows.time_line(results, 10.0) == (
        "gpuperf: 10.0 s since start: 2 measurements 2.0 s (first calls, i.e. compiling and autotuning, 1.1 s; "
        "samples 0.4 s; warm-up and calibration 0.5 s; 1 repeated run (suspects re-measured, or recordings)), "
        "outside measurements 8.0 s")
    assert report_rows.time_line(results, 10.0, processes=2).startswith("gpuperf: 10.0 s since start in each of "
                                                                         "2 workers: 2 measurements 2.0 s")
    assert report_rows.time_line(results, 10.0, processes=2).endswith("outside measurements 18.0 s")
    results[0].phases = {"warm-up": 0.1, "power cap": 0.12, "samples": 0.3}
    results[1].phases = {"warm-up": 0.1, "calibration": 0.08, "samples": 0.4}
    assert "warm-up and calibration 0.5 s: around the samples 0.3 s, warm-up 0.2 s, power cap 0.1 s, " \
           "calibration 0.1 s; 1 repeated run" in report_rows.time_line(results, 10.0)


def test_replay_line_names_the_results_of_a_slowed_process_and_the_test_it_began_at():
    results = make_results(with_baseline=False)[:3]
    assert report_rows.replay_line(results) is None
    results[1].slow_replay_us, results[2].slow_replay_us = 0.17, 0.19
    line = report_rows.replay_line(results)
    assert line.startswith("gpuperf: 2 graph-timed results were measured while this process replayed CUDA graphs "
                           "0.17-0.19 µs per node slower than a fresh process (from ")
    assert f"from {results[1].id.nodeid} on" in line and "Replay state" in line


def test_the_tables_name_the_peak_each_result_is_held_against_and_which_results_set_their_own():
    """% of peak says of what: the large copy, a copy of about the result's own traffic, cuBLAS's
    matmul rate, or the kernel itself where it beat its probe (held to 100%, and said in a line)."""
    results = make_results(with_baseline=False)
    for r in results:
        r.peak = "copy_gbps" if r.id.group == "test_softmax" else "bf16_tflops"
    small = next(r for r in results if r.id.param == "torch-bfloat16-1024x1024")
    small.peak = "copy_8192kib_gbps"
    fast = next(r for r in results if r.id.param == "triton-bfloat16-4096")
    vars(fast).update(pct_of_peak=100.0, above_peak=0.046)
    lines = report_table.terminal_lines(results, DEVICE, width=120)
    of = {**column(lines[lines.index("test_matmul"):lines.index("test_softmax")], "of"),
          **column(lines[lines.index("test_softmax"):], "of")}
    assert of["triton-bfloat16-4096"] == "kernel" and of["torch-bfloat16-4096"] == "mm"  # 'bf16 mm', split
    assert of["torch-bfloat16-1024x1024"] == "MiB"
    assert "copy 8 MiB" in next(line for line in lines if "torch-bfloat16-1024x1024" in line)
    assert "100.0%" in next(line for line in lines if "triton-bfloat16-4096" in line)
    assert lines[-1].startswith("1 result beats the peak probe it is held against") and fast.id.nodeid in lines[-1]
    assert "4.6% over bf16 mm" in lines[-1]
    text = md_report.markdown(results, DEVICE, SOFTWARE)
    assert "4.6% over bf16 mm" in text and "| kernel |" in text
    small.peak = "copy_131072kib_gbps"  # the widest label fits its column: the rows stay aligned
    lines = report_table.terminal_lines(results, DEVICE, width=120)
    assert "copy 128 MiB" in next(line for line in lines if "torch-bfloat16-1024x1024" in line)
    header = next(line for line in lines[lines.index("test_softmax"):] if line.lstrip().startswith("param"))
    row = next(line for line in lines if "torch-bfloat16-1024x1024" in line)
    assert row.index("copy 128 MiB") + len("copy 128 MiB") == header.index(" of") + len(" of")
    del fast.above_peak
    assert "beats the peak probe" not in report_table.terminal_lines(results, DEVICE, width=120)[-1]


def test_a_regression_without_a_message_is_judged_at_its_own_threshold_0_included():
    """A regression listed without a stored message is judged again at the threshold its test asked
    for: 0% stays 0% (its smallest meaningful change, 0.125% here), not the 5% default."""
    base = result({"median_ms": 1.0, "noise": 0.001, "samples": 100, "ci_ms": [0.999, 1.001]})
    now = result({"median_ms": 1.03, "noise": 0.001, "samples": 100, "ci_ms": [1.029, 1.031], "threshold": 0.0})
    now.baseline = base
    judged(now, verdict="slower", regression=True)
    text = md_report.markdown([now], DEVICE, SOFTWARE)
    assert "slower: baseline 1.000 ms, now 1.030 ms, change +3.0% (threshold 0.125%" in text
