"""The terminal tables: the session summary (`pytest --gpuperf`, `gpuperf show`) and `gpuperf compare`."""
from __future__ import annotations

from collections.abc import Mapping

from ..core.records import Result
from ..core.units import fmt_ms, plural
from ..core.verdict import Verdict, is_regression
from .rows import (COLUMNS, ceiling_line, cells_of, detects_text, device_line, fmt_change, grouped, kept_columns,
                   middle_truncate, natural_key, nodeid_name, nodeid_param, param_width, row_key, summary_counts,
                   is_undecided, verdict_parts, verdict_text)


def terminal_lines(results: list[Result], device: dict, width: int = 120) -> list[str]:
    """The summary table: one block per group, rows sorted by param (impls of one case adjacent).

    Columns that are empty for every result (e.g. TFLOP/s for a memory-bound suite, verdicts without a
    baseline) are left out; params longer than what fits ``width`` are shown in full up to
    PARAM_MIN_WIDTH characters and truncated in the middle beyond."""
    lines = [f"gpuperf: {device_line(device)}"]
    if not results:
        return lines + ["no measurements"]
    cells = {id(r): cells_of(r) for r in results}
    keep = kept_columns(cells.values())
    columns = [COLUMNS[k] for k in keep]
    show_verdict = any(verdict_text(r) for r in results)
    verdict_w = max([7] + [len(verdict_text(r)) for r in results]) if show_verdict else 0
    fixed = sum(w + 2 for _, w, _ in columns) + (2 + verdict_w if show_verdict else 0)
    longest = max(len(str(r.id.param or r.id.name or "")) for r in results)
    param_w = param_width(longest, width - 2 - fixed)
    for group, rows in grouped(results):
        lines.append("")
        lines.append(group)
        header = "  " + f"{'param':<{param_w}}"
        for name, w, _ in columns:
            header += "  " + f"{name:>{w}}"
        if show_verdict:
            header += "  " + "verdict"
        lines.append(header.rstrip())
        for r in rows:
            label = str(r.id.param or r.id.name or "")
            line = "  " + f"{middle_truncate(label, param_w):<{param_w}}"
            row_cells = cells[id(r)]
            for k, (name, w, _) in zip(keep, columns):
                line += "  " + f"{row_cells[k]:>{w}}"
            if show_verdict:
                line += "  " + verdict_text(r)
            lines.append(line.rstrip())
    lines.append("")
    lines.append(summary_counts(results))
    ceiling = ceiling_line(results)
    if ceiling:
        lines.append(ceiling)
    return lines


def _undecided(v: Verdict, record: Result | None) -> bool:
    """A `same` whose smallest detectable change exceeds the test's own threshold (the record's, as
    the run asked for it; else the verdict's): it decided nothing (rows.undecided_same)."""
    asked = record.threshold if record is not None else None
    return is_undecided(v.time, v.detectable, v.threshold if asked is None else asked)


def _label(key: str, rec: Result | None) -> str:
    """A row's label: its param, else the test id's."""
    return str((rec.id.param if rec else "") or nodeid_param(key) or nodeid_name(key))


def compare_lines(verdicts: Mapping[str, Verdict], old: Mapping[str, Result], new: Mapping[str, Result],
                  width: int = 120) -> list[str]:
    """The `gpuperf compare` table: test id -> Verdict, with the old and new records by test id."""
    records = []
    for key, v in verdicts.items():
        rec = new.get(key) or old.get(key)
        records.append((key, rec, v))
    if not records:
        return ["nothing to compare: both files are empty"]
    heads = ("old", "new", "change", "detects", "mem", "verdict")
    widths = (10, 10, 8, 8, 8, max(7, max(len(v.time) for _, _, v in records)))
    fixed = sum(w + 2 for w in widths)
    longest = max(len(_label(key, rec)) for key, rec, _ in records)
    param_w = param_width(longest, width - 2 - fixed)
    groups: dict[str, list] = {}
    for key, rec, v in records:
        g = str(((rec.id.group or rec.id.name) if rec else "") or nodeid_name(key))
        groups.setdefault(g, []).append((key, rec, v))
    lines = []
    for g in sorted(groups, key=natural_key):
        rows = sorted(groups[g], key=lambda t: row_key((t[1].id.param if t[1] else "") or nodeid_param(t[0])))
        lines.append(g)
        header = "  " + f"{'param':<{param_w}}" + "".join(f"  {h:>{w}}" for h, w in zip(heads[:-1], widths))
        lines.append(header + f"  {heads[-1]}")
        for key, rec, v in rows:
            label = _label(key, rec)
            mem = "" if v.memory in ("same", "new", "missing") else ("+" if v.memory == "slower" else "-")
            if v.memory_change is not None and mem:
                mem = fmt_change(v.memory_change)
            cells = (fmt_ms(v.base_ms) if v.base_ms else "-", fmt_ms(v.now_ms) if v.now_ms else "-",
                     fmt_change(v.change), "" if v.noise_bound is None else detects_text(v.detectable),
                     mem)
            line = "  " + f"{middle_truncate(label, param_w):<{param_w}}"
            line += "".join(f"  {c:>{w}}" for c, w in zip(cells, widths))
            line += f"  {'same?' if _undecided(v, rec) else v.time}"
            line += {"slower": " (more memory)", "faster": " (less memory)"}.get(v.memory, "")
            line += {"more": " (more work)", "less": " (less work)"}.get(v.counters or "", "")
            lines.append(line.rstrip())
        lines.append("")
    mem_slower = sum(1 for _, _, v in records if v.memory == "slower")
    summary = f"{plural(len(records), 'test')}: " + ", ".join(verdict_parts(
        ("undecided" if _undecided(v, rec) else v.time, v.noise_bound, v.threshold) for _, rec, v in records))
    if mem_slower:
        summary += f", {mem_slower} with more peak memory"
    lines.append(summary)
    worked = [v.counters for _, _, v in records if v.counters]
    if worked:
        lines.append("counters: " + ", ".join(f"{worked.count(w)} {w} work" for w in ("more", "less", "same")
                                              if worked.count(w)))
    for key, _, v in records:
        if is_regression(v):
            lines.append(f"REGRESSION {key}: {v.message}")
    return lines
