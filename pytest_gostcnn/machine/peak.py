"""The theoretical peak of one computing cell in MAC/s (sections 3.9, 9.5), with its factors.

ОРП divides real performance by this peak. ``--gost-peak`` gives it; otherwise it is
estimated from the device and labelled "estimated" wherever it is shown. Every factor is
kept, so a reader of the report can check the product.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass

# The kernel's maximum clock of CPU 0, in kHz, where cpufreq exposes it.
CPUFREQ_MAX = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
SI_PREFIXES = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


@dataclass(frozen=True)
class Peak:
    """MAC/s = units x clock (Hz) x MACs per cycle per unit, unless given outright."""

    macs_per_second: float
    source: str  # "given (--gost-peak)" or "estimated: ..."
    units: int | None = None
    unit_kind: str | None = None
    clock_hz: float | None = None
    macs_per_cycle_per_unit: float | None = None

    @property
    def estimated(self) -> bool:
        return self.source.startswith("estimated")

    def describe(self) -> str:
        text = f"{si(self.macs_per_second)}MAC/s"
        if self.units is not None:
            text += (
                f" = {self.units} {self.unit_kind} x {self.clock_hz / 1e9:.3g} GHz"
                f" x {self.macs_per_cycle_per_unit:g} MAC/cycle"
            )
        return f"{text} ({self.source})"

    def as_dict(self) -> dict:
        return {**asdict(self), "estimated": self.estimated}

    @classmethod
    def from_dict(cls, data: dict) -> Peak:
        """The peak ``as_dict`` wrote (its derived ``estimated`` left out)."""
        return cls(**{key: value for key, value in data.items() if key != "estimated"})


def si(value: float) -> str:
    """``value`` with an SI prefix and a trailing space: 1.23e12 -> "1.23 T"."""
    for prefix in ("E", "P", "T", "G", "M", "k"):
        if abs(value) >= SI_PREFIXES[prefix]:
            return f"{value / SI_PREFIXES[prefix]:.3g} {prefix}"
    return f"{value:.3g} "


MIN_PEAK = 1.0  # MAC/s: any peak, given or estimated, is at least this
MAX_PEAK = 1e20  # MAC/s: 100 EMAC/s, a hundred times an exaflop machine's whole peak


def parse_peak(text: str) -> Peak:
    """``--gost-peak``: MAC/s as a number, optionally with an SI prefix (``2.5T``, ``4e11``)."""
    number = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    match = re.fullmatch(rf"\s*({number})\s*([A-Za-z]?)\s*(MAC/s)?\s*", text)
    if match and match.group(2) not in SI_PREFIXES:
        raise ValueError(
            f"--gost-peak={text}: no SI prefix {match.group(2)!r}; the prefixes are "
            f"{', '.join(p for p in SI_PREFIXES if p)} (case matters: 2.5T, 100G)"
        )
    value = float(match.group(1)) * SI_PREFIXES[match.group(2)] if match else math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"--gost-peak={text}: the peak must be a positive number of MAC/s, e.g. 2.5e12 or 2.5T"
        )
    if value < MIN_PEAK:  # no machine is that slow; and ОРП over such a peak overflows
        raise ValueError(f"--gost-peak={text}: a peak below 1 MAC/s; give MAC/s, e.g. 2.5T")
    if value > MAX_PEAK:  # no computing cell is that fast: a slip of the exponent
        raise ValueError(f"--gost-peak={text}: a peak above 100 EMAC/s; give MAC/s, e.g. 2.5T")
    return Peak(value, "given (--gost-peak)")


# FP32 multiply-accumulates per cycle per core, by the widest FMA the flags announce. Two
# FMA pipes is the common case for server cores with AVX2 and for Intel's AVX-512 parts;
# AMD's AVX-512 (Zen 4) runs 512-bit FMAs on two 256-bit pipes, so no gain over AVX2.
_CPU_FP32_MACS = (
    ("GenuineIntel", "avx512f", 32.0, "2 AVX-512 FMA pipes x 16 fp32 lanes"),
    ("", "avx512f", 16.0, "AVX-512 on two 256-bit FMA pipes x 8 fp32 lanes"),
    ("", "fma", 16.0, "2 AVX2 FMA pipes x 8 fp32 lanes"),
    ("", "avx", 8.0, "AVX multiply + add, 8 fp32 lanes"),
    ("", "sse2", 4.0, "SSE multiply + add, 4 fp32 lanes"),
)
# Integer multiply-accumulates per cycle per core (docs/standard.md §6, integer inference),
# by the widest integer dot product the flags announce: VNNI's VPDPBUSD / VPDPWSSD does a
# MAC per lane; without VNNI a MAC takes two instructions (VPMADDUBSW or VPMADDWD, then
# VPMADDWD or VPADDD). Two pipes, as for FP32; AMD's AVX-512 on two 256-bit pipes.
_CPU_INT_MACS = {
    "int8": (
        ("GenuineIntel", "avx512_vnni", 128.0, "2 AVX-512 VNNI pipes x 64 int8 MACs"),
        ("", "avx512_vnni", 64.0, "AVX-512 VNNI on two 256-bit pipes x 32 int8 MACs"),
        ("", "avx_vnni", 64.0, "2 AVX-VNNI pipes x 32 int8 MACs"),
        ("GenuineIntel", "avx512bw", 64.0, "2 AVX-512 pipes x 64 int8 lanes / 2 instructions"),
        ("", "avx2", 32.0, "2 AVX2 pipes x 32 int8 lanes / 2 instructions"),
    ),
    "int16": (
        ("GenuineIntel", "avx512_vnni", 64.0, "2 AVX-512 VNNI pipes x 32 int16 MACs"),
        ("", "avx512_vnni", 32.0, "AVX-512 VNNI on two 256-bit pipes x 16 int16 MACs"),
        ("", "avx_vnni", 32.0, "2 AVX-VNNI pipes x 16 int16 MACs"),
        ("GenuineIntel", "avx512bw", 32.0, "2 AVX-512 pipes x 32 int16 lanes / 2 instructions"),
        ("", "avx2", 16.0, "2 AVX2 pipes x 16 int16 lanes / 2 instructions"),
    ),
}
# float16 and bfloat16 under the standard's model (float32 sums, docs/standard.md §6): AMX
# tiles where the CPU has them for the type (a 16x16x32 tile product every 16 cycles, Intel's
# 1024 BF16 operations per cycle), AVX-512 BF16's VDPBF16PS (two products per float32 lane),
# else the float32 FMAs on values converted exactly (F16C, or a shift for bfloat16): the
# float16 FMAs of AVX-512 FP16 sum in float16, which the model does not allow.
_CONVERTED = tuple(
    (vendor, flag, macs, f"{why}, on values converted to float32")
    for vendor, flag, macs, why in _CPU_FP32_MACS
)
_CPU_HALF_MACS = {
    "float16": (
        ("GenuineIntel", "amx_fp16", 512.0, "AMX-FP16 tiles: 16x16x32 MACs per 16 cycles"),
        *_CONVERTED,
    ),
    "bfloat16": (
        ("GenuineIntel", "amx_bf16", 512.0, "AMX-BF16 tiles: 16x16x32 MACs per 16 cycles"),
        ("GenuineIntel", "avx512_bf16", 64.0, "2 AVX-512 BF16 pipes x 32 bf16 MACs"),
        ("", "avx512_bf16", 32.0, "AVX-512 BF16 on two 256-bit pipes x 16 bf16 MACs"),
        *_CONVERTED,
    ),
}
_CPU_MACS = {
    "float32": _CPU_FP32_MACS,
    "tf32": _CPU_FP32_MACS,
    **_CPU_HALF_MACS,
    **_CPU_INT_MACS,
}


def cpu_peak(dtype: str, cpuinfo: str | None = None, cores: int | None = None) -> Peak | None:
    """Estimate a CPU cell's peak in ``dtype`` (float32; the half types' or the integer
    units' where the CPU has them) from /proc/cpuinfo."""
    if dtype not in _CPU_MACS:
        return None
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    fields = _first_processor(cpuinfo)
    flags = set(fields.get("flags", "").split())
    vendor = fields.get("vendor_id", "")
    clock, whence = _max_clock_hz(cpuinfo)
    if clock is None:
        return None
    cores = cores or physical_cores(cpuinfo, os.sched_getaffinity(0))
    for vendor_match, flag, macs, why in _CPU_MACS[dtype]:
        if flag in flags and vendor.startswith(vendor_match):
            return Peak(
                macs_per_second=cores * clock * macs,
                source=f"estimated: {fields.get('model name', 'CPU')}, {why}{whence}",
                units=cores,
                unit_kind="cores",
                clock_hz=clock,
                macs_per_cycle_per_unit=macs,
            )
    return None


