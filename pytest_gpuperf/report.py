"""Reports: the terminal table, Markdown (CI step summary), pytest-benchmark-compatible JSON, PNG plots,
and reading results back (``load_results``) for the ``gpuperf`` command.

Result records are the plain dicts the plugin produces (see plugin.py); every function here works
without torch, and matplotlib is imported only inside the plotting functions.
"""

from __future__ import annotations

import json
import math
import platform
import re
import statistics
from pathlib import Path
from typing import Any, Iterable

from .baseline import Baseline, BaselineError  # noqa: F401  (re-exported: load_results raises it)
from .baseline import atomic_write_text
from .baseline import load as load_baseline
from .compare import DEFAULT_THRESHOLD, as_number, fmt_bytes, fmt_ms, judge
from .timing import summarize

# ----------------------------------------------------------------------------------------------
# formatting helpers


def _fmt_rate(x: Any) -> str:
    x = as_number(x)
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _fmt_pct(x: Any, digits: int = 1) -> str:
    x = as_number(x)
    return "-" if x is None else f"{x:.{digits}f}%"


def _fmt_change(x: Any) -> str:
    x = as_number(x)
    return "" if x is None else f"{x * 100:+.1f}%".replace("-0.0%", "+0.0%")


def _fmt_mem(x: Any) -> str:
    x = as_number(x)
    return "-" if x is None else fmt_bytes(x)


def _middle_truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    keep = width - 1
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def _natural_key(text: str) -> list:
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok) for tok in re.split(r"(\d+)", text) if tok]


def _split_param(param: str) -> list[str]:
    return [p for p in str(param or "").split("-")]


def _row_key(param: str):
    """Sort rows so that the implementations of one case (dtype, size) are adjacent: the bundled suite's
    ids are impl-dtype-size, so sort by the rest first and then by the first part."""
    parts = _split_param(param)
    if len(parts) >= 2:
        return (_natural_key("-".join(parts[1:])), _natural_key(parts[0]))
    return (_natural_key(param or ""), [])


def _group_of(r: dict) -> str:
    return str(r.get("group") or r.get("name") or _name_of(r.get("nodeid", "")))


def _name_of(nodeid: str) -> str:
    last = nodeid.split("::")[-1]
    return last.split("[", 1)[0]


def _param_of(nodeid: str) -> str:
    last = nodeid.split("::")[-1]
    if "[" in last and last.endswith("]"):
        return last[last.index("[") + 1:-1]
    return ""


