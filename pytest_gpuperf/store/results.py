"""Results JSON in pytest-benchmark's format (``pytest-benchmark compare`` reads it), and reading results
back from a results JSON or a baseline YAML for the ``gpuperf`` command."""
from __future__ import annotations

import json
import platform
import statistics
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text
from ..core.plain import plain
from ..core.records import JSON_EXTRA_KEYS, Result, Statistics, nodeid_name, nodeid_param, record_group
from ..core.spread import relative_mad
from ..core.units import as_number, positive_numbers
from .baseline import Baseline
from .baseline import load as load_baseline


def _stats_seconds(s: Statistics, calls_per_sample: int | None) -> dict:
    """pytest-benchmark's "stats" block, in seconds."""
    data_ms = positive_numbers(s.data)
    stats: dict[str, Any] = {}
    if data_ms:
        try:
            from pytest_benchmark.stats import Stats

            pb = Stats()
            for x in data_ms:
                pb.update(x / 1e3)
            stats = pb.as_dict()
        except Exception:
            stats = {}
    median = (as_number(s.median_ms) or (statistics.median(data_ms) if data_ms else 0.0)) / 1e3
    over = {"min": s.min_ms, "max": s.max_ms, "mean": s.mean_ms, "stddev": s.stddev_ms, "median": s.median_ms}
    for k, v in over.items():
        if as_number(v) is not None:
            stats[k] = float(v) / 1e3
    stats.setdefault("median", median)
    stats.setdefault("mean", median)
    stats.setdefault("min", median)
    stats.setdefault("max", median)
    stats.setdefault("stddev", 0.0)
    rounds = int(as_number(s.samples) or len(data_ms) or 1)
    stats["rounds"] = rounds
    q1, q3 = as_number(s.q1_ms), as_number(s.q3_ms)
    if q1 is not None and q3 is not None and "q1" not in stats:
        stats["q1"], stats["q3"], stats["iqr"] = q1 / 1e3, q3 / 1e3, (q3 - q1) / 1e3
        stats["ld15iqr"] = max(stats["min"], stats["q1"] - 1.5 * stats["iqr"])
        stats["hd15iqr"] = min(stats["max"], stats["q3"] + 1.5 * stats["iqr"])
        stats["iqr_outliers"] = stats["stddev_outliers"] = 0
        stats["outliers"] = "0;0"
    if "q1" not in stats:
        sigma = (as_number(s.noise) or 0.0) * stats["median"]
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
    out["iterations"] = int(as_number(calls_per_sample) or 1)
    return out


def _gpuperf_version() -> str:
    try:
        from .. import __version__

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


def benchmark_json(results: list[Result], device: dict, software: dict, started_at: str) -> dict:
    """The document that write_json writes (pytest-benchmark's JSON layout, times in seconds)."""
    try:
        from pytest_benchmark import __version__ as pb_version
    except Exception:  # pragma: no cover - pytest-benchmark is a dependency
        pb_version = "5.1.0"
    benches = []
    for r in results:
        if as_number(r.stats.median_ms) is None:
            continue  # "missing" rows and the like have no measurement
        nodeid = r.id.nodeid or r.id.name or ""
        name = r.id.name or nodeid_name(nodeid)
        param = r.id.param or nodeid_param(nodeid)
        record = r.to_dict()
        extra = {k: record[k] for k in JSON_EXTRA_KEYS if k in record}
        base = r.baseline
        if base is not None:
            extra["baseline_median_ms"] = base.stats.median_ms
            # the medians it was judged from: an entry's recordings, or the base side's A/B rounds
            extra["baseline_history"] = base.history
            if base.counters is not None:
                extra["baseline_counters"] = base.counters.to_dict()
        extra["median_ms"] = r.stats.median_ms
        extra["device"] = (device or {}).get("key")
        benches.append({
            "group": record_group(r),
            "name": f"{name}[{param}]" if param else name,
            "fullname": nodeid,
            "params": {"id": param} if param else None,
            "param": param or None,
            "extra_info": extra,
            "options": {
                "disable_gc": False,
                "timer": f"gpuperf.{r.method or 'events'}",
                "min_rounds": int(as_number(r.stats.samples) or 1),
                "max_time": None,
                "min_time": None,
                "warmup": True,
            },
            "stats": _stats_seconds(r.stats, r.calls_per_sample),
        })
    return plain({
        "machine_info": _machine_info(device, software),
        "commit_info": _commit_info(),
        "benchmarks": benches,
        "datetime": started_at,
        "version": pb_version,
    })


