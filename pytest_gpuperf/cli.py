"""The ``gpuperf`` command: compare, A/B, show, plot and merge baselines/results, and describe this machine's device.

    gpuperf compare OLD NEW [--threshold 5%]   exit 0: nothing slower, 1: something slower, 2: bad input
    gpuperf ab BASE [...] -- PYTEST_ARGS       the same exits, for BASE against the working tree (ab.py)
    gpuperf show [FILE]                        exit 0, 2: bad input
    gpuperf plot FILE... -o OUT.png            exit 0, 2: bad input
    gpuperf merge FILE... -o OUT.yaml          exit 0, 2: bad input
    gpuperf merge-shards FILE... [-o OUT.json] [--markdown OUT.md]
                                               one report of the shards' results: exit 0, 1 something slower, 2
    gpuperf device                             exit 0 (2 if the device cannot be queried)

Errors print one line to stderr that names the file; no tracebacks (set GPUPERF_DEBUG=1 to get them).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from .ab import DEFAULT_ROUNDS
from .ab_budget import DEFAULT_BUDGET, Budget
from .core.noise import log_spread
from .core.records import Result
from .core.units import parse_percent, plural
from .core.verdict import DEFAULT_THRESHOLD, fails, is_regression, judge_all, parse_threshold
from .core.versions import recorded_version, timing_epoch
from .store.baseline import MAX_DRIFT, BaselineError, alike, baseline_path, how_measured
from .store.peak_cache import DEFAULT_CACHE_DIR

EXIT_OK = 0
EXIT_SLOWER = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports an interrupted command (128 + SIGINT)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() always returns an exit code."""

    def error(self, message):
        raise _UsageError(f"{self.prog}: {message}")


def _width() -> int:
    """The terminal's width; logs and pipes get wide lines rather than truncated test ids."""
    if not sys.stdout.isatty():
        return 200
    return max(100, shutil.get_terminal_size((120, 24)).columns)


def _load(path: str):
    from .store.results import load_results

    return load_results(Path(path))


def _by_id(results: list[Result]) -> dict[str, Result]:
    return {r.id.nodeid: r for r in results}


def _cmd_compare(args) -> int:
    from .report.table import compare_lines

    threshold = parse_threshold(args.threshold) if args.threshold is not None else None
    old_dev, old = _load(args.old)
    new_dev, new = _load(args.new)
    if old_dev and new_dev and old_dev.get("key") != new_dev.get("key"):
        print(f"gpuperf: note: comparing different devices: {args.old} is {old_dev.get('key')}, "
              f"{args.new} is {new_dev.get('key')}", file=sys.stderr)
    old_map, new_map = _by_id(old), _by_id(new)
    differ = sorted(k for k in old_map.keys() & new_map.keys()  # one version's two methods: `unlike` below
                    if recorded_version(old_map[k]) != recorded_version(new_map[k])
                    and timing_epoch(old_map[k]) != timing_epoch(new_map[k]))
    if differ:
        first = differ[0]
        print(f"gpuperf: note: {plural(len(differ), 'test')} {'was' if len(differ) == 1 else 'were'} timed with "
              f"different timing versions on the two sides "
              f"(e.g. {first}: version {recorded_version(old_map[first])} in {args.old}, "
              f"{recorded_version(new_map[first])} in {args.new}); their changes include that of the timing "
              f"method", file=sys.stderr)
    unlike = sorted(k for k in old_map.keys() & new_map.keys() if k not in differ and not alike(old_map[k], new_map[k]))
    if unlike:
        first = unlike[0]
        (old_method, old_cache), (new_method, new_cache) = how_measured(old_map[first]), how_measured(new_map[first])
        print(f"gpuperf: note: {plural(len(unlike), 'test')} {'was' if len(unlike) == 1 else 'were'} timed with "
              f"different methods or cache modes on the two "
              f"sides (e.g. {first}: {old_method}, {old_cache} L2 in {args.old}, {new_method}, {new_cache} L2 in "
              f"{args.new}); their changes include that of the method", file=sys.stderr)
    recorded = {}  # without --threshold: the per-test threshold the plugin recorded, else the default
    if threshold is None:
        for key, rec in new_map.items():
            try:
                if rec.threshold is not None:
                    recorded[key] = parse_threshold(rec.threshold)
            except ValueError:
                pass
    verdicts = judge_all(old_map, new_map, DEFAULT_THRESHOLD if threshold is None else threshold, recorded)
    print(f"gpuperf compare: {args.old} -> {args.new}")
    print("\n".join(compare_lines(verdicts, old_map, new_map, width=_width())))
    return EXIT_SLOWER if any(is_regression(v) for v in verdicts.values()) else EXIT_OK