def _grouped(results: Iterable[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for r in results:
        groups.setdefault(_group_of(r), []).append(r)
    return [(g, sorted(rows, key=lambda r: _row_key(r.get("param") or ""))) for g, rows in
            sorted(groups.items(), key=lambda kv: _natural_key(kv[0]))]


def _verdict_text(r: dict) -> str:
    v = r.get("verdict") or ""
    mem = r.get("memory_verdict")
    if mem in ("slower", "faster"):
        v = (v + ", " if v else "") + ("more memory" if mem == "slower" else "less memory")
    return v


def _unresolvable(r: dict) -> bool:
    """An unsure result that no re-measurement could resolve: its floors and drift exceed the threshold."""
    fixed, threshold = as_number(r.get("fixed_bound")), as_number(r.get("threshold"))
    return fixed is not None and threshold is not None and fixed > threshold


def _summary_counts(results: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        v = r.get("verdict")
        if v:
            counts[v] = counts.get(v, 0) + 1
    mem_slower = sum(1 for r in results if r.get("memory_verdict") == "slower")
    measured = sum(1 for r in results if r.get("verdict") != "missing")
    text = f"{measured} measured"
    order = ("slower", "unsure", "faster", "same", "new", "missing")
    parts = [f"{counts[v]} {v}" for v in order if counts.get(v)]
    blind = sum(1 for r in results if r.get("verdict") == "unsure" and _unresolvable(r))
    if blind:
        i = next(k for k, p in enumerate(parts) if p.endswith(" unsure"))
        parts[i] += f" ({blind} too short or too variable between runs for their threshold to be seen)"
    if mem_slower:
        parts.append(f"{mem_slower} with more peak memory")
    return text + (": " + ", ".join(parts) if parts else "")


def time_line(results: list[dict], session_s: float) -> str:
    """Where the session's time went, so a slow suite says what to cut: first calls (compiling,
    autotuning), samples, the harness's own warm-up and calibration, and everything outside
    gpu_benchmark (inputs, references, correctness checks, profiling, collection)."""
    def total(key: str) -> float:
        return sum(as_number(r.get(key)) or 0.0 for r in results)

    wall, first, sampled = total("wall_s"), total("first_call_s"), total("measured_s")
    again = sum(int(as_number(r.get("remeasured")) or 0) for r in results)
    repeated = f"; {again} repeated runs (suspects re-measured, or recordings)" if again else ""
    return (f"gpuperf: {session_s:.1f} s since start: {len(results)} measurements {wall:.1f} s (first calls, i.e. "
            f"compiling and autotuning, {first:.1f} s; samples {sampled:.1f} s; warm-up and calibration "
            f"{max(wall - first - sampled, 0.0):.1f} s" + repeated
            + f"), outside measurements {max(session_s - wall, 0.0):.1f} s")


def _peaks_text(peaks: dict | None) -> str:
    shown = []
    for k, v in (peaks or {}).items():
        if as_number(v) is None:
            continue
        if k.endswith("_gbps"):
            shown.append(f"{k[:-5]} {_fmt_rate(v)} GB/s")
        elif k.endswith("_tflops"):
            shown.append(f"{k[:-7]} {_fmt_rate(v)} TFLOP/s")
        else:
            shown.append(f"{k} {v}")
    return ", ".join(shown)


def _device_line(device: dict | None) -> str:
    if not device:
        return "device: unknown"
    text = f"{device.get('name') or device.get('key')} ({device.get('key')})"
    peaks = _peaks_text(device.get("peaks"))
    if peaks:
        text += " · peaks: " + peaks
    return text


# ----------------------------------------------------------------------------------------------
# terminal table

_COLUMNS = (  # header, width, align
    ("median", 10, ">"),
    ("±noise", 7, ">"),
    ("drift", 6, ">"),  # a merged baseline's run-to-run spread (gpuperf show)
    ("GB/s", 7, ">"),
    ("TFLOP/s", 7, ">"),
    ("% peak", 6, ">"),
    ("peak mem", 10, ">"),
    ("vs base", 7, ">"),
)


def _cells(r: dict) -> list[str]:
    noise = as_number(r.get("noise"))
    drift = as_number(r.get("drift"))
    return [
        fmt_ms(as_number(r.get("median_ms"))),
        "-" if noise is None else f"{noise * 100:.1f}%",
        "-" if drift is None else f"{drift * 100:.1f}%",
        _fmt_rate(r.get("gbps")),
        _fmt_rate(r.get("tflops")),
        _fmt_pct(r.get("pct_of_peak")),
        _fmt_mem(r.get("peak_memory_bytes")),
        _fmt_change(r.get("change")),
    ]


#: Params are never cut shorter than this to fit a narrow terminal: pytest writes 80 columns into a CI
#: log, where "torch_…6D128" would no longer tell torch_flash from torch_cudnn or causal from full.
PARAM_MIN_WIDTH = 60


def _kept_columns(rows) -> list[int]:
    """Indices of the _COLUMNS that some row fills (the median always)."""
    rows = list(rows)
    return [k for k, (name, _, _) in enumerate(_COLUMNS)
            if name == "median" or any(cells[k] not in ("-", "") for cells in rows)]


def _param_width(longest: int, room: int) -> int:
    return max(5, min(longest, max(room, PARAM_MIN_WIDTH)))


def terminal_lines(results: list[dict], device: dict, width: int = 120) -> list[str]:
    """The summary table: one block per group, rows sorted by param (impls of one case adjacent).

    Columns that are empty for every result (e.g. TFLOP/s for a memory-bound suite, verdicts without a
    baseline) are left out; params longer than what fits ``width`` are shown in full up to
    PARAM_MIN_WIDTH characters and truncated in the middle beyond."""
    lines = [f"gpuperf: {_device_line(device)}"]
    if not results:
        return lines + ["no measurements"]
    cells = {id(r): _cells(r) for r in results}
    keep = _kept_columns(cells.values())
    columns = [_COLUMNS[k] for k in keep]
    show_verdict = any(_verdict_text(r) for r in results)
    verdict_w = max([7] + [len(_verdict_text(r)) for r in results]) if show_verdict else 0
    fixed = sum(w + 2 for _, w, _ in columns) + (2 + verdict_w if show_verdict else 0)
    longest = max(len(str(r.get("param") or r.get("name") or "")) for r in results)
    param_w = _param_width(longest, width - 2 - fixed)
    for group, rows in _grouped(results):
        lines.append("")
        lines.append(group)
        header = "  " + f"{'param':<{param_w}}"
        for name, w, _ in columns:
            header += "  " + f"{name:>{w}}"
        if show_verdict:
            header += "  " + "verdict"
        lines.append(header.rstrip())
        for r in rows:
            label = str(r.get("param") or r.get("name") or "")
            line = "  " + f"{_middle_truncate(label, param_w):<{param_w}}"
            row_cells = cells[id(r)]
            for k, (name, w, _) in zip(keep, columns):
                line += "  " + f"{row_cells[k]:>{w}}"
            if show_verdict:
                line += "  " + _verdict_text(r)
            lines.append(line.rstrip())
    lines.append("")
    lines.append(_summary_counts(results))
    return lines


def compare_lines(verdicts: dict, old: dict[str, dict], new: dict[str, dict], width: int = 120) -> list[str]:
    """The `gpuperf compare` table: test id -> Verdict, with the old and new records by test id."""
    records = []
    for key, v in verdicts.items():
        rec = new.get(key) or old.get(key) or {}
        records.append((key, rec, v))
    if not records:
        return ["nothing to compare: both files are empty"]
    heads = ("old", "new", "change", "noise ±", "mem", "verdict")
    widths = (10, 10, 8, 8, 8, max(7, max(len(v.time) for _, _, v in records)))
    fixed = sum(w + 2 for w in widths)
    longest = max(len(str(rec.get("param") or _param_of(key) or _name_of(key))) for key, rec, _ in records)
    param_w = _param_width(longest, width - 2 - fixed)
    groups: dict[str, list] = {}
    for key, rec, v in records:
        g = str(rec.get("group") or rec.get("name") or _name_of(key))
        groups.setdefault(g, []).append((key, rec, v))
    lines = []
    for g in sorted(groups, key=_natural_key):
        rows = sorted(groups[g], key=lambda t: _row_key(t[1].get("param") or _param_of(t[0])))
        lines.append(g)
        header = "  " + f"{'param':<{param_w}}" + "".join(f"  {h:>{w}}" for h, w in zip(heads[:-1], widths))
        lines.append(header + f"  {heads[-1]}")
        for key, rec, v in rows:
            label = str(rec.get("param") or _param_of(key) or _name_of(key))
            mem = "" if v.memory in ("same", "new", "missing") else ("+" if v.memory == "slower" else "-")
            if v.memory_change is not None and mem:
                mem = _fmt_change(v.memory_change)
            cells = (fmt_ms(v.base_ms) if v.base_ms else "-", fmt_ms(v.now_ms) if v.now_ms else "-",
                     _fmt_change(v.change), "" if v.noise_bound is None else f"{v.noise_bound * 100:.1f}%",
                     mem)
            line = "  " + f"{_middle_truncate(label, param_w):<{param_w}}"
            line += "".join(f"  {c:>{w}}" for c, w in zip(cells, widths))
            line += f"  {v.time}" + {"slower": " (more memory)", "faster": " (less memory)"}.get(v.memory, "")
            lines.append(line.rstrip())
        lines.append("")
    counts: dict[str, int] = {}
    for _, _, v in records:
        counts[v.time] = counts.get(v.time, 0) + 1
    mem_slower = sum(1 for _, _, v in records if v.memory == "slower")
    order = ("slower", "unsure", "faster", "same", "new", "missing")
    summary = f"{len(records)} tests: " + ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))
    if mem_slower:
        summary += f", {mem_slower} with more peak memory"
    lines.append(summary)
    for key, _, v in records:
        if v.time == "slower" or v.memory == "slower":
            lines.append(f"REGRESSION {key}: {v.message}")
    return lines


# ----------------------------------------------------------------------------------------------
# Markdown

_MD_VERDICT = {
    "slower": "🔴 **slower**",
    "faster": "🟢 faster",
    "same": "⚪ same",
    "unsure": "🟡 unsure",
    "new": "🆕 new",
    "missing": "⚫ missing",
}


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: list[dict], device: dict, software: dict) -> str:
    """The summary as GitHub-flavoured Markdown (a CI step summary): one table per group."""
    out = [f"## pytest-gpuperf: {_md_escape((device or {}).get('name') or (device or {}).get('key') or 'unknown device')}",
           ""]
    info = []
    if device:
        info.append(f"device key `{device.get('key')}`")
        peaks = _peaks_text(device.get("peaks"))
        if peaks:
            info.append("peaks: " + peaks)
    for k, v in (software or {}).items():
        if v:
            info.append(f"{k} {v}")
    if info:
        out += [_md_escape(" · ".join(info)), ""]
    out += [f"**{_summary_counts(results)}**", ""]
    regressions = [r for r in results if r.get("verdict") == "slower" or r.get("memory_verdict") == "slower"]
    if regressions:
        out.append("### Regressions")
        out.append("")
        for r in regressions:
            msg = r.get("message") or ""
            if not msg and isinstance(r.get("baseline"), dict):
                msg = judge(r["baseline"], r, float(r.get("threshold") or 0.05)).message
            out.append(f"- `{_md_escape(r.get('nodeid', ''))}`: {_md_escape(msg or r.get('verdict'))}")
        out.append("")
    keep = _kept_columns(_cells(r) for r in results)
    for group, rows in _grouped(results):
        out.append(f"### {_md_escape(group)}")
        out.append("")
        out.append("| param | " + " | ".join(_COLUMNS[k][0] for k in keep) + " | verdict |")
        out.append("| :-- | " + "--: | " * len(keep) + ":-- |")
        for r in rows:
            cells = [_cells(r)[k] for k in keep]
            verdict = _MD_VERDICT.get(r.get("verdict") or "", r.get("verdict") or "")
            mem = r.get("memory_verdict")
            if mem in ("slower", "faster"):
                verdict += f" (peak memory {'**grew**' if mem == 'slower' else 'shrank'})"
            label = r.get("param") or r.get("name") or ""
            out.append("| " + " | ".join([f"`{_md_escape(label)}`"] + [_md_escape(c) for c in cells]
                                         + [verdict]) + " |")
        out.append("")
    return "\n".join(out)


