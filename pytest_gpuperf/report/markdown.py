"""The summary as GitHub-flavoured Markdown (a CI step summary)."""
from __future__ import annotations

from pathlib import Path

from ..core.files import atomic_write_text
from ..core.records import Result
from ..core.verdict import asked_threshold, judge
from .rows import COLUMNS, ceiling_line, cells_of, counters_line, grouped, kept_columns, peaks_text, summary_counts

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


def markdown(results: list[Result], device: dict, software: dict, *, note: str | None = None,
             counting: str = "--gpuperf-counters") -> str:
    """The summary as GitHub-flavoured Markdown (a CI step summary): one table per group. `counting`:
    the option that counts the tests time left open (`counters_line`)."""
    out = [f"## pytest-gpuperf: {_md_escape((device or {}).get('name') or (device or {}).get('key') or 'unknown device')}",
           ""]
    info = []
    if device:
        info.append(f"device key `{device.get('key')}`")
        peaks = peaks_text(device.get("peaks"))
        if peaks:
            info.append("peaks: " + peaks)
    for k, v in (software or {}).items():
        if v:
            info.append(f"{k} {v}")
    if info:
        out += [_md_escape(" · ".join(info)), ""]
    if note:
        out += [f"**{_md_escape(note)}**", ""]
    out += [f"**{summary_counts(results)}**", ""]
    ceiling = ceiling_line(results)
    if ceiling:
        out += [_md_escape(ceiling), ""]
    work = counters_line(results, counting)
    if work:
        out += [_md_escape(work.removeprefix("gpuperf: ")), ""]
    regressions = [r for r in results if r.judged.regression or r.judged.verdict == "slower"
                   or r.judged.memory_verdict == "slower"]
    if regressions:
        out.append("### Regressions")
        out.append("")
        for r in regressions:
            msg = r.judged.message or ""
            if not msg and r.baseline is not None:
                msg = judge(r.baseline, r, asked_threshold(r)).message
            out.append(f"- `{_md_escape(r.id.nodeid)}`: {_md_escape(msg or r.judged.verdict)}")
        out.append("")
    keep = kept_columns(cells_of(r) for r in results)
    for group, rows in grouped(results):
        out.append(f"### {_md_escape(group)}")
        out.append("")
        out.append("| param | " + " | ".join(COLUMNS[k][0] for k in keep) + " | verdict |")
        out.append("| :-- | " + "--: | " * len(keep) + ":-- |")
        for r in rows:
            cells = [cells_of(r)[k] for k in keep]
            verdict = _MD_VERDICT.get(r.judged.verdict or "", r.judged.verdict or "")
            mem = r.judged.memory_verdict
            if mem in ("slower", "faster"):
                verdict += f" (peak memory {'**grew**' if mem == 'slower' else 'shrank'})"
            if r.judged.counter_verdict in ("more", "less"):
                verdict += f" ({'**more work**' if r.judged.counter_verdict == 'more' else 'less work'})"
            label = r.id.param or r.id.name or ""
            out.append("| " + " | ".join([f"`{_md_escape(label)}`"] + [_md_escape(c) for c in cells]
                                         + [verdict]) + " |")
        out.append("")
    return "\n".join(out)


def write_markdown(path: Path, results: list[Result], device: dict, software: dict, *, note: str | None = None,
                   counting: str = "--gpuperf-counters") -> None:
    """`note` (e.g. why a run stopped early) is a bold line above the counts."""
    atomic_write_text(Path(path), markdown(results, device, software, note=note, counting=counting))
