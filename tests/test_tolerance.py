"""gpu_assert_close: per-precision defaults, NaN/Inf positions, mismatches, and a message that names the worst element."""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from pytest_gpuperf.measure.tolerance import TOLERANCES, assert_close  # noqa: E402


def test_bfloat16_rounding_of_the_reference_passes_by_default() -> None:
    ref = torch.randn(1000, dtype=torch.float64)
    assert_close(ref.to(torch.bfloat16), ref)
    assert_close(ref.to(torch.float16), ref)
    assert_close(ref.to(torch.float32), ref)


def test_the_failure_names_the_worst_element_its_index_values_and_allowed_error() -> None:
    ref = torch.zeros(4, 5, dtype=torch.float64) + 1.0
    out = ref.to(torch.float32).clone()
    out[2, 3] = 1.5
    out[0, 0] = 1.01
    with pytest.raises(AssertionError) as info:
        assert_close(out, ref)
    text = str(info.value)
    assert "2 of 20 elements" in text and "float32 tolerance (rtol=1.3e-06, atol=1e-05)" in text
    assert "worst at index (2, 3): actual 1.5, expected 1, |diff| 0.5 > allowed 1.13e-05" in text


@pytest.mark.parametrize("kwargs", [{"rtol": -1}, {"atol": -0.5}, {"rtol": "tight"}, {"rtol": "1e-3"}])
def test_negative_or_non_numeric_tolerances_are_refused(kwargs) -> None:
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="must be a number >= 0"):
        assert_close(x, x, **kwargs)


def test_numpy_and_tensor_scalar_tolerances_are_numbers() -> None:
    import numpy as np

    x = torch.zeros(3)
    assert_close(x, x, rtol=np.float32(1e-3), atol=np.int64(0))
    assert_close(x, x, rtol=torch.tensor(1e-3), atol=0)


def test_explicit_tolerances_and_named_precisions() -> None:
    ref = torch.ones(8, dtype=torch.float64)
    out = (ref * 1.001).float()
    with pytest.raises(AssertionError):
        assert_close(out, ref)
    assert_close(out, ref, precision="tf32")  # 2e-3 relative
    assert_close(out, ref, rtol=0.01, atol=0)
    assert TOLERANCES["bfloat16"] == (1.6e-2, 1e-5)
    assert_close(torch.arange(5), torch.arange(5))  # integers compare exactly
    with pytest.raises(AssertionError, match="1 of 5 elements"):
        assert_close(torch.arange(5), torch.arange(5) + (torch.arange(5) == 2))
    with pytest.raises(ValueError, match="no default tolerance for 'int8x'"):
        assert_close(out, ref, precision="int8x")


@pytest.mark.parametrize("planted, expected_text", [
    (float("nan"), "NaN positions differ at 1 element: (3): actual nan, expected 4"),
    (float("inf"), "Inf positions differ at 1 element: (3): actual inf, expected 4"),
])
def test_nan_and_inf_must_sit_where_the_reference_has_them(planted: float, expected_text: str) -> None:
    ref = torch.arange(8, dtype=torch.float64) + 1
    out = ref.float().clone()
    out[3] = planted
    with pytest.raises(AssertionError, match=re.escape(expected_text)):
        assert_close(out, ref)


def test_matching_nan_and_signed_inf_pass_and_a_flipped_sign_fails() -> None:
    ref = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], dtype=torch.float64)
    assert_close(ref.float(), ref)
    flipped = ref.float().clone()
    flipped[1] = -float("inf")
    with pytest.raises(AssertionError, match="Inf positions differ"):
        assert_close(flipped, ref)


def test_shape_dtype_and_device_mismatches_are_clear() -> None:
    a = torch.ones(2, 3)
    with pytest.raises(AssertionError, match=r"shape \(2, 3\) != expected \(3, 2\)"):
        assert_close(a, torch.ones(3, 2))
    with pytest.raises(AssertionError, match="dtype torch.float32 != expected torch.float16"):
        assert_close(a, torch.ones(2, 3, dtype=torch.float16))
    with pytest.raises(AssertionError, match="must be tensors"):
        assert_close(a, [[1.0, 1.0, 1.0]] * 2)


def test_sequences_are_compared_item_by_item_with_names() -> None:
    ref = [torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]
    assert_close([r.float() for r in ref], ref)
    with pytest.raises(AssertionError, match=r"output\[1\]: 1 of 3 elements"):
        assert_close([ref[0].float(), torch.tensor([0.0, 1.0, 0.0])], ref)
    with pytest.raises(AssertionError, match="has 1 item, expected 2"):
        assert_close([ref[0].float()], ref)