def write_markdown(path: Path, results: list[dict], device: dict, software: dict) -> None:
    atomic_write_text(Path(path), markdown(results, device, software))


# ----------------------------------------------------------------------------------------------
# JSON (pytest-benchmark's format)

_EXTRA_KEYS = ("gbps", "tflops", "pct_of_peak", "bytes", "flops", "bound", "peak_memory_bytes", "noise", "ci_ms",
               "method", "calls_per_sample", "cache", "timing", "node_gap_ms", "sm_clock_mhz", "throttle", "verdict",
               "memory_verdict", "change", "memory_change", "noise_bound", "fixed_bound", "threshold", "message",
               "remeasured", "warnings", "wall_s", "measured_s", "first_call_s")


def _finite(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats become None, tuples lists, unknown objects strings."""
    if obj is None:
        return None
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            return _finite(item())
        except Exception:  # pragma: no cover - defensive
            pass
    return str(obj)


def _stats_seconds(r: dict) -> dict:
    """pytest-benchmark's "stats" block, in seconds."""
    data_ms = [float(x) for x in (r.get("data") or []) if as_number(x) is not None and x > 0]
    stats: dict[str, Any] = {}
    if data_ms:
        try:
            from pytest_benchmark.stats import Stats

            s = Stats()
            for x in data_ms:
                s.update(x / 1e3)
            stats = s.as_dict()
        except Exception:
            stats = {}
    median = (as_number(r.get("median_ms")) or (statistics.median(data_ms) if data_ms else 0.0)) / 1e3
    over = {
        "min": r.get("min_ms"), "max": r.get("max_ms"), "mean": r.get("mean_ms"),
        "stddev": r.get("stddev_ms"), "median": r.get("median_ms"),
    }
    for k, v in over.items():
        if as_number(v) is not None:
            stats[k] = float(v) / 1e3
    stats.setdefault("median", median)
    stats.setdefault("mean", median)
    stats.setdefault("min", median)
    stats.setdefault("max", median)
    stats.setdefault("stddev", 0.0)
    rounds = int(as_number(r.get("samples")) or len(data_ms) or 1)
    stats["rounds"] = rounds
    q1, q3 = as_number(r.get("q1_ms")), as_number(r.get("q3_ms"))
    if q1 is not None and q3 is not None and "q1" not in stats:
        stats["q1"], stats["q3"], stats["iqr"] = q1 / 1e3, q3 / 1e3, (q3 - q1) / 1e3
        stats["ld15iqr"] = max(stats["min"], stats["q1"] - 1.5 * stats["iqr"])
        stats["hd15iqr"] = min(stats["max"], stats["q3"] + 1.5 * stats["iqr"])
        stats["iqr_outliers"] = stats["stddev_outliers"] = 0
        stats["outliers"] = "0;0"
    if "q1" not in stats:
        sigma = (as_number(r.get("noise")) or 0.0) * stats["median"]
        stats["q1"] = stats["median"] - 0.6745 * sigma
        stats["q3"] = stats["median"] + 0.6745 * sigma
        stats["iqr"] = stats["q3"] - stats["q1"]
        stats["ld15iqr"] = max(stats["min"], stats["q1"] - 1.5 * stats["iqr"])
        stats["hd15iqr"] = min(stats["max"], stats["q3"] + 1.5 * stats["iqr"])
        stats["iqr_outliers"] = 0
        stats["stddev_outliers"] = 0
        stats["outliers"] = "0;0"
    stats["ops"] = 1.0 / stats["mean"] if stats["mean"] > 0 else 0.0
    stats["total"] = sum(data_ms) / 1e3 if data_ms else stats["mean"] * rounds
    order = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
             "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total")
    out = {k: stats[k] for k in order}
    if data_ms:
        out["data"] = [x / 1e3 for x in data_ms]
    # each sample is already the time of one call (graph/batched samples are divided by the calls they hold)
    out["iterations"] = int(as_number(r.get("iterations")) or as_number(r.get("calls_per_sample")) or 1)
    return out


