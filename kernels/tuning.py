"""What the launch-config sweeps (tune_attention, tune_streaming) share: timing one forced config with
gpu_benchmark's timer, where a config that fails is a result rather than an abort, and their
command-line plumbing."""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from pytest_gpuperf.measure.timer import TimingConfig, measure


def median_ms(fn: Callable[[], Any], config: TimingConfig, inputs: Any) -> float | str:
    """fn's median in ms, or the error it raised (a config that does not compile or fit)."""
    try:
        return measure(fn, config, inputs=inputs).median_ms
    except Exception as exc:  # noqa: BLE001 - the sweep reports it and goes on
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"


def int_tuple(parser: argparse.ArgumentParser, option: str, text: str, count: int | None = None) -> tuple[int, ...]:
    """`text` ("4,16,4096") as integers, or a usage error naming `option`."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        parser.error(f"{option} takes comma-separated integers, got {text!r}")
    if count is not None and len(values) != count:
        parser.error(f"{option} takes {count} comma-separated integers, got {text!r}")
    return values


def save(results: dict[str, float | str], path: str | None) -> None:
    """Write the sweep's results as JSON when --out named a file."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