def physical_cores(cpuinfo: str, allowed: set[int]) -> int:
    """The physical cores among the logical CPUs ``allowed``: SMT siblings share FMA units.

    Counts distinct (physical id, core id) pairs; without them, every allowed CPU counts.
    """
    cores = set()
    for block in cpuinfo.split("\n\n"):
        fields = _first_processor(block)
        if "processor" not in fields or int(fields["processor"]) not in allowed:
            continue
        if "core id" not in fields:
            return len(allowed)
        cores.add((fields.get("physical id", "0"), fields["core id"]))
    return len(cores) or len(allowed)


def _first_processor(cpuinfo: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _max_clock_hz(cpuinfo: str) -> tuple[float | None, str]:
    """The highest clock the kernel reports: cpufreq's maximum, else /proc/cpuinfo's MHz,
    which is not a maximum (a virtual machine's is often its host's base clock, below what
    its cores reach), and words that say so for the estimate's source."""
    try:
        with open(CPUFREQ_MAX, encoding="utf-8") as f:
            return float(f.read()) * 1e3, ""
    except (OSError, ValueError):
        pass
    speeds = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, flags=re.M)]
    if not speeds:
        return None, ""
    return max(speeds) * 1e6, "; the clock /proc/cpuinfo's, the kernel giving no maximum"