def write_json(path: Path, results: list[Result], device: dict, software: dict, started_at: str, *,
               note: str | None = None, shard: dict | None = None) -> None:
    """Results in pytest-benchmark's JSON format (``pytest-benchmark compare FILE`` reads it);
    `note` (e.g. why a run stopped early) goes into machine_info as gpuperf_note, and `shard` (the
    run's core.shards.Split.to_dict()) as gpuperf_shard."""
    doc = benchmark_json(results, device, software, started_at)
    if note:
        doc["machine_info"]["gpuperf_note"] = note
    if shard:
        doc["machine_info"]["gpuperf_shard"] = plain(shard)
    atomic_write_text(Path(path), json.dumps(doc, indent=2, allow_nan=False) + "\n")


# ----------------------------------------------------------------------------------------------
# reading results back


def _from_benchmark(path: Path, b: Any, index: int) -> Result:
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
        noise = relative_mad(data_ms) if len(data_ms) >= 2 else None
    if noise is None and as_number(st.get("iqr")) is not None:
        noise = float(st["iqr"]) / 1.349 / median
    rec = {
        "nodeid": fullname,
        "name": name_full.split("[", 1)[0],
        "param": str(b.get("param") or (nodeid_param(name_full) if "[" in name_full else "")),
        "group": str(b.get("group") or name_full.split("[", 1)[0]),
        "median_ms": median * 1e3,
        "mean_ms": ms("mean"),
        "min_ms": ms("min"),
        "max_ms": ms("max"),
        "stddev_ms": ms("stddev"),
        "noise": noise,
        "samples": int(as_number(st.get("rounds")) or len(data_ms) or 1),
    }
    for k in JSON_EXTRA_KEYS:
        if k in extra and k not in ("noise",):
            rec[k] = extra[k]
    if as_number(extra.get("baseline_median_ms")) is not None:  # what benchmark_json wrote of the entry
        rec["baseline"] = {"median_ms": extra["baseline_median_ms"], "history": extra.get("baseline_history"),
                           "counters": extra.get("baseline_counters")}
    if data_ms:
        rec["data"] = data_ms
    try:
        return Result.from_dict(rec)
    except ValueError as exc:  # a bad counter
        raise ValueError(f"{path}: benchmark {fullname!r}: {exc}") from None


def load_results(path: Path) -> tuple[dict | None, list[Result]]:
    """Read a baseline YAML or a results JSON (ours or pytest-benchmark's) into results.

    Returns (device or None, records). Raises BaselineError (baselines) or ValueError naming the file."""
    device, _, records = load_recording(path)
    return device, records


def load_recording(path: Path) -> tuple[dict | None, dict, list[Result]]:
    """load_results, plus the software versions the file records ({} when it records none)."""
    device, software, records, _ = load_shard(path)
    return device, software, records


def load_shard(path: Path) -> tuple[dict | None, dict, list[Result], dict | None]:
    """load_recording, plus the split a shard's results JSON records (None for other files)."""
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
            shard = info.get("gpuperf_shard")
            return device, software, [_from_benchmark(path, b, i) for i, b in enumerate(benches)], shard
        if path.suffix.lower() == ".json" and not (isinstance(doc, dict) and "schema_version" in doc):
            raise ValueError(f"{path}: a JSON file without 'benchmarks': not a pytest-benchmark/gpuperf results file")
    base = load_baseline(path)
    if base is None:  # pragma: no cover - raced with a delete
        raise ValueError(f"{path}: no such file")
    return base.device, base.software, results_from_baseline(base), None


def results_from_baseline(base: Baseline) -> list[Result]:
    """A baseline's entries as results."""
    return [Result.of_entry(nodeid, entry) for nodeid, entry in base.entries.items()]