def _gpuperf_version() -> str:
    try:
        from . import __version__

        return __version__
    except ImportError:  # an editable install that sees the package as a namespace package
        try:
            from importlib.metadata import version

            return version("pytest-gpuperf")
        except Exception:
            return "unknown"


def _machine_info(device: dict, software: dict) -> dict:
    info = {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
        "cpu": {},
        "gpuperf_device": device or {},
        "gpuperf_software": software or {},
        "gpuperf_version": _gpuperf_version(),
    }
    return info


def _commit_info() -> dict:
    try:
        from pytest_benchmark.utils import get_commit_info

        return get_commit_info()
    except Exception:
        return {}


def benchmark_json(results: list[dict], device: dict, software: dict, started_at: str) -> dict:
    """The document that write_json writes (pytest-benchmark's JSON layout, times in seconds)."""
    try:
        from pytest_benchmark import __version__ as pb_version
    except Exception:  # pragma: no cover - pytest-benchmark is a dependency
        pb_version = "5.1.0"
    benches = []
    for r in results:
        if as_number(r.get("median_ms")) is None:
            continue  # "missing" rows and the like have no measurement
        nodeid = r.get("nodeid") or r.get("name") or ""
        name = r.get("name") or _name_of(nodeid)
        param = r.get("param") or _param_of(nodeid)
        extra = {k: r.get(k) for k in _EXTRA_KEYS if k in r}
        base = r.get("baseline")
        if isinstance(base, dict):
            extra["baseline_median_ms"] = base.get("median_ms")
        extra["median_ms"] = r.get("median_ms")
        extra["device"] = (device or {}).get("key")
        benches.append({
            "group": _group_of(r),
            "name": f"{name}[{param}]" if param else name,
            "fullname": nodeid,
            "params": r.get("params") if isinstance(r.get("params"), dict) else ({"id": param} if param else None),
            "param": param or None,
            "extra_info": extra,
            "options": {
                "disable_gc": False,
                "timer": f"gpuperf.{r.get('method') or 'events'}",
                "min_rounds": int(as_number(r.get("samples")) or 1),
                "max_time": None,
                "min_time": None,
                "warmup": True,
            },
            "stats": _stats_seconds(r),
        })
    return _finite({
        "machine_info": _machine_info(device, software),
        "commit_info": _commit_info(),
        "benchmarks": benches,
        "datetime": started_at,
        "version": pb_version,
    })


