"""Numeric checks of kernel outputs: per-precision tolerances and a failure message a person can act on.

Default (rtol, atol) by the precision the output was computed in. float64/float32/bfloat16/float16
follow torch.testing's defaults; tf32 is a float32 tensor computed with 10-bit mantissas, so it gets
bfloat16-like rounding (2^-11) with headroom; fp8 formats get a few of their ulps.
A value passes when |actual - expected| <= atol + rtol * |expected| (expected in float64).
"""
from __future__ import annotations

import math
from typing import Any

from ..core.units import plural

TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "tf32": (2e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
    "float8_e4m3fn": (1.25e-1, 1e-3),
    "float8_e5m2": (2.5e-1, 1e-3),
}
_SHOW = 5  # how many mismatching NaN/Inf positions a message lists


def default_tolerance(precision: str) -> tuple[float, float]:
    """(rtol, atol) for a precision name ('bfloat16', 'tf32', ...)."""
    try:
        return TOLERANCES[precision]
    except KeyError:
        raise ValueError(f"gpu_assert_close: no default tolerance for {precision!r}; pass rtol= and atol=") from None


def _index(flat: int, shape) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat //= max(size, 1)
    return tuple(reversed(out))


def is_nonnegative_number(value: Any) -> bool:
    """A finite number >= 0, numpy and 0-d tensor scalars included; not a bool or a string (a
    tolerance, or a cost model's bytes or flops)."""
    if isinstance(value, (bool, str, bytes)):
        return False
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(number) and number >= 0


def _fmt(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, index)) + ")"


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None,
                 precision: str | None = None, name: str = "output") -> None:
    """Assert `actual` matches `expected` within tolerance; sequences are compared item by item.

    `expected` may be the float64 reference of a lower-precision `actual`; any other dtype difference,
    a shape or device difference, or NaN/Inf at different positions fails. `precision` names the
    arithmetic when the dtype does not say it (e.g. 'tf32' for a float32 output of a tf32 matmul).
    """
    import torch

    for label, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not is_nonnegative_number(value):
            raise ValueError(f"gpu_assert_close: {label}={value!r} must be a number >= 0")
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            raise AssertionError(f"gpu_assert_close: {name} has {plural(len(actual), 'item')}, "
                                 f"expected {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol=rtol, atol=atol, precision=precision, name=f"{name}[{i}]")
        return
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        raise AssertionError(f"gpu_assert_close: {name} must be tensors, got {type(actual).__name__} "
                             f"and {type(expected).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(f"gpu_assert_close: {name} shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if expected.dtype not in (actual.dtype, torch.float64):
        raise AssertionError(f"gpu_assert_close: {name} dtype {actual.dtype} != expected {expected.dtype} "
                             "(expected may only differ by being the float64 reference)")
    if actual.device != expected.device:
        raise AssertionError(f"gpu_assert_close: {name} is on {actual.device} but expected is on {expected.device}; "
                             "compute the reference on the same device")
    precision = precision or str(actual.dtype).removeprefix("torch.")
    if rtol is None or atol is None:
        exact = not (actual.is_floating_point() or actual.is_complex())  # integers and bools: equality
        default_rtol, default_atol = (0.0, 0.0) if exact else default_tolerance(precision)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol

    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    _check_nonfinite(a, e, name)
    finite = torch.isfinite(e)
    diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    allowed = atol + rtol * e.abs()
    excess = torch.where(finite, diff - allowed, torch.full_like(a, -1.0))
    bad = int((excess > 0).sum())
    if bad == 0:
        return
    worst = int(torch.argmax(excess).item())
    where = _fmt(_index(worst, a.shape))
    flat_a, flat_e = a.reshape(-1), e.reshape(-1)
    raise AssertionError(
        f"gpu_assert_close: {name}: {bad} of {a.numel()} elements ({100 * bad / a.numel():.3g}%) exceed the "
        f"{precision} tolerance (rtol={rtol:g}, atol={atol:g})\n"
        f"  worst at index {where}: actual {flat_a[worst].item():.6g}, expected {flat_e[worst].item():.6g}, "
        f"|diff| {diff.reshape(-1)[worst].item():.3g} > allowed {allowed.reshape(-1)[worst].item():.3g}\n"
        f"  max |diff| {diff.max().item():.3g}, max |expected| {e.abs().max().item():.3g}")


def _check_nonfinite(a, e, name: str) -> None:
    """NaN where and only where the reference has NaN; +-Inf exactly where the reference has it."""
    import torch

    nan_mismatch = torch.isnan(a) != torch.isnan(e)
    inf_mismatch = (torch.isinf(a) | torch.isinf(e)) & ~(a == e) & ~torch.isnan(a) & ~torch.isnan(e)
    for mask, what in ((nan_mismatch, "NaN"), (inf_mismatch, "Inf")):
        count = int(mask.sum())
        if count:
            positions = torch.nonzero(mask)[:_SHOW].tolist()
            flat_a, flat_e = a[mask][:_SHOW].tolist(), e[mask][:_SHOW].tolist()
            shown = "; ".join(f"{_fmt(tuple(p))}: actual {x:g}, expected {y:g}"
                              for p, x, y in zip(positions, flat_a, flat_e))
            raise AssertionError(f"gpu_assert_close: {name}: {what} positions differ at "
                                 f"{plural(count, 'element')}: {shown}")
