"""store/baseline.py: YAML round trip, merge, validation errors that name the file and never touch it, and
concurrent writers (threads and processes) that lose no entry."""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pytest_gpuperf.core.files import LOCK_DIR
from pytest_gpuperf.core.versions import TIMING_VERSION
from pytest_gpuperf.store import baseline as bl
from pytest_gpuperf.core.records import UNBOUNDED, Entry, Result, Statistics
from pytest_gpuperf.store.baseline import Baseline, BaselineError

DEVICE = {"key": "nvidia-h100-80gb-hbm3", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132,
          "memory_gib": 79.2, "peaks": {"copy_gbps": 3000.0, "bf16_tflops": 738.0}}
SOFTWARE = {"torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0", "driver": "580.1", "python": "3.12.3"}


def result(nodeid: str, median_ms: float = 1.0, **kw) -> Result:
    r = {"nodeid": nodeid, "name": "test_x", "param": nodeid.split("[")[-1].rstrip("]"), "group": "test_x",
         "median_ms": median_ms, "mean_ms": median_ms * 1.01, "min_ms": median_ms * 0.98, "max_ms": median_ms * 1.2,
         "stddev_ms": median_ms * 0.01, "noise": 0.01, "ci_ms": (median_ms * 0.995, median_ms * 1.005),
         "samples": 200, "gbps": 1500.0, "tflops": None, "pct_of_peak": 50.0, "bytes": 1 << 30, "flops": None,
         "peak_memory_bytes": 1 << 30, "method": "events", "cache": "cold", "sm_clock_mhz": 1980, "throttle": [],
         "data": [median_ms] * 5, "verdict": "same", "baseline": None, "threshold": 0.05}
    r.update(kw)
    return Result.from_dict(r)


def entries(*ids, median_ms=1.0):
    return {i: bl.entry_from_result(result(i, median_ms)) for i in ids}


def test_baseline_path():
    assert bl.baseline_path(Path("baselines"), "nvidia-h100-80gb-hbm3") == Path("baselines/nvidia-h100-80gb-hbm3.yaml")


def test_entry_from_result_keeps_only_entry_keys():
    e = bl.entry_from_result(result("t.py::test_x[a]", 0.5))
    assert set(e.to_dict()) <= set(bl.ENTRY_KEYS)
    for k in ("median_ms", "mean_ms", "min_ms", "stddev_ms", "noise", "samples", "gbps", "tflops", "pct_of_peak",
              "peak_memory_bytes", "method", "cache", "sm_clock_mhz"):
        assert k in bl.ENTRY_KEYS and k in e.to_dict()
    assert not {"data", "verdict", "baseline", "nodeid"} & set(e.to_dict())
    assert e.stats.ci_ms.to_list() == [0.4975, 0.5025] and isinstance(e.stats.samples, int)
    assert e.tflops is None


def test_an_entry_says_loaded_only_where_it_was():
    """`loaded` (sampled in an unbroken loop under the power cap) is stored only where it holds, so the
    entries of calls the cap never held down stay as they were."""
    assert "loaded" not in bl.entry_from_result(result("t.py::test_x[a]", 0.5)).to_dict()
    assert bl.entry_from_result(replace(result("t.py::test_x[a]", 0.5), loaded=True)).loaded is True
    assert "slow_replay_us" not in bl.entry_from_result(replace(result("t.py::test_x[a]", 0.5), slow_replay_us=None)).to_dict()
    assert bl.entry_from_result(replace(result("t.py::test_x[a]", 0.5), slow_replay_us=0.18)).slow_replay_us == 0.18


def test_load_missing_file_is_none(tmp_path):
    assert bl.load(tmp_path / "nope.yaml") is None
    assert bl.load(tmp_path / "nope.yaml", "some-key") is None


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "new_dir" / "deeper" / f"{DEVICE['key']}.yaml"  # missing directories are created
    ids = ["perf_tests/test_a.py::test_a[triton-float32-4096x4096]", "perf_tests/test_a.py::test_a[cuda-float32-1]"]
    saved = bl.save(path, DEVICE, SOFTWARE, entries(*ids))
    assert isinstance(saved, Baseline) and saved.path == path
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", saved.recorded_at)
    loaded = bl.load(path, DEVICE["key"])
    assert loaded.device == DEVICE and loaded.software == SOFTWARE
    assert loaded.recorded_at == saved.recorded_at
    assert loaded.entries == {k: replace(e, history=[1.0]) for k, e in entries(*ids).items()}  # its first recording
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == ["schema_version", "device", "software", "recorded_at", "entries"]
    assert doc["schema_version"] == bl.SCHEMA_VERSION == 3 and path.read_text().endswith("\n...\n")
    assert list(doc["entries"]) == sorted(ids)
    assert "data:" not in path.read_text()
    # nothing but the baseline and the folder of its lock file is left in the directory
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, LOCK_DIR])