def _current_device(measure_peaks: bool):
    from .measure import peaks

    return peaks.current_device(measure_peaks=measure_peaks)


def _cmd_show(args) -> int:
    from .report.table import terminal_lines
    from .store.baseline import load as load_baseline
    from .store.results import results_from_baseline

    path = args.file
    if path is None:
        try:
            dev = _current_device(measure_peaks=False)
        except Exception as exc:
            raise _UsageError(f"gpuperf show: cannot determine this machine's device ({exc}); pass a FILE") from None
        path = baseline_path(Path(args.baseline_dir), dev["key"])
        if not path.exists():
            raise _UsageError(
                f"{path}: no baseline for this device ({dev['key']}); record one with "
                f"`pytest --gpuperf --gpuperf-save` or pass a FILE")
    path = Path(path)
    base = None
    if path.suffix.lower() in (".yaml", ".yml") and path.is_file():
        base = load_baseline(path)
    if base is not None:
        device, results = base.device, results_from_baseline(base)
    else:
        device, results = _load(str(path))
    print(f"{path}")
    if device:
        props = [f"capability {device.get('capability')}" if device.get("capability") else "",
                 f"{device.get('sm_count')} SMs" if device.get("sm_count") else "",
                 f"{device.get('memory_gib')} GiB" if device.get("memory_gib") else ""]
        props = ", ".join(p for p in props if p)
        if props:
            print(f"device properties: {props}")
    if base is not None:
        sw = ", ".join(f"{k} {v}" for k, v in (base.software or {}).items() if v)
        if sw:
            print(f"software: {sw}")
        print(f"recorded at {base.recorded_at or 'unknown'}, {plural(len(base.entries), 'entry', 'entries')}")
    print("\n".join(terminal_lines(results, device or {}, width=_width())))
    return EXIT_OK


def _cmd_plot(args) -> int:
    from .report.plots import plot_files

    labeled = []
    stems = [Path(f).stem for f in args.files]
    for f, stem in zip(args.files, stems):
        _, results = _load(f)
        labeled.append((stem if stems.count(stem) == 1 else str(f), results))
    out = Path(args.output)
    try:
        plot_files(out, labeled)
    except ImportError as exc:
        raise _UsageError(f"gpuperf plot: matplotlib is needed ({exc}); pip install 'pytest-gpuperf[plot]'") from None
    except OSError as exc:
        raise _UsageError(f"{out}: cannot write the plot ({exc.strerror or exc})") from None
    print(f"wrote {out}")
    return EXIT_OK