def write_json(path: Path, results: list[dict], device: dict, software: dict, started_at: str) -> None:
    """Results in pytest-benchmark's JSON format (``pytest-benchmark compare FILE`` reads it)."""
    doc = benchmark_json(results, device, software, started_at)
    atomic_write_text(Path(path), json.dumps(doc, indent=2, allow_nan=False) + "\n")


# ----------------------------------------------------------------------------------------------
# reading results back


def _from_benchmark(path: Path, b: Any, index: int) -> dict:
    if not isinstance(b, dict) or not isinstance(b.get("stats"), dict):
        raise ValueError(f"{path}: benchmark #{index} has no 'stats' mapping; not a pytest-benchmark JSON file")
    st = b["stats"]
    fullname = str(b.get("fullname") or b.get("name") or f"benchmark-{index}")
    name_full = str(b.get("name") or fullname.split("::")[-1])
    median = as_number(st.get("median"))
    if median is None or median <= 0:
        raise ValueError(f"{path}: benchmark {fullname!r}: stats.median must be a positive number of seconds, "
                         f"got {st.get('median')!r}")
    extra = b.get("extra_info") if isinstance(b.get("extra_info"), dict) else {}
    data_ms = [float(x) * 1e3 for x in (st.get("data") or []) if as_number(x) is not None]

    def ms(key):
        v = as_number(st.get(key))
        return None if v is None else v * 1e3

    noise = as_number(extra.get("noise"))
    if noise is None:
        noise = summarize(data_ms).noise if len(data_ms) >= 2 else None
    if noise is None and as_number(st.get("iqr")) is not None:
        noise = float(st["iqr"]) / 1.349 / median
    rec = {
        "nodeid": fullname,
        "name": name_full.split("[", 1)[0],
        "param": str(b.get("param") or (_param_of(name_full) if "[" in name_full else "")),
        "group": str(b.get("group") or name_full.split("[", 1)[0]),
        "median_ms": median * 1e3,
        "mean_ms": ms("mean"),
        "min_ms": ms("min"),
        "max_ms": ms("max"),
        "stddev_ms": ms("stddev"),
        "noise": noise,
        "samples": int(as_number(st.get("rounds")) or len(data_ms) or 1),
    }
    for k in _EXTRA_KEYS:
        if k in extra and k not in ("noise",):
            rec[k] = extra[k]
    if data_ms:
        rec["data"] = data_ms
    return rec


def load_results(path) -> tuple[dict | None, list[dict]]:
    """Read a baseline YAML or a results JSON (ours or pytest-benchmark's) into result records.

    Returns (device or None, records). Raises BaselineError (baselines) or ValueError naming the file."""
    device, _, records = load_recording(path)
    return device, records


