"""`gpuperf ab` on several GPUs of one host (`--gpus`). Each side lists the tests the pytest arguments
select, in a collecting process on a GPU of its own (plugin/listing.py); their union is split into
one part per GPU by the measuring time the working tree's baseline recorded for each test
(`core.shards.partition`, the split of --gpuperf-shard). Each GPU then runs `ab.alternate` for its
part, in a thread of its own: base and head alternate on it one process at a time, each process
seeing only that GPU (CUDA_VISIBLE_DEVICES), so both sides of a test run on one GPU and no two
processes share one. Each part is judged from its own processes (a process offset is a process's);
the parts' verdicts and sides merge into one report and one exit status (`ab.report`)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .ab import AbError, AbIncomplete, AbInterrupted, AbRun, Checkout, Side, alternate, checkout, counts_text
from .ab_stored import stored_spreads
from . import ab_process
from .ab_process import PYTEST_NO_TESTS, only_in_head, stop_children
from .core.shards import partition
from .core.units import plural
from .core.records import Entry
from .core.verdict import Verdict

#: pytest's option and plugin of the listing process.
LIST_PLUGIN = "pytest_gpuperf.plugin.listing"
LIST_OPTION = "--gpuperf-ab-list"
#: `--gpus` default: every GPU this process may use.
ALL = "all"
#: Log lines of a process that failed, quoted in the error.
TAIL_LINES = 3


def visible_gpus() -> list[str]:
    """The CUDA_VISIBLE_DEVICES value that pins a process to each GPU this one may use: its own
    CUDA_VISIBLE_DEVICES entries where it has them (numbers or UUIDs), else 0, 1, ..."""
    from .plugin.workers import gpu_count

    count = gpu_count()
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in given.split(",") if entry.strip()][:count]


def choose_gpus(text: str, visible: Sequence[str]) -> list[str]:
    """`--gpus`: 'all', a count N (the first N visible GPUs) or a list of indices among the visible
    ones ('0,1'; one index with a comma: '2,'); returns their CUDA_VISIBLE_DEVICES values.
    ValueError, naming the option, where it asks for GPUs that are not visible."""
    text = str(text).strip()
    shown = f"--gpus {text}"
    seen = f"{plural(len(visible), 'GPU')} visible" + (f": {', '.join(map(str, range(len(visible))))}" if visible else "")
    if text == ALL:
        return list(visible)
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= max(len(visible), 1):
            raise ValueError(f"{shown}: give 1 to {max(len(visible), 1)} GPUs ({seen})")
        return list(visible[:count]) if visible else []
    picks = [p.strip() for p in text.split(",") if p.strip()]
    if "," not in text or not picks or not all(p.isdigit() for p in picks):
        raise ValueError(f"{shown}: write all, a count (2) or GPU indices (0,1)")
    for p in picks:
        if int(p) >= len(visible):
            raise ValueError(f"{shown}: GPU {p} is not visible ({seen})")
        if picks.count(p) > 1:
            raise ValueError(f"{shown}: names GPU {p} twice")
    return [visible[int(p)] for p in picks]


@dataclass(frozen=True)
class Listing:
    """The tests one side's pytest arguments select, and the measuring time recorded for each."""

    tests: list[str]
    costs: dict[str, float | None]


def pinned(gpu: str) -> dict[str, str]:
    """The environment variables that leave a process only this GPU."""
    return {"CUDA_VISIBLE_DEVICES": gpu}


def list_tests(run: AbRun, side: Side, co: Checkout, gpu: str) -> Listing:
    """The tests `side` holds of those the pytest arguments select, from a collecting process on `gpu`."""
    path, log = co.work / f"list-{side.label}.json", co.work / f"list-{side.label}.log"
    args = [*run.pytest_args, "--gpuperf", "--gpuperf-no-compare", "--collect-only", "-p", LIST_PLUGIN,
            f"{LIST_OPTION}={path}"]
    status = run.runner(args, side.root / co.relative, log, env=pinned(gpu))
    if side.label == "base" and only_in_head(status, log):
        return Listing([], {})  # the tests asked for are new
    if status != 0 or not path.exists():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-TAIL_LINES:] \
            if log.exists() else []
        what = "collected no tests" if status == PYTEST_NO_TESTS else f"exited with status {status}"
        raise AbError(f"{side.label} ({side.revision}): listing the tests, pytest {what}: {' | '.join(tail) or 'no output'}")
    doc = json.loads(path.read_text(encoding="utf-8"))
    return Listing(list(doc["tests"]), dict(doc["costs"]))


@dataclass
class Part:
    """One GPU's share of the run: its tests, its two sides, what it decided, and what stopped it."""

    gpu: str
    tests: list[str]
    base: Side
    head: Side
    verdicts: dict[str, Verdict]
    error: AbError | None = None
    first_failure: bool = False  # its error stopped the other GPUs (theirs then read "stopped")