# GPUs: dense (non-sparse) multiply-accumulates per SM per cycle, by data type. -----------
# float32 runs on the CUDA cores (FMA); tf32, float16 and bfloat16 (float32 accumulation) on
# the tensor cores. Each rate is a vendor's dense FLOP/s figure / 2 / (SMs x the clock that
# figure uses); checking the arithmetic:
#   A100 (SXM4 and PCIe, 108 SMs, 1.41 GHz; NVIDIA A100 datasheet, "Tensor Core GPU
#   Architecture" whitepaper table 1): FP32 19.5 TFLOPS -> 64; TF32 156 -> 512;
#   FP16 / BF16 312 -> 1024.
#   H100 SXM5 (132 SMs; NVIDIA H100 datasheet, Hopper whitepaper table 3): FP32 66.9 TFLOPS
#   at 1.98 GHz -> 128; TF32 494.7 dense (989.4 with sparsity) at the 1.83 GHz tensor-core
#   boost clock -> 1024; FP16 / BF16 989.4 dense at 1.83 GHz -> 2048.
#   H100 PCIe (114 SMs): FP32 51 TFLOPS at 1.755 GHz -> 128; FP16 756 dense at the 1.62 GHz
#   tensor-core boost clock -> 2048.
#   H200 SXM (132 SMs, the H100 SXM5's compute with more memory; NVIDIA H200 datasheet):
#   the H100 SXM5's figures.
_HOPPER = {"float32": 128.0, "tf32": 1024.0, "float16": 2048.0, "bfloat16": 2048.0}
_AMPERE = {"float32": 64.0, "tf32": 512.0, "float16": 1024.0, "bfloat16": 1024.0}
_TENSOR_DTYPES = ("tf32", "float16", "bfloat16")


@dataclass(frozen=True)
class _GpuModel:
    """A GPU the datasheet figures above cover: its rates and the clocks they use."""

    pattern: str  # a regular expression the device name contains, e.g. "H100 PCIe"
    rates: dict[str, float]
    cuda_core_clock_hz: float
    tensor_clock_hz: float


# Device names as the driver reports them: "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H100 PCIe",
# "NVIDIA H200", "NVIDIA A100-SXM4-80GB". The NVL boards run other clocks: they fall back to
# their architecture.
_GPU_MODELS = (
    _GpuModel(r"H100 PCIe", _HOPPER, 1.755e9, 1.62e9),
    _GpuModel(r"H100 (80GB HBM3|SXM)", _HOPPER, 1.98e9, 1.83e9),
    _GpuModel(r"H200(?! NVL)", _HOPPER, 1.98e9, 1.83e9),
    _GpuModel(r"A100", _AMPERE, 1.41e9, 1.41e9),
)
# Other GPUs of the same architectures (compute capability): the rates at the device's clock.
_GPU_ARCHITECTURES = {(9, 0): ("Hopper", _HOPPER), (8, 0): ("Ampere GA100", _AMPERE)}


def gpu_peak(
    dtype: str,
    name: str,
    sm_count: int,
    clock_hz: float | None,
    capability: tuple[int, int] | None = None,
) -> Peak | None:
    """Estimate a GPU's dense peak in ``dtype`` from its name, SM count and clock.

    A model of the table above (A100, H100, H200) takes its rate per SM per cycle and the
    clock its datasheet figure uses, so the estimate is that figure for the full SM count
    (fewer SMs, e.g. a MIG slice, scale it down). Another GPU of a known architecture
    (``capability`` 8.0 or 9.0) takes the architecture's rate at ``clock_hz``, the
    device's maximum clock: an upper estimate. Otherwise (such a GPU of unknown clock
    too), and for integer types, None.
    """
    model = next((m for m in _GPU_MODELS if re.search(m.pattern, name, re.IGNORECASE)), None)
    if model is not None:
        rates = model.rates
        tensor = dtype in _TENSOR_DTYPES
        clock = model.tensor_clock_hz if tensor else model.cuda_core_clock_hz
        where = (
            f"{name}, datasheet dense rate at its "
            f"{'tensor-core' if tensor else 'CUDA-core'} boost clock"
        )
    elif capability in _GPU_ARCHITECTURES and clock_hz:
        architecture, rates = _GPU_ARCHITECTURES[capability]
        clock = clock_hz
        where = f"{name}, {architecture} dense rate at the device's maximum clock"
    else:
        return None
    if dtype not in rates:
        return None
    return Peak(
        macs_per_second=sm_count * clock * rates[dtype],
        source=f"estimated: {where}",
        units=sm_count,
        unit_kind="SMs",
        clock_hz=clock,
        macs_per_cycle_per_unit=rates[dtype],
    )