def load_recording(path) -> tuple[dict | None, dict, list[dict]]:
    """load_results, plus the software versions the file records ({} when it records none)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected a baseline .yaml or a results .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc})") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            if path.suffix.lower() == ".json":
                raise ValueError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})") from None
            doc = None
        if isinstance(doc, dict) and "benchmarks" in doc:
            benches = doc["benchmarks"]
            if not isinstance(benches, list):
                raise ValueError(f"{path}: 'benchmarks' is not a list; not a pytest-benchmark JSON file")
            info = doc.get("machine_info") if isinstance(doc.get("machine_info"), dict) else {}
            device = info.get("gpuperf_device") or None
            software = info.get("gpuperf_software") if isinstance(info.get("gpuperf_software"), dict) else {}
            return device, software, [_from_benchmark(path, b, i) for i, b in enumerate(benches)]
        if path.suffix.lower() == ".json" and not (isinstance(doc, dict) and "schema_version" in doc):
            raise ValueError(f"{path}: a JSON file without 'benchmarks': not a pytest-benchmark/gpuperf results file")
    base = load_baseline(path)
    if base is None:  # pragma: no cover - raced with a delete
        raise ValueError(f"{path}: no such file")
    return base.device, base.software, results_from_baseline(base)


def results_from_baseline(base: Baseline) -> list[dict]:
    """A baseline's entries as result records."""
    out = []
    for nodeid, entry in base.entries.items():
        rec = dict(entry)
        rec["nodeid"] = nodeid
        rec["name"] = _name_of(nodeid)
        rec["param"] = _param_of(nodeid)
        rec["group"] = entry.get("group") or rec["name"]
        out.append(rec)
    return out


# ----------------------------------------------------------------------------------------------
# plots

# no reds/greens that could be mistaken for the slower/faster outlines
_PALETTE = ("#4C72B0", "#DD8452", "#8172B3", "#64B5CD", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974",
            "#2F4B7C", "#A05195")
_VERDICT_COLOR = {"slower": "#C0392B", "faster": "#1E8449", "unsure": "#B9770E"}


def _metric(rows: list[dict]) -> tuple[str, str, bool]:
    """(key, axis label, higher_is_better) for a set of records."""
    for key, label in (("pct_of_peak", "% of peak"), ("gbps", "GB/s"), ("tflops", "TFLOP/s")):
        if rows and all(as_number(r.get(key)) is not None for r in rows):
            return key, label, True
    for key, label in (("pct_of_peak", "% of peak"), ("gbps", "GB/s"), ("tflops", "TFLOP/s")):
        if sum(as_number(r.get(key)) is not None for r in rows) * 2 >= len(rows) > 0:
            return key, label, True
    return "median_ms", "median time (ms), lower is better", False


def _value(r: dict | None, key: str, like: dict | None = None) -> float | None:
    """r's value of key; for a baseline entry without it, derived from ``like`` (throughput ~ 1/time)."""
    if not r:
        return None
    v = as_number(r.get(key))
    if v is not None or like is None or key == "median_ms":
        return v
    lv, lm, rm = as_number(like.get(key)), as_number(like.get("median_ms")), as_number(r.get("median_ms"))
    if lv is None or not lm or not rm:
        return None
    return lv * lm / rm


def _fmt_value(v: float, key: str) -> str:
    if key == "pct_of_peak":
        return f"{v:.0f}%" if v >= 10 else f"{v:.1f}%"
    if key == "median_ms":
        return fmt_ms(v)
    return _fmt_rate(v)


def _impl_case(rows: list[dict]) -> list[tuple[str, str, dict]]:
    """(impl, case, record): the first part of an impl-dtype-size id is the implementation. Falls back to
    one bar per param (or per test id) when that split is not unique."""
    params = [str(r.get("param") or "") for r in rows]
    if params and all(len(_split_param(p)) >= 2 for p in params):
        items = [(_split_param(p)[0], "-".join(_split_param(p)[1:]), r) for p, r in zip(params, rows)]
        if len({(i, c) for i, c, _ in items}) == len(items):
            return items
    items = [(_group_of(r), p or str(r.get("name") or ""), r) for p, r in zip(params, rows)]
    if len({(i, c) for i, c, _ in items}) == len(items):
        return items
    return [(_group_of(r), str(r.get("nodeid") or p), r) for p, r in zip(params, rows)]