def _cmd_merge(args) -> int:
    """Combine recordings of one GPU model into one baseline whose entries hold each recording's median."""
    from .measure.peaks import device_kind, merged_peaks, valid_peaks
    from .store import baseline as baseline_mod
    from .store.results import load_recording

    try:
        max_drift = parse_percent(args.max_drift)
    except ValueError:
        max_drift = float("nan")
    if not max_drift > 0 or max_drift == float("inf"):
        raise _UsageError(f"gpuperf merge: --max-drift {args.max_drift!r} is not a positive ratio; write it like "
                          f"'100%' or '1.0'")
    out = Path(args.output)
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise _UsageError(f"{out}: the merged baseline is written as YAML; name it <device key>.yaml")
    if out.exists() and not any(out.resolve() == Path(f).resolve() for f in args.files):
        raise _UsageError(f"{out}: exists and is not one of the inputs, whose entries would be lost; "
                          f"pass it as the first input to merge into it, or choose another output")
    recordings, device, software = [], None, {}
    for f in args.files:
        dev, sw, records = load_recording(Path(f))
        if not dev or not dev.get("key"):
            raise _UsageError(f"{f}: records no gpuperf device, so it cannot join a baseline; merge baselines "
                              f"(--gpuperf-save) or results JSON written by --gpuperf-json")
        if device is not None and dev["key"] != device["key"]:
            raise _UsageError(f"{f}: is for device {dev['key']!r}, but {args.files[0]} is for {device['key']!r}; "
                              f"only recordings of one GPU model can be merged")
        peaks = dev.get("peaks")  # only plausible peaks carry over: a broken one must not spread
        device = dict(dev, peaks=merged_peaks((device or {}).get("peaks"),
                                              valid_peaks(peaks if isinstance(peaks, dict) else None,
                                                          device_kind(dev))[0]))
        software = sw or software
        recordings.append((f, _by_id(records)))
    later_ids = {name for _, records in recordings[1:] for name in records}
    for text in args.restart:
        if not any(text in name for name in later_ids):
            raise _UsageError(f"gpuperf merge: --restart {text!r} names no test of the inputs after the first "
                              f"({args.files[0]} is the one whose recordings it drops)")
    entries, notes = baseline_mod.combine(recordings, max_drift, args.restart)
    baseline_mod.save(out, device, software, entries, keep_others=False)
    print(f"gpuperf merge: {plural(len(args.files), 'recording')} of {device['key']} -> {out}: "
          f"{plural(len(entries), 'entry', 'entries')}")
    spreads = sorted(((log_spread(e.history)[0], name) for name, e in entries.items()
                      if len(e.history or []) > 1), reverse=True)
    if spreads:
        values = [s for s, _ in spreads]
        print(f"run-to-run spread (sd of a test's recorded medians), "
              f"{plural(len(values), 'entry', 'entries')} of 2+ recordings: median "
              f"{statistics.median(values):.1%}, max {values[0]:.1%}; {sum(s > 0.01 for s in values)} above 1%")
        for s, name in spreads[:10]:  # the least reproducible tests: where to look first
            if s > 0.01:
                print(f"  {s:6.1%}  {name}")
    for note in notes:
        print(f"note: {note}")
    return EXIT_OK


