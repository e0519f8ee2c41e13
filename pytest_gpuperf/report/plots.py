"""PNG plots: per group, implementations side by side (as % of peak where known) with baseline markers,
and `gpuperf plot`'s comparison of several files. matplotlib is imported only when plotting."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

from ..core.units import as_number, fmt_ms
from ..core.verdict import DEFAULT_THRESHOLD
from ..core.records import Entry, Measured, Result
from ..store.baseline import Baseline
from .rows import fmt_change, fmt_rate, grouped, middle_truncate, natural_key, record_group, row_key, series_and_case

# no reds/greens that could be mistaken for the slower/faster outlines
_PALETTE = ("#4C72B0", "#DD8452", "#8172B3", "#64B5CD", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974",
            "#2F4B7C", "#A05195")
_VERDICT_COLOR = {"slower": "#C0392B", "faster": "#1E8449", "unsure": "#B9770E"}


def _metric(rows: list[Result]) -> tuple[str, str, bool]:
    """(key, axis label, higher_is_better) for a set of records."""
    for key, label in (("pct_of_peak", "% of peak"), ("gbps", "GB/s"), ("tflops", "TFLOP/s")):
        if rows and all(as_number(getattr(r, key)) is not None for r in rows):
            return key, label, True
    for key, label in (("pct_of_peak", "% of peak"), ("gbps", "GB/s"), ("tflops", "TFLOP/s")):
        if sum(as_number(getattr(r, key)) is not None for r in rows) * 2 >= len(rows) > 0:
            return key, label, True
    return "median_ms", "median time (ms), lower is better", False


def _value(r: Measured | None, key: str, like: Result | None = None) -> float | None:
    """r's value of key; for a baseline entry without it, derived from ``like`` (throughput ~ 1/time)."""
    if not r:
        return None
    v = as_number(r.stats.median_ms if key == "median_ms" else getattr(r, key))  # a statistic, or a rate
    if v is not None or like is None or key == "median_ms":
        return v
    lv, lm, rm = as_number(getattr(like, key)), as_number(like.stats.median_ms), as_number(r.stats.median_ms)
    if lv is None or not lm or not rm:
        return None
    return lv * lm / rm


def _fmt_value(v: float, key: str) -> str:
    if key == "pct_of_peak":
        return f"{v:.0f}%" if v >= 10 else f"{v:.1f}%"
    if key == "median_ms":
        return fmt_ms(v)
    return fmt_rate(v)


def _impl_case(rows: list[Result]) -> list[tuple[str, str, Result]]:
    """(series, case, record), the series from rows.series_and_case. Falls back to one bar per param
    (or per test id) when that split is not unique."""
    params = [str(r.id.param or "") for r in rows]
    splits = [series_and_case(p) for p in params]
    if params and all(split is not None for split in splits):
        items = [(split[0], split[1], r) for split, r in zip(splits, rows)]
        if len({(i, c) for i, c, _ in items}) == len(items):
            return items
    items = [(record_group(r), p or str(r.id.name or ""), r) for p, r in zip(params, rows)]
    if len({(i, c) for i, c, _ in items}) == len(items):
        return items
    return [(record_group(r), str(r.id.nodeid or p), r) for p, r in zip(params, rows)]