def _safe_filename(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "group"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _plot_group(plt, group: str, rows: list[dict], base_entries: dict, title_suffix: str):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    key, label, higher = _metric(rows)
    items = _impl_case(rows)
    impls = sorted({i for i, _, _ in items}, key=_natural_key)
    cases = sorted({c for _, c, _ in items}, key=_natural_key)
    color = {impl: _PALETTE[k % len(_PALETTE)] for k, impl in enumerate(impls)}
    by = {(i, c): r for i, c, r in items}

    n_slots = len(impls)
    bar_h = 0.8 / n_slots
    fig_h = max(2.6, 0.32 * len(items) + 0.35 * len(cases) + 1.6)
    fig, ax = plt.subplots(figsize=(11, fig_h))
    ys, labels_y = [], []
    any_base = False
    verdicts_seen: set[str] = set()
    vmax, vmin = 0.0, math.inf
    for ci, case in enumerate(cases):
        y0 = (len(cases) - 1 - ci)  # first case at the top
        ys.append(y0)
        labels_y.append(case or group)
        present = [impl for impl in impls if (impl, case) in by]
        for k, impl in enumerate(present):
            r = by[(impl, case)]
            y = y0 + 0.4 - bar_h * (k + 0.5) - (0.4 - bar_h * len(present) / 2)
            v = _value(r, key)
            if v is None:
                continue
            vmax, vmin = max(vmax, v), min(vmin, v) if v > 0 else vmin
            verdict = r.get("verdict")
            ax.barh(y, v, height=bar_h * 0.88, color=color[impl],
                    edgecolor=_VERDICT_COLOR.get(verdict, "none"), linewidth=2 if verdict in _VERDICT_COLOR else 0)
            base = r.get("baseline") if isinstance(r.get("baseline"), dict) else base_entries.get(r.get("nodeid"))
            bv = _value(base, key, like=r)
            text = _fmt_value(v, key)
            if key != "median_ms" and as_number(r.get("median_ms")):
                text += f"  {fmt_ms(as_number(r.get('median_ms')))}"
            if bv is not None:
                any_base = True
                vmax = max(vmax, bv)
                ax.plot([bv, bv], [y - bar_h * 0.48, y + bar_h * 0.48], color="black", linewidth=2.2,
                        solid_capstyle="butt", zorder=3)
                change = as_number(r.get("change"))
                if change is None and as_number(base.get("median_ms")) and as_number(r.get("median_ms")):
                    change = r["median_ms"] / base["median_ms"] - 1.0
                if change is not None and (abs(change) >= 0.005 or verdict in _VERDICT_COLOR):
                    text += f"  {change * 100:+.1f}% time"
            if verdict in _VERDICT_COLOR:
                text += f" ({verdict})"
                verdicts_seen.add(verdict)
            mem_verdict = r.get("memory_verdict")
            mem_color = None
            if mem_verdict in ("slower", "faster"):
                mb, mn = as_number((base or {}).get("peak_memory_bytes")), as_number(r.get("peak_memory_bytes"))
                grew = "grew" if mem_verdict == "slower" else "shrank"
                text += f"  peak mem {grew}" + (f" {mn / mb * 100 - 100:+.0f}%" if mb and mn else "")
                mem_color = _VERDICT_COLOR[mem_verdict]
            ax.annotate(text, xy=(max(v, bv or 0), y), xytext=(4, 0), textcoords="offset points",
                        va="center", ha="left", fontsize=8.5,
                        color=_VERDICT_COLOR.get(verdict) or mem_color or "#222222",
                        fontweight="bold" if "slower" in (verdict, mem_verdict) else None,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.5})
    ax.set_yticks(ys)
    ax.set_yticklabels([_middle_truncate(t, 32) for t in labels_y], fontsize=9.5)
    ax.set_ylim(-0.6, len(cases) - 0.4)
    for y in ys[:-1]:
        ax.axhline(y - 0.5, color="#DDDDDD", linewidth=0.8, zorder=0)
    if key == "pct_of_peak" and vmax >= 40:
        ax.axvline(100, color="#888888", linestyle="--", linewidth=1, zorder=0)
        ax.set_xlim(0, max(100.0, vmax) * 1.4)
    elif key == "pct_of_peak":  # all far from peak: zoom in rather than squash the bars against 0
        ax.set_xlim(0, (vmax or 1.0) * 1.8)
        label += " (100% is off the scale)"
    elif not higher and vmin and vmax / vmin > 20:  # times spanning sizes: a log axis keeps all bars readable
        ax.set_xscale("log")
        ax.set_xlim(vmin / 3, vmax * 12)
        label += " (log scale)"
    else:
        ax.set_xlim(0, (vmax or 1.0) * 1.38)
    ax.set_xlabel(label)
    ax.grid(axis="x", color="#EEEEEE")
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [Patch(color=color[i], label=i) for i in impls] if impls != [group] else []
    if any_base:
        handles.append(Line2D([0], [0], color="black", linewidth=2.2, label="baseline"))
    for verdict in ("slower", "faster", "unsure"):
        if verdict in verdicts_seen:
            handles.append(Patch(facecolor="white", edgecolor=_VERDICT_COLOR[verdict], linewidth=2, label=verdict))
    if handles:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(len(handles), 8),
                  fontsize=8.5, frameon=False, borderaxespad=0.2, handlelength=1.6, columnspacing=1.2)
    better = "higher is better" if higher else ""
    ax.set_title(f"{group}: {label}{', ' + better if better else ''}{title_suffix}", fontsize=11, loc="left",
                 pad=24)
    fig.tight_layout()
    return fig