def _cmd_merge_shards(args) -> int:
    """One report of the results JSON files that the shards of one run wrote (--gpuperf-shard, --gpuperf-json):
    the verdicts each shard reached, one table, optionally one JSON and one Markdown file."""
    import pytest

    from .core.shards import shards_problem
    from .plugin.outputs import check_outputs
    from .report.markdown import write_markdown
    from .report.table import terminal_lines
    from .store.results import load_shard, write_json

    try:
        check_outputs([("-o", args.output, False), ("--markdown", args.markdown, False)])
    except pytest.UsageError as exc:
        raise _UsageError(str(exc).replace("gpuperf:", "gpuperf merge-shards:", 1)) from None
    loaded, seen = [], set()
    for f in args.files:
        if Path(f).resolve() in seen:
            raise _UsageError(f"{f}: given twice")
        seen.add(Path(f).resolve())
        if Path(f).suffix.lower() in (".yaml", ".yml"):
            raise _UsageError(f"{f}: a baseline, not a shard's results; give the JSON files --gpuperf-json wrote "
                              f"(`gpuperf merge` combines baselines)")
        loaded.append((f, *load_shard(Path(f))))
    first, device = loaded[0][0], loaded[0][1] or {}
    for f, dev, *_ in loaded[1:]:
        if (dev or {}).get("key") != device.get("key"):
            raise _UsageError(f"{f}: is for device {(dev or {}).get('key')!r}, but {first} is for "
                              f"{device.get('key')!r}; only shards run on one GPU model make one report")
    problem = shards_problem([(f, shard) for f, _, _, _, shard in loaded])
    if problem:
        raise _UsageError(f"gpuperf merge-shards: {problem}")
    owner, records = {}, []
    for f, _, _, recs, _ in loaded:
        for rec in recs:
            if rec.id.nodeid in owner:
                raise _UsageError(f"{f}: {rec.id.nodeid} is also in {owner[rec.id.nodeid]}; shards are disjoint, "
                                  f"so these files are not the shards of one run")
            owner[rec.id.nodeid] = f
            judged, words = rec.judgement, rec.judged  # a stored verdict fails by the gate's rule
            regressed = fails(words.verdict, words.memory_verdict, words.counter_verdict)
            records.append(replace(rec, judgement=replace(judged, regression=regressed)) if judged else rec)
    software = next((sw for _, _, sw, _, _ in loaded if sw), {})
    print(f"gpuperf merge-shards: {plural(len(args.files), 'file')}, {plural(len(records), 'result')}")
    print("\n".join(terminal_lines(records, device, width=_width())))
    regressions = [r for r in records if r.judged.regression]
    for r in regressions:
        print(f"REGRESSION {r.id.nodeid}: {r.judged.message or r.judged.verdict}")
    if args.output is not None:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_json(args.output, records, device, software, started)
    if args.markdown is not None:
        write_markdown(args.markdown, records, device, software)
    return EXIT_SLOWER if regressions else EXIT_OK