def test_save_leaves_no_lock_file_to_commit(tmp_path):
    """The lock sits in .gpuperf-locks/, which ignores itself: git sees only the baseline."""
    git = shutil.which("git")
    directory = tmp_path / "baselines"
    path = directory / "nvidia-h100-80gb-hbm3.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
    bl.save(path, DEVICE, SOFTWARE, entries("t::b"))
    assert not list(directory.glob("*.lock"))
    assert bl.lock_file(path) == directory / LOCK_DIR / (path.name + ".lock")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(tmp_path)], check=True)
    status = subprocess.run([git, "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    assert status.splitlines() == ["?? baselines/nvidia-h100-80gb-hbm3.yaml"], status


def test_merge_keeps_unrun_entries_and_replaces_run_ones(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a", "t::b", median_ms=1.0))
    new_software = dict(SOFTWARE, torch="2.12.0")
    bl.save(path, dict(DEVICE, peaks={"copy_gbps": 3100.0}), new_software, entries("t::b", "t::c", median_ms=2.0))
    b = bl.load(path, DEVICE["key"])
    assert sorted(b.entries) == ["t::a", "t::b", "t::c"]
    assert b.entries["t::a"].stats.median_ms == 1.0 and b.entries["t::a"].history == [1.0]  # not run: kept
    assert b.entries["t::b"].history == [1.0, 2.0]  # run: its median joins the history
    assert b.entries["t::b"].stats.median_ms == pytest.approx(2 ** 0.5, rel=1e-5)  # whose center it moves to
    assert b.entries["t::c"].history == [2.0]
    assert b.software["torch"] == "2.12.0" and b.device["peaks"] == {"copy_gbps": 3100.0}


def test_merging_again_leaves_a_stored_entry_as_it_is(tmp_path):
    """An entry recentred on its own (rounded) history keeps every stored field: the geometric mean
    of rounded medians can differ from the stored median in the seventh digit, which once moved the
    rates' last digit at every merge."""
    path = tmp_path / "b.yaml"
    history = [0.0112127, 0.0112167, 0.0112149]
    bl.save(path, DEVICE, SOFTWARE, {"t::a": bl.with_history(entries("t::a", median_ms=0.0112147)["t::a"], history)})
    before = bl.load(path, DEVICE["key"]).entries["t::a"]
    merged, _ = bl.combine([("stored", {"t::a": before}), ("run", entries("t::other"))])
    assert merged["t::a"].to_dict() == before.to_dict()


def test_an_entry_re_recorded_with_another_timing_version_starts_a_new_history_and_keeps_its_drift(tmp_path):
    """Medians of another timing version are not comparable, but a legacy drift is a relative spread,
    which a change of timing version (a ~1 µs offset) leaves as it was."""
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, {"t::a": replace(entries("t::a", median_ms=1.1)["t::a"], drift=0.05)})  # timing 1
    bl.save(path, DEVICE, SOFTWARE, {"t::a": replace(entries("t::a")["t::a"], timing=2)})
    entry = bl.load(path, DEVICE["key"]).entries["t::a"]
    assert entry.drift == 0.05 and entry.history == [1.0] and entry.stats.median_ms == 1.0


def test_combine_keeps_timing_versions_apart_but_keeps_their_drift():
    old = replace(entries("t::a", median_ms=1.10)["t::a"], method="events", cache="cold", drift=0.05)  # timing 1
    new = replace(entries("t::a", median_ms=1.00)["t::a"], method="events", cache="cold", timing=2)
    out, notes = bl.combine([("a", {"t::a": old}), ("b", {"t::a": new})])
    assert out["t::a"].stats.median_ms == pytest.approx(1.00)  # the 10% is the change of method, not drift
    assert out["t::a"].drift == 0.05 and "older timing version" in notes[-1]
    host = replace(old, method="cpu"), replace(new, method="cpu")  # host clocks: versions change nothing
    out, _ = bl.combine([("a", {"t::a": host[0]}), ("b", {"t::a": host[1]})])
    assert out["t::a"].stats.median_ms == pytest.approx(1.1 ** 0.5, rel=1e-5)


@pytest.mark.parametrize("timing", ["fast", 0, -1, 2.5, True])  # an unset one (None) is version 1
def test_a_timing_that_is_no_version_is_refused(tmp_path, timing):
    with pytest.raises(bl.BaselineError, match="timing must be a timing version"):
        bl.save(tmp_path / "b.yaml", DEVICE, SOFTWARE, {"t::a": replace(entries("t::a")["t::a"], timing=timing)})


@pytest.mark.parametrize("key, value, message", [
    ("throttle", "sw_thermal", "throttle must be a list"), ("throttle", [["x"]], "throttle must be a list"),
    ("loaded", "false", "loaded must be true, false or absent"),
    ("slow_replay_us", -0.2, "slow_replay_us must be a non-negative number"),
    ("slow_replay_us", "0.2", "slow_replay_us must be a non-negative number")])
def test_a_malformed_throttle_loaded_or_slow_replay_is_refused(tmp_path, key, value, message):
    """All three decide verdicts (`core.verdict`): a hand-edited "false" would read as loaded."""
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
    doc = yaml.safe_load(path.read_text())
    doc["entries"]["t::a"][key] = value
    path.write_text(yaml.safe_dump(doc, explicit_end=True))
    with pytest.raises(bl.BaselineError, match=message):
        bl.load(path, DEVICE["key"])


def test_schema_example_from_design_loads(tmp_path):
    path = tmp_path / "nvidia-h100-80gb-hbm3.yaml"
    path.write_text(textwrap.dedent("""\
        schema_version: 1
        device: {key: nvidia-h100-80gb-hbm3, name: NVIDIA H100 80GB HBM3, capability: "9.0", sm_count: 132,
                 memory_gib: 79.2, peaks: {copy_gbps: 3000.0, bf16_tflops: 738.0}}
        software: {torch: 2.11.0+cu130, triton: 3.6.0, cuda: "13.0", driver: "..."}
        recorded_at: 2026-11-23T10:00:00Z
        entries:
          "perf_tests/test_elementwise.py::test_elu[triton-float32-16M]":
            {median_ms: 0.716, noise: 0.004, samples: 300, gbps: 3000.0, tflops: null,
             peak_memory_bytes: 2147483648}
        """))
    b = bl.load(path, "nvidia-h100-80gb-hbm3")
    assert b.recorded_at == "2026-11-23T10:00:00Z"  # YAML's timestamp type comes back as the same string
    assert b.entries["perf_tests/test_elementwise.py::test_elu[triton-float32-16M]"].stats.median_ms == 0.716


GOOD_HEAD = "schema_version: 1\ndevice: {key: nvidia-h100-80gb-hbm3, name: H100}\nsoftware: {}\n"
BAD_FILES = {
    "corrupt-yaml": (GOOD_HEAD + "entries:\n  t::a: {median_ms: 1.0\n", r"corrupt YAML at line \d+"),
    "not-a-mapping": ("- 1\n- 2\n", "not a gpuperf baseline"),
    "empty": ("", "empty"),
    "no-schema": ("device: {key: nvidia-h100-80gb-hbm3}\nentries: {}\n", "no schema_version"),
    "wrong-schema": ("schema_version: 4\ndevice: {key: nvidia-h100-80gb-hbm3}\nentries: {}\n",
                     "schema_version 4 is not supported"),
    "bool-schema": ("schema_version: true\ndevice: {key: nvidia-h100-80gb-hbm3}\nentries: {}\n",
                    "schema_version True is not supported"),
    "no-device": ("schema_version: 1\nentries: {}\n", "'device' must be a mapping"),
    "foreign-device": ("schema_version: 1\ndevice: {key: nvidia-a100-sxm4-80gb}\nentries: {}\n",
                       "for device 'nvidia-a100-sxm4-80gb'.*nvidia-h100-80gb-hbm3"),
    "entries-not-mapping": (GOOD_HEAD + "entries: [1, 2]\n", "'entries' must be a mapping"),
    "negative-median": (GOOD_HEAD + "entries:\n  t::a: {median_ms: -1.0}\n", "entry 't::a': median_ms must be a positive"),
    "string-median": (GOOD_HEAD + "entries:\n  t::a: {median_ms: fast}\n", "entry 't::a': median_ms must be a positive"),
    "missing-median": (GOOD_HEAD + "entries:\n  t::a: {noise: 0.1}\n", "entry 't::a': median_ms must be a positive"),
    "entry-not-mapping": (GOOD_HEAD + "entries:\n  t::a: 3\n", "entry 't::a': is a int"),
    "bad-noise": (GOOD_HEAD + "entries:\n  t::a: {median_ms: 1.0, noise: -2}\n", "entry 't::a': noise must be"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_gives_error_naming_file_and_is_never_overwritten(tmp_path, case):
    text, pattern = BAD_FILES[case]
    path = tmp_path / "nvidia-h100-80gb-hbm3.yaml"
    path.write_text(text)
    before = path.read_bytes()
    with pytest.raises(BaselineError) as err:
        bl.load(path, "nvidia-h100-80gb-hbm3")
    msg = str(err.value)
    assert str(path) in msg and re.search(pattern, msg), msg
    assert "\n" not in msg
    with pytest.raises(BaselineError) as err2:
        bl.save(path, DEVICE, SOFTWARE, entries("t::b"))
    assert str(path) in str(err2.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != LOCK_DIR) == [path.name]


def test_str_subclasses_and_numpy_like_scalars_are_saved_as_plain_values(tmp_path):
    class TorchVersion(str):  # torch.__version__ is a str subclass that yaml.safe_dump refuses
        pass

    class Scalar:  # numpy/torch scalars have .item()
        def __init__(self, v):
            self.v = v

        def item(self):
            return self.v

    path = tmp_path / "b.yaml"
    r = result("t::a", 0.5)
    r = replace(r, stats=replace(r.stats, median_ms=Scalar(0.5), samples=Scalar(7)), gbps=float("inf"))
    e = bl.entry_from_result(r)
    bl.save(path, DEVICE, dict(SOFTWARE, torch=TorchVersion("2.13.0+cpu")), {"t::a": e})
    b = bl.load(path, DEVICE["key"])
    assert b.software["torch"] == "2.13.0+cpu" and type(b.software["torch"]) is str
    assert b.entries["t::a"].stats.median_ms == 0.5 and b.entries["t::a"].stats.samples == 7
    assert b.entries["t::a"].gbps is None  # non-finite numbers are stored as null


def test_foreign_device_file_loads_without_a_device_key(tmp_path):
    path = tmp_path / "a100.yaml"
    path.write_text("schema_version: 1\ndevice: {key: nvidia-a100-sxm4-80gb}\nentries: {}\n")
    assert bl.load(path).device["key"] == "nvidia-a100-sxm4-80gb"


def test_binary_garbage_is_an_error(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(BaselineError, match=re.escape(str(path))):
        bl.load(path)


def test_save_rejects_a_bad_entry_and_keeps_the_file(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="t::bad.*median_ms"):
        bl.save(path, DEVICE, SOFTWARE, {"t::bad": Entry(Statistics(float("nan")))})
    assert path.read_bytes() == before


def test_failed_write_leaves_old_file_and_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bl.os, "replace", broken_replace)
    with pytest.raises(BaselineError, match="No space left on device"):
        bl.save(path, DEVICE, SOFTWARE, entries("t::b"))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["b.yaml", LOCK_DIR])


def _save_as_nobody(path: Path) -> str:
    """Fork; the child drops to uid/gid 65534 (modules are already loaded, so nothing needs re-reading)
    and tries to save. Returns what the child reports: "ERROR <message>", "SAVED" or "SKIP <why>"."""
    import filelock  # noqa: F401  (loaded before dropping privileges)

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            except OSError as exc:
                out = f"SKIP cannot drop privileges: {exc}"
            else:
                try:
                    bl.save(path, {"key": "nvidia-h100-80gb-hbm3"}, {}, entries("t::b"))
                    out = "SAVED"
                except BaselineError as exc:
                    out = f"ERROR {exc}"
                except BaseException as exc:
                    out = f"OTHER {type(exc).__name__}: {exc}"
            os.write(write_fd, out.encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def test_read_only_directory():
    """A read-only baseline directory gives one message naming it; the stored file is untouched.
    As root (permissions do not apply to root) the save runs in a forked child that drops to 'nobody'."""
    root = Path(tempfile.mkdtemp(prefix="gpuperf-ro-"))
    directory = root / "baselines"
    try:
        os.chmod(root, 0o755)
        directory.mkdir()
        path = directory / "nvidia-h100-80gb-hbm3.yaml"
        bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
        os.chmod(path, 0o644)
        before = path.read_bytes()
        os.chmod(directory, 0o555)
        if os.geteuid() == 0:
            out = _save_as_nobody(path)
            if out.startswith("SKIP"):
                pytest.skip(out)
            assert out.startswith("ERROR "), out
            msg = out[len("ERROR "):]
        else:
            with pytest.raises(BaselineError) as err:
                bl.save(path, DEVICE, SOFTWARE, entries("t::b"))
            msg = str(err.value)
        assert str(directory) in msg and "not writable" in msg and "--gpuperf-baseline-dir" in msg, msg
        assert path.read_bytes() == before
        assert sorted(p.name for p in directory.iterdir()) == sorted([path.name, LOCK_DIR])
    finally:
        if directory.exists():
            os.chmod(directory, 0o755)
        for p in sorted(root.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        root.rmdir()


def test_uncreatable_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("I am a file")
    with pytest.raises(BaselineError, match="cannot create the baseline directory"):
        bl.save(blocker / "baselines" / "x.yaml", DEVICE, SOFTWARE, entries("t::a"))


def _process_writer(path: str, worker: int, per_worker: int) -> None:
    for j in range(per_worker):
        nodeid = f"perf_tests/test_w.py::test_w[w{worker}-{j}]"
        bl.save(Path(path), DEVICE, SOFTWARE, {nodeid: bl.entry_from_result(result(nodeid, 1.0 + worker + j / 10))})


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_process_writers_lose_nothing(tmp_path):
    path = tmp_path / "nvidia-h100-80gb-hbm3.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("perf_tests/test_old.py::test_kept"))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_process_writer, args=(str(path), w, 3)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    b = bl.load(path, DEVICE["key"])
    expected = {f"perf_tests/test_w.py::test_w[w{w}-{j}]" for w in range(8) for j in range(3)}
    assert set(b.entries) == expected | {"perf_tests/test_old.py::test_kept"}
    assert b.entries["perf_tests/test_w.py::test_w[w7-2]"].stats.median_ms == pytest.approx(8.2)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_concurrent_thread_writers_lose_nothing(tmp_path):
    path = tmp_path / "nvidia-h100-80gb-hbm3.yaml"
    errors = []

    def run(w):
        try:
            _process_writer(str(path), w, 4)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(bl.load(path, DEVICE["key"]).entries) == 32


def test_combine_keeps_each_recordings_median_in_the_history_and_moves_to_their_center():
    a = {"t::x": result("t::x", 21.7e-3), "t::y": result("t::y", 1.0)}
    b = {"t::x": result("t::x", 24.7e-3), "t::z": result("t::z", 2.0)}
    out, notes = bl.combine([("a.yaml", a), ("b.json", b)])
    assert notes == []
    x, center = out["t::x"], (21.7e-3 * 24.7e-3) ** 0.5
    assert x.history == [21.7e-3, 24.7e-3] and x.drift is None
    assert x.stats.median_ms == pytest.approx(center, rel=1e-5)
    assert x.stats.ci_ms.to_list() == pytest.approx([center * 0.995, center * 1.005], rel=1e-5)  # moved with the median
    assert x.gbps == pytest.approx(1500.0 * 24.7e-3 / center, rel=1e-5)  # rates move inversely
    assert out["t::y"].history == [1.0] and out["t::z"].stats.median_ms == 2.0


def test_combine_and_save_keep_each_recordings_peak_memory_in_a_window(tmp_path):
    """One call's peak differs between processes of unchanged code (12 MiB of 207 on an H100): an
    entry keeps the peaks of its recent recordings, the largest as its peak, and forgets those that
    leave the window, so a real reduction lands in the baseline once its recordings fill it."""
    from pytest_gpuperf.core.noise import HISTORY_WINDOW

    low, high = 195 << 20, 207 << 20
    a = {"t::x": result("t::x", 1.0, peak_memory_bytes=low)}
    b = {"t::x": result("t::x", 1.01, peak_memory_bytes=high)}
    c = {"t::x": result("t::x", 0.99, peak_memory_bytes=low)}
    out, _ = bl.combine([("a.yaml", a), ("b.json", b), ("c.json", c)])
    assert out["t::x"].peak_memory_bytes == high and out["t::x"].peak_memory_history == [low, high, low]
    out, _ = bl.combine([("old.yaml", out), ("d.json", {"t::x": result("t::x", 1.0, peak_memory_bytes=None)})])
    assert out["t::x"].peak_memory_history == [low, high, low]  # a recording without a peak adds none
    changed = {"t::x": result("t::x", 2.5, peak_memory_bytes=low)}  # past the drift cap: a new entry
    out, _ = bl.combine([("a.yaml", b), ("e.json", changed)])
    assert out["t::x"].peak_memory_bytes == low and out["t::x"].peak_memory_history is None
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, {"t::x": bl.entry_from_result(b["t::x"])})
    bl.save(path, DEVICE, SOFTWARE, {"t::x": bl.entry_from_result(a["t::x"])})
    stored = bl.load(path, DEVICE["key"]).entries["t::x"]
    assert stored.peak_memory_bytes == high and stored.peak_memory_history == [high, low]
    for _ in range(HISTORY_WINDOW - 1):
        bl.save(path, DEVICE, SOFTWARE, {"t::x": bl.entry_from_result(a["t::x"])})
    stored = bl.load(path, DEVICE["key"]).entries["t::x"]
    assert stored.peak_memory_bytes == low and stored.peak_memory_history is None  # all alike: one peak
    bl.save(path, DEVICE, SOFTWARE, {"t::x": bl.entry_from_result(result("t::x", 1.0, method="graph"))})
    assert "peak_memory_history" not in bl.load(path, DEVICE["key"]).entries["t::x"].to_dict()  # measured anew


def test_a_peak_memory_history_that_is_not_a_list_of_sizes_is_reported(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a"))
    text = path.read_text().replace("history:", "peak_memory_history: [-1]\n    history:", 1)
    path.write_text(text)
    with pytest.raises(BaselineError, match="peak_memory_history must be a list"):
        bl.load(path, DEVICE["key"])


def test_combine_extends_a_stored_history_and_keeps_the_window():
    from pytest_gpuperf.core.noise import HISTORY_WINDOW

    stored = replace(bl.entry_from_result(result("t::x", 1.0)), history=[1.0 + i / 1000 for i in range(HISTORY_WINDOW)])
    out, _ = bl.combine([("old.yaml", {"t::x": stored}), ("new.json", {"t::x": result("t::x", 1.05)})])
    history = out["t::x"].history
    assert len(history) == HISTORY_WINDOW and history[-1] == 1.05 and history[0] == 1.001


def test_combine_keeps_the_larger_drift_already_learned():
    a = {"t::x": result("t::x", 1.0, drift=0.08)}
    out, _ = bl.combine([("a", a), ("b", {"t::x": result("t::x", 1.02)})])
    assert out["t::x"].drift == 0.08


def test_combine_keeps_the_newest_entry_where_the_test_really_changed():
    out, notes = bl.combine([("a", {"t::x": result("t::x", 0.46)}), ("b", {"t::x": result("t::x", 0.02)})])
    assert out["t::x"].stats.median_ms == 0.02 and out["t::x"].drift is None
    assert len(notes) == 1 and "t::x" in notes[0] and "kept b's entry" in notes[0]
    # the cap is on the range: x2.2 between two leases is not combined, though each is 38% from the middle
    out, notes = bl.combine([("a", {"t::x": result("t::x", 1.0)}), ("b", {"t::x": result("t::x", 2.2)})])
    assert out["t::x"].stats.median_ms == 2.2 and out["t::x"].drift is None and "120%" in notes[0]
    out, notes = bl.combine([("a", {"t::x": result("t::x", 1.0)}), ("b", {"t::x": result("t::x", 1.3)})],
                            max_drift=0.25)
    assert out["t::x"].stats.median_ms == 1.3 and out["t::x"].drift is None and "30%" in notes[0]


def test_combine_only_combines_recordings_of_the_method_most_of_them_used():
    a = {"t::x": result("t::x", 1.0, method="events")}
    b = {"t::x": result("t::x", 1.1, method="graph")}
    c = {"t::x": result("t::x", 1.12, method="graph")}
    out, notes = bl.combine([("a", a), ("b", b), ("c", c)])
    assert out["t::x"].method == "graph" and out["t::x"].stats.median_ms == pytest.approx(1.11, rel=1e-3)
    assert out["t::x"].history == [1.1, 1.12]
    assert "measured events/cold (method/cache) in some recordings and graph/cold in most" in notes[0]
    # two of three measured with events: the newer graph recording is left out, a gate run prefers events
    out, _ = bl.combine([("a", a), ("b", {"t::x": result("t::x", 1.01, method="events")}), ("c", c)])
    assert out["t::x"].method == "events" and out["t::x"].history == [1.0, 1.01]
    # a stored entry of four events recordings outweighs one newer graph recording (it counted once)
    current = TIMING_VERSION
    stored = bl.with_history(bl.entry_from_result(result("t::x", 1.0, method="events", timing=current)),
                             [1.0, 1.01, 0.99, 1.02])
    out, _ = bl.combine([("baseline", {"t::x": stored}), ("c", {"t::x": result("t::x", 1.12, method="graph",
                                                                              timing=current)})])
    assert out["t::x"].method == "events" and out["t::x"].history == [1.0, 1.01, 0.99, 1.02]
    # ... unless it was measured with an older timing: then it counts once, and the newer recording wins the tie
    outdated = replace(stored, timing=1)
    out, _ = bl.combine([("baseline", {"t::x": outdated}), ("c", {"t::x": result("t::x", 1.12, method="graph",
                                                                                timing=current)})])
    assert out["t::x"].method == "graph" and out["t::x"].history == [1.12]


def test_combine_never_mixes_cold_and_warm_cache_recordings():
    out, notes = bl.combine([("a", {"t::x": result("t::x", 1.05)}), ("b", {"t::x": result("t::x", 1.2, cache="warm")})])
    assert out["t::x"].stats.median_ms == 1.2 and out["t::x"].cache == "warm" and out["t::x"].drift is None
    assert "events/cold" in notes[0]


def test_combine_leaves_out_records_that_are_not_valid_entries():
    a = {"t::x": result("t::x", 0.0), "t::y": Entry(Statistics(None))}
    out, notes = bl.combine([("a", a), ("b", {"t::x": result("t::x", 1.0)})])
    assert out["t::x"].stats.median_ms == 1.0 and "t::y" not in out
    assert any("t::x: left out of a" in n for n in notes) and any("t::y: left out of a" in n for n in notes)


def test_rerecording_an_entry_keeps_its_drift_when_measured_the_same_way(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, {"t::a": replace(result("t::a"), drift=0.07),
                                     "t::b": replace(result("t::b"), drift=0.07)})
    bl.save(path, DEVICE, SOFTWARE, {"t::a": result("t::a", 1.1), "t::b": result("t::b", 1.1, method="graph")})
    b = bl.load(path)
    assert b.entries["t::a"].drift == 0.07 and b.entries["t::a"].history == [1.0, 1.1]
    assert "drift" not in b.entries["t::b"].to_dict() and b.entries["t::b"].history == [1.1]


def test_save_without_keeping_others_writes_exactly_the_entries(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a", "t::b"))
    bl.save(path, DEVICE, SOFTWARE, {"t::a": replace(result("t::a"), drift=0.2)})
    bl.save(path, DEVICE, SOFTWARE, entries("t::a", "t::c"), keep_others=False)
    b = bl.load(path)
    assert sorted(b.entries) == ["t::a", "t::c"] and "drift" not in b.entries["t::a"].to_dict()  # exactly what was given


def test_a_recording_adds_its_own_run_not_a_faster_re_measurement(tmp_path):
    """A suspect result re-measured during --gpuperf-save keeps its fastest run for the verdict, but
    the history gets the recording's first run: re-measured minima would pull the baseline down."""
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, {"t::a": result("t::a", 1.0)})
    bl.save(path, DEVICE, SOFTWARE, {"t::a": result("t::a", 0.985, history=[1.06])})
    assert bl.load(path).entries["t::a"].history == [1.0, 1.06]


def test_an_entry_moved_faster_than_its_peak_sets_its_own_ceiling():
    """Combining recordings moves an entry to their center, and its rates with it: one whose center
    beats its peak is held to 100% with how far it beat it, and one moved back below loses that."""
    a = {"t::x": result("t::x", 1.0, pct_of_peak=99.0)}
    b = {"t::x": result("t::x", 0.9, pct_of_peak=100.0, above_peak=0.1)}
    out, _ = bl.combine([("a.yaml", a), ("b.json", b)])
    center = (1.0 * 0.9) ** 0.5
    assert out["t::x"].pct_of_peak == 100.0
    assert out["t::x"].above_peak == pytest.approx(110.0 * 0.9 / center / 100 - 1, rel=1e-5)
    c = {"t::x": result("t::x", 1.2, pct_of_peak=80.0)}
    out, _ = bl.combine([("b.json", b), ("c.json", c)])
    assert out["t::x"].above_peak is None
    assert out["t::x"].pct_of_peak == pytest.approx(80.0 * 1.2 / (0.9 * 1.2) ** 0.5)


def test_an_entry_whose_peak_is_not_a_name_is_left_out_with_a_note():
    """A hand-edited `peak: 5` is reported by the merge, not carried into tables that would crash on it."""
    out, notes = bl.combine([("a.yaml", {"t::x": result("t::x", 1.0, peak=5)})])
    assert out == {} and any("peak must be the name of a measured peak" in n for n in notes)


# ---- a file cut short -----------------------------------------------------------------------------

def test_every_cut_of_a_written_file_is_refused_naming_it(tmp_path):
    """A schema-3 file ends with YAML's end line '...': a copy cut anywhere before it, even between two
    entries or inside the last one's history, where the rest is still valid YAML, is never read."""
    path = tmp_path / f"{DEVICE['key']}.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a", "t::b"))
    bl.save(path, DEVICE, SOFTWARE, entries("t::b", median_ms=1.1))  # a history of two medians
    text = path.read_text()
    assert text.endswith("\n...\n") and bl.load(path, DEVICE["key"]) is not None
    path.write_text(text[:-1])  # no final newline: still whole
    assert bl.load(path, DEVICE["key"]) is not None
    cut = tmp_path / "cut" / path.name
    cut.parent.mkdir()
    for n in range(len(text) - 1):
        cut.write_text(text[:n])
        with pytest.raises(BaselineError) as err:
            bl.load(cut, DEVICE["key"])
        assert str(cut) in str(err.value), n
    cut.write_text(text[:text.index("  t::b:")] + "...\n")  # cut between entries, the end line added back
    assert list(bl.load(cut, DEVICE["key"]).entries) == ["t::a"]  # a file that says it is whole is taken as such


def test_a_cut_without_the_end_line_says_so_and_how_to_fix_it(tmp_path):
    path = tmp_path / "b.yaml"
    bl.save(path, DEVICE, SOFTWARE, entries("t::a", "t::b"))
    path.write_text(path.read_text().split("  t::b:")[0])
    with pytest.raises(BaselineError, match=r"cut short: a schema-3 baseline ends with the line '\.\.\.'.*add '\.\.\.' "
                                            r"as its last line"):
        bl.load(path)


def _schema_2(tmp_path, cut_after: str | None = None) -> Path:
    """A schema-2 file as the previous writer left it (no end line), cut after `cut_after` in its last
    entry (None: whole)."""
    path = tmp_path / f"{DEVICE['key']}.yaml"
    doc = {"schema_version": 2, "device": DEVICE, "software": SOFTWARE, "recorded_at": "2026-11-27T00:00:00Z",
           "entries": {k: dict(e.to_dict(), timing=TIMING_VERSION, history=[1.0]) for k, e in entries("t::a", "t::b").items()}}
    text = yaml.safe_dump(doc, sort_keys=False)
    path.write_text(text if cut_after is None else text[:text.index(cut_after, text.index("  t::b:")) + len(cut_after)])
    return path


def test_a_schema_2_file_cut_inside_its_last_entry_is_refused_naming_file_and_test(tmp_path):
    """The reported case: the cut entry's missing timing read as timing version 1, and it was compared."""
    path = _schema_2(tmp_path, "cache: cold\n")
    with pytest.raises(BaselineError) as err:
        bl.load(path, DEVICE["key"])
    msg = str(err.value)
    assert msg.startswith(f"{path}: entry 't::b' has no timing, which every entry of a schema-2 baseline holds: "
                          f"the file was cut short"), msg
    with pytest.raises(BaselineError, match="'t::b' has no method, cache, timing"):
        bl.load(_schema_2(tmp_path, "median_ms: 1.0\n"), DEVICE["key"])


def test_a_whole_schema_2_file_is_read_and_written_back_as_schema_3(tmp_path):
    path = _schema_2(tmp_path)
    assert sorted(bl.load(path, DEVICE["key"]).entries) == ["t::a", "t::b"]
    bl.save(path, DEVICE, SOFTWARE, entries("t::c"))
    assert yaml.safe_load(path.read_text())["schema_version"] == 3 and path.read_text().endswith("\n...\n")
    assert sorted(bl.load(path, DEVICE["key"]).entries) == ["t::a", "t::b", "t::c"]


def test_a_schema_2_file_without_entries_is_refused(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("schema_version: 2\ndevice: {key: nvidia-h100-80gb-hbm3}\nsoftware: {}\n")
    with pytest.raises(BaselineError, match="no 'entries'"):
        bl.load(path)


def test_an_entry_saved_without_how_it_was_measured_is_refused(tmp_path):
    path = tmp_path / "b.yaml"
    with pytest.raises(BaselineError, match="cannot save entry 't::a': has no method, cache, which every entry holds"):
        bl.save(path, DEVICE, SOFTWARE, {"t::a": Entry(Statistics(1.0))})
    assert not path.exists()


def test_a_schema_1_entry_names_its_timing_version_when_rewritten(tmp_path):
    """Schema 1 predates the timing version: its entries read as version 1, and are written so."""
    path = tmp_path / f"{DEVICE['key']}.yaml"
    path.write_text("schema_version: 1\ndevice: {key: nvidia-h100-80gb-hbm3}\nsoftware: {}\nentries:\n"
                    "  t::a: {median_ms: 1.0, method: events, cache: cold}\n  t::b: {median_ms: 2.0}\n")
    assert bl.load(path).entries["t::a"].timing == 1
    with pytest.raises(BaselineError, match="cannot rewrite entry 't::b' as schema 3: has no method, cache"):
        bl.save(path, DEVICE, SOFTWARE, entries("t::c"))
    path.write_text(path.read_text().replace("  t::b: {median_ms: 2.0}\n", ""))
    bl.save(path, DEVICE, SOFTWARE, entries("t::c"))
    assert bl.load(path).entries["t::a"].timing == 1


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[1] / "baselines").glob("*.yaml")))
def test_the_committed_baselines_load(name):
    assert bl.load(Path(__file__).parents[1] / "baselines" / name).entries


def test_a_one_sample_measurement_is_saved_with_no_interval(tmp_path):
    """A call longer than the sampling budget is timed once: its median has no interval (unbounded),
    stored as null beside its one sample (which older gpuperf reads too), and read back unbounded, as
    the run's own one-sample result is."""
    path = tmp_path / "b.yaml"
    one = result("t::a", 300.0, ci_ms=(-float("inf"), float("inf")), samples=1, noise=0.0, stddev_ms=0.0)
    assert one.stats.ci_ms is UNBOUNDED or one.stats.ci_ms == UNBOUNDED
    bl.save(path, DEVICE, SOFTWARE, {"t::a": bl.entry_from_result(one)})
    stored = yaml.safe_load(path.read_text())["entries"]["t::a"]
    assert stored["ci_ms"] is None and stored["samples"] == 1
    entry = bl.load(path, DEVICE["key"]).entries["t::a"]
    assert entry.stats == one.stats.stored() and not entry.stats.ci_ms.bounded  # as it was measured
    assert entry.to_dict()["ci_ms"] is None
    bl.save(path, DEVICE, SOFTWARE, {"t::a": bl.entry_from_result(one)})  # re-recorded: two medians, still no interval
    again = bl.load(path, DEVICE["key"]).entries["t::a"]
    assert again.history == [300.0, 300.0] and again.stats.ci_ms == UNBOUNDED
    assert bl.entry_from_result(result("t::b", samples=7, ci_ms=None)).stats.ci_ms is None  # no interval named: unknown
