"""Plain values for YAML and JSON: records may hold numpy scalars, tuples or str subclasses (torch's
version string), which `yaml.safe_dump` and `json.dumps` refuse or misrepresent."""
from __future__ import annotations

import math
from typing import Any, Callable


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def plain(value: Any, float_value: Callable[[float], Any] = finite_or_none, coerce: bool = False) -> Any:
    """A copy of `value` made of None, bool, str, int, float, list and dict only: tuples become lists,
    dict keys strings, numpy scalars their Python value, floats pass through `float_value`; anything
    else becomes an int or a float where `coerce` allows, else its str."""
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float_value(value)
    if isinstance(value, (list, tuple)):
        return [plain(v, float_value, coerce) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v, float_value, coerce) for k, v in value.items()}
    item = getattr(value, "item", None)  # numpy scalars and friends
    if callable(item):
        try:
            return plain(item(), float_value, coerce)
        except Exception:  # noqa: BLE001 - not a scalar after all: fall through
            pass
    if coerce:
        for conv in (int, float):
            try:
                return plain(conv(value), float_value, coerce)
            except (TypeError, ValueError):
                continue
    return str(value)