def write_plots(directory: Path, results: list[dict], baseline=None, device: dict | None = None) -> list[Path]:
    """One PNG per group: implementations side by side (as % of peak where known), with baseline markers.

    ``baseline`` may be a Baseline, a dict test id -> entry, or None; a record's own "baseline" entry wins."""
    if not results:
        return []
    plt = _plt()
    if isinstance(baseline, Baseline):
        base_entries = baseline.entries
        device = device or baseline.device
    elif isinstance(baseline, dict):
        base_entries = baseline
    else:
        base_entries = {}
    suffix = f"  ({device.get('name') or device.get('key')})" if device else ""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    used = set()
    for group, rows in _grouped(results):
        fig = _plot_group(plt, group, rows, base_entries, suffix)
        name = _safe_filename(group)
        while name in used:
            name += "_"
        used.add(name)
        path = directory / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")  # long case labels are not clipped
        plt.close(fig)
        paths.append(path)
    return paths


def plot_files(out: Path, labeled: list[tuple[str, list[dict]]]) -> Path:
    """`gpuperf plot`: one figure comparing several files' results, one panel per group, one bar per file."""
    plt = _plt()
    from matplotlib.patches import Patch

    out = Path(out)
    all_rows = [r for _, rows in labeled for r in rows]
    if not all_rows:
        raise ValueError("nothing to plot: the files have no entries")
    key, label, higher = _metric(all_rows)
    groups: dict[str, dict[str, dict[int, dict]]] = {}
    for fi, (_, rows) in enumerate(labeled):
        for r in rows:
            g = groups.setdefault(_group_of(r), {})
            g.setdefault(str(r.get("param") or r.get("name") or ""), {})[fi] = r
    names = sorted(groups, key=_natural_key)
    n_files = len(labeled)
    heights = [len(groups[g]) * (0.26 * n_files + 0.18) + 0.9 for g in names]
    fig, axes = plt.subplots(len(names), 1, figsize=(11, max(3.0, sum(heights) + 0.6)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colors = [_PALETTE[i % len(_PALETTE)] for i in range(n_files)]
    for ax, g in zip(axes[:, 0], names):
        params = sorted(groups[g], key=_row_key)
        bar_h = 0.8 / n_files
        vmax = 0.0
        for pi, p in enumerate(params):
            y0 = len(params) - 1 - pi
            first, first_fi = None, 0
            for fi in range(n_files):
                r = groups[g][p].get(fi)
                v = _value(r, key) if r else None
                if v is None:
                    continue
                y = y0 + 0.4 - bar_h * (fi + 0.5)
                ax.barh(y, v, height=bar_h * 0.88, color=colors[fi])
                vmax = max(vmax, v)
                text = _fmt_value(v, key)
                if key != "median_ms" and as_number(r.get("median_ms")):
                    text += f"  {fmt_ms(as_number(r.get('median_ms')))}"
                tcolor = "#222222"
                if first is None:
                    first = r
                elif as_number(first.get("median_ms")) and as_number(r.get("median_ms")):
                    change = r["median_ms"] / first["median_ms"] - 1.0
                    if abs(change) >= 0.005:
                        text += f"  {_fmt_change(change)} time vs {labeled[first_fi][0]}"
                    if abs(change) > DEFAULT_THRESHOLD:
                        tcolor = _VERDICT_COLOR["slower" if change > 0 else "faster"]
                if first is r:
                    first_fi = fi
                ax.annotate(text, xy=(v, y), xytext=(4, 0), textcoords="offset points", va="center", ha="left",
                            fontsize=8, color=tcolor)
        ax.set_yticks(range(len(params) - 1, -1, -1))
        ax.set_yticklabels([_middle_truncate(p, 40) for p in params], fontsize=8.5)
        ax.set_ylim(-0.6, len(params) - 0.4)
        if key == "pct_of_peak":
            ax.axvline(100, color="#888888", linestyle="--", linewidth=1)
            ax.set_xlim(0, max(100.0, vmax) * 1.3)
        else:
            ax.set_xlim(0, (vmax or 1.0) * 1.35)
        ax.set_title(g, fontsize=10.5, loc="left")
        ax.grid(axis="x", color="#EEEEEE")
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[-1, 0].set_xlabel(label + (", higher is better" if higher else ""))
    handles = [Patch(color=colors[i], label=lab) for i, (lab, _) in enumerate(labeled)]
    fig.legend(handles=handles, loc="upper right", fontsize=9, frameon=True)
    fig.suptitle(f"gpuperf: {label}" + (", higher is better" if higher else ""), x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / max(3.0, sum(heights) + 0.6)))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