def _safe_filename(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "group"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _plot_group(plt, group: str, rows: list[Result], base_entries: Mapping[str, Entry], title_suffix: str):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    key, label, higher = _metric(rows)
    items = _impl_case(rows)
    impls = sorted({i for i, _, _ in items}, key=natural_key)
    cases = sorted({c for _, c, _ in items}, key=natural_key)
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
            verdict = r.judged.verdict
            ax.barh(y, v, height=bar_h * 0.88, color=color[impl],
                    edgecolor=_VERDICT_COLOR.get(verdict, "none"), linewidth=2 if verdict in _VERDICT_COLOR else 0)
            base = r.baseline if r.baseline is not None else base_entries.get(r.id.nodeid)
            bv = _value(base, key, like=r)
            text = _fmt_value(v, key)
            if key != "median_ms" and as_number(r.stats.median_ms):
                text += f"  {fmt_ms(as_number(r.stats.median_ms))}"
            if bv is not None:
                any_base = True
                vmax = max(vmax, bv)
                ax.plot([bv, bv], [y - bar_h * 0.48, y + bar_h * 0.48], color="black", linewidth=2.2,
                        solid_capstyle="butt", zorder=3)
                change = as_number(r.judged.change)
                if change is None and as_number(base.stats.median_ms) and as_number(r.stats.median_ms):
                    change = r.stats.median_ms / base.stats.median_ms - 1.0
                if change is not None and (abs(change) >= 0.005 or verdict in _VERDICT_COLOR):
                    text += f"  {change * 100:+.1f}% time"
            if verdict in _VERDICT_COLOR:
                text += f" ({verdict})"
                verdicts_seen.add(verdict)
            mem_verdict = r.judged.memory_verdict
            mem_color = None
            if mem_verdict in ("slower", "faster"):
                mb = as_number(base.peak_memory_bytes) if base is not None else None
                mn = as_number(r.peak_memory_bytes)
                grew = "grew" if mem_verdict == "slower" else "shrank"
                text += f"  peak mem {grew}" + (f" {mn / mb * 100 - 100:+.0f}%" if mb and mn else "")
                mem_color = _VERDICT_COLOR[mem_verdict]
            ax.annotate(text, xy=(max(v, bv or 0), y), xytext=(4, 0), textcoords="offset points",
                        va="center", ha="left", fontsize=8.5,
                        color=_VERDICT_COLOR.get(verdict) or mem_color or "#222222",
                        fontweight="bold" if "slower" in (verdict, mem_verdict) else None,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.5})
    ax.set_yticks(ys)
    ax.set_yticklabels([middle_truncate(t, 32) for t in labels_y], fontsize=9.5)
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


def write_plots(directory: Path, results: list[Result], baseline: Baseline | Mapping[str, Entry] | None = None,
                device: dict | None = None) -> list[Path]:
    """One PNG per group: implementations side by side (as % of peak where known), with baseline markers.

    ``baseline`` may be a Baseline, a mapping test id -> entry, or None; a result's own baseline entry wins."""
    if not results:
        return []
    plt = _plt()
    if isinstance(baseline, Baseline):
        base_entries = baseline.entries
        device = device or baseline.device
    elif baseline is not None:
        base_entries = baseline
    else:
        base_entries = {}
    suffix = f"  ({device.get('name') or device.get('key')})" if device else ""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    used = set()
    for group, rows in grouped(results):
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


def plot_files(out: Path, labeled: list[tuple[str, list[Result]]]) -> Path:
    """`gpuperf plot`: one figure comparing several files' results, one panel per group, one bar per file."""
    plt = _plt()
    from matplotlib.patches import Patch

    out = Path(out)
    all_rows = [r for _, rows in labeled for r in rows]
    if not all_rows:
        raise ValueError("nothing to plot: the files have no entries")
    key, label, higher = _metric(all_rows)
    groups: dict[str, dict[str, dict[int, Result]]] = {}
    for fi, (_, rows) in enumerate(labeled):
        for r in rows:
            g = groups.setdefault(record_group(r), {})
            g.setdefault(str(r.id.param or r.id.name or ""), {})[fi] = r
    names = sorted(groups, key=natural_key)
    n_files = len(labeled)
    heights = [len(groups[g]) * (0.26 * n_files + 0.18) + 0.9 for g in names]
    fig, axes = plt.subplots(len(names), 1, figsize=(11, max(3.0, sum(heights) + 0.6)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colors = [_PALETTE[i % len(_PALETTE)] for i in range(n_files)]
    for ax, g in zip(axes[:, 0], names):
        params = sorted(groups[g], key=row_key)
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
                if key != "median_ms" and as_number(r.stats.median_ms):
                    text += f"  {fmt_ms(as_number(r.stats.median_ms))}"
                tcolor = "#222222"
                if first is None:
                    first = r
                elif as_number(first.stats.median_ms) and as_number(r.stats.median_ms):
                    change = r.stats.median_ms / first.stats.median_ms - 1.0
                    if abs(change) >= 0.005:
                        text += f"  {fmt_change(change)} time vs {labeled[first_fi][0]}"
                    if abs(change) > DEFAULT_THRESHOLD:
                        tcolor = _VERDICT_COLOR["slower" if change > 0 else "faster"]
                if first is r:
                    first_fi = fi
                ax.annotate(text, xy=(v, y), xytext=(4, 0), textcoords="offset points", va="center", ha="left",
                            fontsize=8, color=tcolor)
        ax.set_yticks(range(len(params) - 1, -1, -1))
        ax.set_yticklabels([middle_truncate(p, 40) for p in params], fontsize=8.5)
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