def _cmd_ab(args) -> int:
    import signal

    import pytest

    from .ab import AbError, AbIncomplete, AbInterrupted, AbRun, compare_revisions, report
    from .ab_gpus import choose_gpus, compare_on_gpus, visible_gpus
    from .plugin.outputs import check_outputs

    pytest_args = list(args.pytest_args)
    if args.threshold is not None:  # each round's default; a test's marker still wins, as in pytest
        pytest_args.append(f"--gpuperf-threshold={parse_threshold(args.threshold) * 100:g}%")
    if args.rounds < 1:
        raise _UsageError(f"gpuperf ab: --rounds {args.rounds}: give 1 or more")
    try:
        budget = Budget.parse(args.budget)
    except ValueError as exc:
        raise _UsageError(f"gpuperf ab: {exc}") from None
    visible = visible_gpus()
    try:
        gpus = choose_gpus(args.gpus, visible)
    except ValueError as exc:
        raise _UsageError(f"gpuperf ab: {exc}") from None
    if len(gpus) > 1 and any(a.split("=", 1)[0] == "--gpuperf-device" for a in pytest_args):
        raise _UsageError("gpuperf ab: --gpuperf-device: --gpus gives each pytest process its GPU; leave it out")
    if args.counters and args.count_undecided:
        raise _UsageError("gpuperf ab: --counters counts every test in round 1; leave out --count-undecided")
    if args.counters or args.count_undecided:  # said here once, not only in each round's log
        from .measure.counters import counting_refusal

        if refusal := counting_refusal():
            raise _UsageError(f"gpuperf ab: {'--counters' if args.counters else '--count-undecided'}: {refusal}")
    try:
        check_outputs([("--json", args.json, False), ("--markdown", args.markdown, False), ("--logs", args.logs, True)])
    except pytest.UsageError as exc:
        raise _UsageError(str(exc).replace("gpuperf:", "gpuperf ab:", 1)) from None
    if args.logs is not None and args.logs.is_dir() and any(args.logs.iterdir()):
        raise _UsageError(f"gpuperf ab: --logs: {args.logs} is not empty; give a new or empty folder")

    def stop(signum, frame):  # a cancelled CI job: as Ctrl-C; a second one must not cut the report short
        signal.signal(signal.SIGTERM, lambda *_: None)  # not SIG_IGN, which the pytest processes would inherit
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        run = AbRun(pytest_args, rounds=args.rounds, baseline_dir=Path(args.baseline_dir), counters=args.counters,
                    count_undecided=args.count_undecided, budget=budget, logs=args.logs and args.logs.resolve())
        if len(gpus) > 1:
            verdicts, base, head = compare_on_gpus(run, Path.cwd(), args.base, gpus)
        else:  # on one GPU: the first visible unless --gpus named another
            if gpus and gpus[0] != visible[0]:
                run.runner = functools.partial(run.runner, env={"CUDA_VISIBLE_DEVICES": gpus[0]})
            verdicts, base, head = compare_revisions(run, Path.cwd(), args.base)
    except AbIncomplete as exc:  # what the complete rounds decided is shown and written, then the error
        report(exc.verdicts, exc.base, exc.head, width=_width(), json_path=args.json, markdown_path=args.markdown,
               incomplete=str(exc))
        interrupted = isinstance(exc, AbInterrupted)
        print(f"gpuperf ab: {'' if interrupted else 'error: '}{exc}", file=sys.stderr)
        code = EXIT_INTERRUPTED if interrupted else EXIT_BAD_INPUT
    except AbError as exc:
        print(f"gpuperf ab: error: {exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    else:
        code = report(verdicts, base, head, width=_width(), json_path=args.json, markdown_path=args.markdown)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.logs is not None:
        print(f"gpuperf ab: each pytest process's log, results JSON and plan: {args.logs}", file=sys.stderr)
    return code


def _cmd_device(args) -> int:
    from .measure import device as device_mod
    from .measure import peaks as peaks_mod
    from .report.rows import peaks_text

    if args.refresh and args.no_peaks:
        raise _UsageError("gpuperf device: --refresh measures the peaks; it cannot go with --no-peaks")
    try:
        dev = peaks_mod.current_device(measure_peaks=not args.no_peaks)
    except Exception as exc:
        raise _UsageError(f"gpuperf device: cannot query the device ({type(exc).__name__}: {exc})") from None
    try:
        software = device_mod.software_versions()
    except Exception:
        software = {}
    print(f"key: {dev.get('key')}")
    for k in ("name", "capability", "sm_count", "memory_gib"):
        if dev.get(k) is not None:
            print(f"{k}: {dev[k]}")
    for k, v in dev.items():
        if k not in ("key", "name", "capability", "sm_count", "memory_gib", "peaks", "peak_notes"):
            print(f"{k}: {v}")
    peaks = peaks_text(dev.get("peaks"))
    print(f"measured peaks: {peaks or 'none'}")
    for note in dev.get("peak_notes") or ():
        print(f"note: {note.removeprefix('gpuperf: ')}")
    sw = ", ".join(f"{k} {v}" for k, v in (software or {}).items() if v)
    if sw:
        print(f"software: {sw}")
    if args.refresh:
        _store_peaks(Path(args.cache_dir), dev, software)
    return EXIT_OK


def _store_peaks(cache_dir: Path, dev: dict, software: dict) -> None:
    """`gpuperf device --refresh`: replace the cached peaks `pytest --gpuperf` reads for this device and
    software stack with the ones just measured (plausible, undisturbed ones only)."""
    from .measure.peaks import cache_key
    from .store.peak_cache import write_peaks

    try:
        path = write_peaks(cache_dir, cache_key(dev["key"], software), dev.get("peaks") or {})
    except OSError as exc:
        raise _UsageError(f"gpuperf device --refresh: cannot write the peaks into {cache_dir}: {exc}") from None
    print(f"stored peaks: {path}")


def _parser() -> _Parser:
    p = _Parser(prog="gpuperf", description="pytest-gpuperf baselines: compare, show, plot, merge; describe the device.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="{compare,ab,show,plot,merge,merge-shards,device}")
    c = sub.add_parser("compare", help="compare two baselines/results files; exit 1 if something got slower",
                       description="Compare OLD with NEW (baseline .yaml or results .json) with the same decision "
                                   "as `pytest --gpuperf`. Exit 0: nothing slower, 1: something slower, 2: bad input.")
    c.add_argument("old", metavar="OLD")
    c.add_argument("new", metavar="NEW")
    c.add_argument("--threshold", default=None,
                   help="slowdown that counts as a regression, e.g. 5%% or 0.05 (default: each test's recorded "
                        "threshold, else 5%%)")
    c.set_defaults(func=_cmd_compare)
    s = sub.add_parser("show", help="show a baseline (default: this device's) as a table")
    s.add_argument("file", metavar="FILE", nargs="?", default=None)
    s.add_argument("--baseline-dir", default="baselines", help="where <device key>.yaml lives (default: baselines)")
    s.set_defaults(func=_cmd_show)
    pl = sub.add_parser("plot", help="plot one or more baselines/results files in one figure")
    pl.add_argument("files", metavar="FILE", nargs="+")
    pl.add_argument("-o", "--output", required=True, metavar="OUT.png")
    pl.set_defaults(func=_cmd_plot)
    m = sub.add_parser("merge", help="combine recordings of one GPU model (several machines) into one baseline",
                       description="Combine baselines or results JSON of one GPU model, oldest first, into OUT: each "
                                   "entry's history gets the recorded medians (the newest, up to the history window), "
                                   "from which the comparison learns the test's run-to-run spread, and its median "
                                   "their center. A test whose medians differ by more than --max-drift (largest / "
                                   "smallest - 1) keeps its newest entry. OUT may be one of the inputs; an existing OUT "
                                   "that is not one is refused.")
    m.add_argument("--restart", action="append", default=[], metavar="TEXT",
                   help="tests whose id contains TEXT keep only the recordings after the first FILE: their history "
                        "starts again (a change of the code the counters cannot see); repeatable")
    m.add_argument("files", metavar="FILE", nargs="+")
    m.add_argument("-o", "--output", required=True, metavar="OUT.yaml")
    m.add_argument("--max-drift", default=f"{MAX_DRIFT * 100:g}%",
                   help="largest spread of a test's medians that are combined (default %(default)s)")
    m.set_defaults(func=_cmd_merge)
    ms = sub.add_parser("merge-shards", help="one report of the results of a run's shards; exit 1 if something got slower",
                        description="Combine the results JSON files that the shards of one run wrote "
                                    "(pytest --gpuperf --gpuperf-shard=K/N --gpuperf-json=FILE) into one verdict table, "
                                    "and optionally one results JSON and one Markdown summary. The files must be every "
                                    "shard of one split, run on one GPU model, with no test in two of them. Exit 0: "
                                    "nothing slower, 1: something slower, 2: bad input.")
    ms.add_argument("files", metavar="FILE", nargs="+")
    ms.add_argument("-o", "--output", metavar="OUT.json", type=Path, default=None,
                    help="the merged results (pytest-benchmark JSON, as --gpuperf-json)")
    ms.add_argument("--markdown", metavar="PATH", type=Path, default=None, help="the summary as Markdown")
    ms.set_defaults(func=_cmd_merge_shards)
    a = sub.add_parser("ab", usage="gpuperf ab BASE [--rounds N] [--budget 2.5x|600s|10m|none] [--gpus all|N|I,J] "
                                   "[--threshold PCT] [--counters|--count-undecided] [--json PATH] [--markdown PATH] [--logs DIR] "
                                   "[--baseline-dir DIR] [-- PYTEST_ARGS...]",
                       help="measure a base revision and the working tree on this host's GPUs, interleaved; exit 1 "
                                  "if something got slower",
                       description="Check out BASE (a git revision) in a temporary worktree and run `pytest --gpuperf` "
                                   "there and in the working tree in alternating processes (base, head, head, base, "
                                   "...); every round after the first measures only the tests still undecided that "
                                   "fit --budget. Each test is judged from its rounds. Exit 0: nothing slower, 1: something slower or a "
                                   "test failed in the working tree, 2: bad input, 130: interrupted (after round 1 the "
                                   "complete rounds are still reported). Arguments after -- go to pytest.")
    a.add_argument("base", metavar="BASE", help="the git revision to compare with, e.g. origin/main")
    a.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                   help="pytest processes per side at most (default %(default)s)")
    a.add_argument("--budget", default=DEFAULT_BUDGET, metavar="2.5x|600s|10m|none",
                   help="how long the A/B's pytest processes may take in all (on each GPU), round 1 included: a "
                        "multiple of a plain run (round 1's faster process) or a time (default "
                        "%(default)s; none: no limit); later rounds then measure again only the unsure tests that "
                        "fit, cheapest first, and a slower or faster test is always confirmed; an unsure test left "
                        "out stays unsure")
    a.add_argument("--gpus", default="all", metavar="all|N|I,J",
                   help="the GPUs to use: all visible (default), the first N, or these indices (0,1); the tests "
                        "are split between them by recorded time and each GPU alternates base and head for its part"
                        " (docs/gate.md)")
    a.add_argument("--threshold", default=None,
                   help="slowdown that counts, e.g. 5%% (as --gpuperf-threshold: a test's marker still wins)")
    a.add_argument("--counters", action="store_true",
                   help="also count hardware counters (Nsight Compute) in each side's first round and judge them: "
                        "more instructions or DRAM bytes fails a test that timing cannot decide")
    a.add_argument("--count-undecided", action="store_true",
                   help="after the last round, count only the tests time left open (and the slower or faster) in one "
                        "more process a side, which times them once more; judged as --counters; not held to --budget")
    a.add_argument("--json", metavar="PATH", type=Path, default=None,
                   help="the working tree's results and verdicts (pytest-benchmark JSON)")
    a.add_argument("--markdown", metavar="PATH", type=Path, default=None, help="the verdict table as Markdown")
    a.add_argument("--logs", metavar="DIR", type=Path, default=None,
                   help="keep each pytest process's log, results JSON and plan in DIR (new or empty; default: removed)")
    a.add_argument("--baseline-dir", default="baselines",
                   help="where this GPU's <device key>.yaml lives (read as BASE holds it): its recordings of "
                        "graph-timed tests widen their noise bounds (default: baselines)")
    a.set_defaults(func=_cmd_ab)
    d = sub.add_parser("device", help="this machine's device key, properties and measured peaks")
    d.add_argument("--no-peaks", action="store_true", help="do not measure the peaks (faster)")
    d.add_argument("--refresh", action="store_true",
                   help="store the peaks just measured in pytest's cache (--cache-dir), replacing the ones "
                        "`pytest --gpuperf` run from here uses for this device and software stack; peaks "
                        "measured under load or out of range are not stored")
    d.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR, metavar="DIR",
                   help="pytest's cache directory (default %(default)s, as pytest's cache_dir ini key)")
    d.set_defaults(func=_cmd_device)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if argv[:1] == ["ab"] and "--" in argv:  # what follows -- goes to pytest untouched
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    try:
        try:
            args = parser.parse_args(argv)
            args.pytest_args = pytest_args
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        if getattr(args, "func", None) is None:
            parser.print_usage(sys.stderr)
            print("gpuperf: error: a command is required: compare, ab, show, plot, merge, merge-shards or device", file=sys.stderr)
            return EXIT_BAD_INPUT
        return args.func(args)
    except _UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    except (BaselineError, ValueError) as exc:
        print(f"gpuperf: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gpuperf show | head` closed the pipe: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("GPUPERF_DEBUG"):
            raise
        print(f"gpuperf: error: {type(exc).__name__}: {exc} (set GPUPERF_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
