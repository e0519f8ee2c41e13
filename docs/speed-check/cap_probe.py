"""How the power cap brings a call's SM clock down: NVML read every 50 ms while the call runs back
to back for 1.5 s from idle (the timer's longer warm-up, measure/cuda_timer.py), and when each
settling rule would have ended that warm-up, and the power drawn as a share of the limit
(docs/measurement.md, "Power cap").

    python docs/speed-check/cap_probe.py
"""
import time

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.device import power_share, read_clocks

STEP_S, LENGTH_S, IDLE_S = 0.05, 1.5, 2.0


def matmul(n):
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return lambda: a @ b


def attention_bwd(d, causal):
    q, k, v = (torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16)

    def call():
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)
    return call


def settled_at(readings, reads, mhz, min_s=0.25):
    for i in range(len(readings)):
        t = readings[i][0]
        last = readings[max(0, i - reads + 1):i + 1]
        clocks = [c for _, c, limited in last if limited]
        if t >= min_s and len(clocks) == reads and max(clocks) - min(clocks) <= mhz:
            return t
    return None


CASES = {"matmul bf16 4096": matmul(4096), "matmul bf16 8192": matmul(8192),
         "sdpa bwd D128 full": attention_bwd(128, False), "sdpa bwd D128 causal": attention_bwd(128, True),
         "sdpa bwd D64 full": attention_bwd(64, False)}
for name, fn in CASES.items():
    for repeat in range(2):
        fn(); torch.cuda.synchronize()
        time.sleep(IDLE_S)
        readings, shares, calls, start = [], [], 0, time.perf_counter()
        next_read = start + STEP_S
        while time.perf_counter() - start < LENGTH_S:
            fn()
            calls += 1
            if calls % 64 == 0:
                torch.cuda.synchronize()
            if time.perf_counter() >= next_read:
                s = read_clocks(0)
                readings.append((round(time.perf_counter() - start, 3), s.sm_clock_mhz, s.power_limited))
                shares.append(power_share(0))
                next_read += STEP_S
        torch.cuda.synchronize()
        rules = {f"{r}x{m}": settled_at(readings, r, m) for r in (3, 4) for m in (30, 45, 60, 90)}
        print(f"{name} #{repeat}: {calls} calls; clocks " + " ".join(f"{c}{'' if lim else '*'}" for _, c, lim in readings))
        print("   power / limit: " + " ".join("-" if p is None else f"{p:.2f}" for p in shares))
        print("   settled at (reads x MHz): " + ", ".join(f"{k} {v}" for k, v in rules.items()))
