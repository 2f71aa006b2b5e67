"""Whether each of PyTorch's CPU quantized engines keeps the fixed-point model of
docs/standard.md §6 on this machine: products of int8 integers summed exactly (int32), the
bias at s_in * s_w, each output requantised to its scale, rounded to nearest, saturated.

Two convolutions per engine, each against the model computed exactly (float64 holds every
sum here): every input 127 and every weight -128 over 8 channels (the exact output is -127;
an engine that saturates each pair of products at int16, as AVX2's VPMADDUBSW does without
VNNI, gives 0), and full-range random integers (how many outputs differ, and how many of
those lie away from a rounding tie, where no rounding of the ratio excuses them). It
prints; it asserts nothing. Run: python benchmarks/torch_quantized_engines.py
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.ao.nn.quantized.functional as qF

ZERO_POINT = 128  # an int8 map as the engines' unsigned one: q + 128


def model(q_x, q_w, q_b, ratio: float, padding: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's output integers and the unrounded values (float64: every sum exact)."""
    sums = torch.nn.functional.conv2d(q_x.double(), q_w.double(), None, padding=padding)
    values = (sums + q_b.double()[None, :, None, None]) * ratio
    return torch.round(values).clamp(-128, 127), values


def engine(name: str, q_x, q_w, q_b, s_in, s_w, s_out, padding: int) -> torch.Tensor:
    """The engine's output integers for the same problem."""
    torch.backends.quantized.engine = name
    x = torch._make_per_tensor_quantized_tensor((q_x + ZERO_POINT).to(torch.uint8), s_in, 128)
    w = torch._make_per_tensor_quantized_tensor(q_w.to(torch.int8), s_w, 0)
    bias = (q_b.double() * s_in * s_w).float()
    out = qF.conv2d(x, w, bias, padding=padding, scale=s_out, zero_point=ZERO_POINT)
    return out.int_repr().double() - ZERO_POINT


def main() -> None:
    warnings.filterwarnings("ignore")  # _make_per_tensor_quantized_tensor's notices
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    rng = np.random.default_rng(1)
    random = (
        torch.from_numpy(rng.integers(-128, 128, (2, 32, 8, 8))),
        torch.from_numpy(rng.integers(-128, 128, (16, 32, 3, 3))),
        torch.from_numpy(rng.integers(-2000, 2000, 16)),
    )
    s_in, s_w = 0.37, 0.0071
    s_out = 0.4 * 32 * 9 * 128 * 128 * s_in * s_w / 127 / 6
    for name in torch.backends.quantized.supported_engines:
        if name == "none":
            continue
        pairs = (torch.full((1, 8, 3, 3), 127), torch.full((1, 8, 1, 1), -128), torch.zeros(1))
        want, _ = model(*pairs, 1.0 / (127 * 128 * 8 / 127.0), 0)
        got = engine(name, *pairs, 1.0, 1.0, 127 * 128 * 8 / 127.0, 0)
        want_r, values = model(*random, s_in * s_w / s_out, 1)
        got_r = engine(name, *random, s_in, s_w, s_out, 1)
        differ = got_r != want_r
        tie = ((values - values.floor()) - 0.5).abs() < 1e-3
        print(
            f"{name:8s} 127 x -128 over 8 channels: model {int(want.flatten()[0])}, engine "
            f"{int(got.flatten()[0])}; random: {int(differ.sum())} of {differ.numel()} outputs "
            f"differ (largest by {int((got_r - want_r).abs().max())}), "
            f"{int((differ & ~tie).sum())} away from a tie"
        )


if __name__ == "__main__":
    main()