def compare_on_gpus(run: AbRun, cwd: Path, revision: str, gpus: Sequence[str]) -> tuple[dict, Side, Side]:
    """`ab.compare_revisions` with the tests split between `gpus` (CUDA_VISIBLE_DEVICES values, two
    or more); returns the merged verdicts and sides. AbError where nothing could be judged; AbIncomplete
    (with what the parts decided) where a part stopped after its first round; AbInterrupted likewise
    on Ctrl-C or SIGTERM."""
    started = time.perf_counter()
    stop = threading.Event()
    with checkout(run, cwd, revision) as co:
        base, head = co.sides()
        listings = _in_threads([lambda side=side, gpu=gpu: list_tests(run, side, co, gpu)
                                for side, gpu in zip((base, head), (gpus[0], gpus[1 % len(gpus)]))], stop)
        tests = sorted(set(listings[0].tests) | set(listings[1].tests))
        costs = {**listings[0].costs, **listings[1].costs}  # the working tree's where both have one
        split = partition(tests, costs, len(gpus))
        run.say(f"gpuperf ab: {plural(len(tests), 'test')} on {plural(len(gpus), 'GPU')} "
                f"({', '.join(f'{g}: {len(p)}' for g, p in zip(gpus, split))}), split by recorded time")
        parts = [Part(gpu, part, *co.sides(gpu), verdicts={}) for gpu, part in zip(gpus, split) if part]
        spreads, first = _shared_spreads(co, run.say), threading.Lock()
        interrupted = False
        try:
            _in_threads([lambda part=part: _run_part(run, co, part, stop, first, spreads) for part in parts], stop)
        except KeyboardInterrupt:  # each part stopped after its last whole round (`_run_part`)
            interrupted = True
    verdicts = {k: v for part in parts for k, v in part.verdicts.items()}
    base, head = Side.merged([p.base for p in parts]), Side.merged([p.head for p in parts])
    run.say(f"gpuperf ab: {plural(len(parts), 'GPU')} in {time.perf_counter() - started:.0f} s wall; "
            f"all GPUs: {counts_text(verdicts)}")
    if interrupted:
        if not verdicts:
            raise KeyboardInterrupt
        raise AbInterrupted(interrupted_text(parts), verdicts, base, head)
    failed = next((p for p in parts if p.first_failure), None)
    if failed is not None:
        if not verdicts:
            raise failed.error
        others = "; the other GPUs stopped after their last whole round" if len(parts) > 1 else ""
        raise AbIncomplete(f"GPU {failed.gpu}: {failed.error}{others}", verdicts, base, head)
    return verdicts, base, head


def interrupted_text(parts: Sequence[Part]) -> str:
    """Where each GPU's rounds stood when the run was interrupted; a GPU without a complete round
    has its tests left out of the report, and says so."""
    where = []
    for part in parts:
        done = min(len(part.base.rounds), len(part.head.rounds))
        where.append(f"GPU {part.gpu} " + ("had finished" if part.error is None else f"after round {done}" if done
                                            else f"in round 1, its {plural(len(part.tests), 'test')} left out"))
    return f"interrupted ({', '.join(where)}); the report holds the complete rounds"


def _run_part(run: AbRun, co: Checkout, part: Part, stop: threading.Event, first: threading.Lock,
              spreads: Callable[[dict | None], dict[str, Entry]]) -> None:
    """The rounds of one GPU (`ab.alternate`), its files in a folder of its own; a failure is kept
    in the part and stops the other GPUs before their next process."""
    work = co.work / f"gpu{part.gpu}"
    work.mkdir()

    def runner(args: list[str], cwd: Path, log: Path) -> int:
        if stop.is_set():
            raise AbError("stopped, as another GPU's run failed")
        return run.runner(args, cwd, log, env=pinned(part.gpu))

    mine = replace(run, runner=runner, say=lambda line: run.say(line.replace("gpuperf ab:", f"gpuperf ab: GPU {part.gpu}:", 1)))
    try:
        part.verdicts = alternate(mine, replace(co, work=work), part.base, part.head, select=part.tests, spreads=spreads)
    except AbIncomplete as exc:
        part.error, part.verdicts, part.base, part.head = exc, exc.verdicts, exc.base, exc.head
    except AbError as exc:  # in its first round: nothing of the part to judge
        part.error = exc
        part.base.rounds.clear()
        part.head.rounds.clear()
    if part.error is not None:
        with first:
            part.first_failure = not stop.is_set()
            stop.set()


def _shared_spreads(co: Checkout, say: Callable[[str], None]) -> Callable[[dict | None], dict[str, Entry]]:
    """`ab_stored.stored_spreads` read once for all the GPUs' parts (they share one GPU model)."""
    lock, cache = threading.Lock(), {}

    def spreads(device: dict | None) -> dict[str, Entry]:
        key = (device or {}).get("key")
        with lock:
            if key not in cache:
                cache[key] = stored_spreads(co.baseline_dir, device, say)
            return cache[key]

    return spreads


def _in_threads(jobs: list[Callable[[], object]], stop: threading.Event) -> list:
    """Run `jobs` at once, one thread each; returns their results in order, or raises the first
    error. Interrupted (Ctrl-C, SIGTERM), `stop` is set and every pytest process still running is
    stopped until the threads end."""
    results: list = [None] * len(jobs)
    errors: list[BaseException | None] = [None] * len(jobs)
    # Each job says it ended: a KeyboardInterrupt inside Thread.join can leave is_alive() False for a
    # thread still running, and the worktree would go while its pytest process still ran.
    ended = [threading.Event() for _ in jobs]

    def work(i: int) -> None:
        try:
            results[i] = jobs[i]()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            errors[i] = exc
        finally:
            ended[i].set()

    for i in range(len(jobs)):
        threading.Thread(target=work, args=(i,), daemon=True).start()
    try:
        for event in ended:
            while not event.wait(timeout=0.5):
                pass
    except BaseException:
        stop.set()
        deadline = time.monotonic() + ab_process.STOP_GRACE_S
        for event in ended:
            while not event.is_set():  # a thread may have started a process after the first stop
                stop_children(signal.SIGKILL if time.monotonic() > deadline else signal.SIGTERM)
                try:
                    event.wait(timeout=0.5)
                except KeyboardInterrupt:  # a second interrupt: kill what is left, and still wait
                    deadline = 0.0
        raise
    for error in errors:
        if error is not None:
            raise error
    return results
