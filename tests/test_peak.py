"""The theoretical peak of a cell: given (--gost-peak) or estimated, with every factor."""

import pytest

from pytest_gostcnn.machine.peak import cpu_peak, gpu_peak, parse_peak, physical_cores, si

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
model name\t: Test CPU
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse sse2 {flags}

processor\t: 1
vendor_id\t: {vendor}
model name\t: Test CPU
cpu MHz\t\t: 3000.000
flags\t\t: fpu sse sse2 {flags}
"""


@pytest.mark.parametrize(
    ("vendor", "flags", "macs_per_cycle"),
    [
        ("GenuineIntel", "avx avx2 fma avx512f", 32.0),
        ("AuthenticAMD", "avx avx2 fma avx512f", 16.0),
        ("AuthenticAMD", "avx avx2 fma", 16.0),
        ("GenuineIntel", "avx", 8.0),
        ("GenuineIntel", "", 4.0),
    ],
)
def test_cpu_peak_is_cores_times_clock_times_fma_lanes(
    monkeypatch, tmp_path, vendor, flags, macs_per_cycle
):
    monkeypatch.setattr("pytest_gostcnn.machine.peak.CPUFREQ_MAX", str(tmp_path / "absent"))
    cpuinfo = CPUINFO.format(vendor=vendor, flags=flags)
    peak = cpu_peak("float32", cpuinfo=cpuinfo, cores=4)
    assert peak.macs_per_cycle_per_unit == macs_per_cycle
    assert peak.units == 4
    # Without cpufreq, the highest clock /proc/cpuinfo reports, which the source says.
    assert peak.clock_hz == 3.0e9
    assert "the clock /proc/cpuinfo's, the kernel giving no maximum" in peak.source
    assert peak.macs_per_second == pytest.approx(4 * 3.0e9 * macs_per_cycle)
    assert peak.estimated and "estimated" in peak.describe()


def test_cpufreq_maximum_clock_wins_over_the_current_clock(monkeypatch, tmp_path):
    (tmp_path / "max").write_text("3500000\n")  # kHz
    monkeypatch.setattr("pytest_gostcnn.machine.peak.CPUFREQ_MAX", str(tmp_path / "max"))
    peak = cpu_peak("float32", cpuinfo=CPUINFO.format(vendor="x", flags="fma"), cores=2)
    assert peak.clock_hz == 3.5e9 and "/proc/cpuinfo" not in peak.source


@pytest.mark.parametrize(
    ("dtype", "vendor", "flags", "macs_per_cycle"),
    [
        ("int8", "GenuineIntel", "avx2 avx512f avx512bw avx512_vnni", 128.0),
        ("int8", "AuthenticAMD", "avx2 avx512f avx512bw avx512_vnni", 64.0),
        ("int8", "GenuineIntel", "avx2 avx_vnni", 64.0),
        ("int8", "GenuineIntel", "avx2 avx512f avx512bw", 64.0),
        ("int8", "AuthenticAMD", "avx2 fma", 32.0),
        ("int16", "GenuineIntel", "avx2 avx512f avx512bw avx512_vnni", 64.0),
        ("int16", "AuthenticAMD", "avx2 fma", 16.0),
    ],
)
def test_cpu_integer_peak_follows_the_widest_integer_dot_product(
    monkeypatch, tmp_path, dtype, vendor, flags, macs_per_cycle
):
    # docs/benchmarking.md: int8 and int16 are timed against the integer units' peak.
    monkeypatch.setattr("pytest_gostcnn.machine.peak.CPUFREQ_MAX", str(tmp_path / "absent"))
    peak = cpu_peak(dtype, cpuinfo=CPUINFO.format(vendor=vendor, flags=flags), cores=2)
    assert peak.macs_per_cycle_per_unit == macs_per_cycle
    assert peak.estimated and dtype in peak.source


def test_no_cpu_integer_estimate_without_avx2():
    assert cpu_peak("int8", cpuinfo=CPUINFO.format(vendor="x", flags="avx"), cores=1) is None


@pytest.mark.parametrize(
    ("dtype", "vendor", "flags", "macs_per_cycle", "unit"),
    [
        ("bfloat16", "GenuineIntel", "fma avx512f avx512_bf16 amx_bf16", 512.0, "AMX-BF16"),
        ("bfloat16", "GenuineIntel", "fma avx512f avx512_bf16", 64.0, "AVX-512 BF16"),
        ("bfloat16", "AuthenticAMD", "fma avx512f avx512_bf16", 32.0, "AVX-512 BF16"),
        ("bfloat16", "AuthenticAMD", "avx2 fma", 16.0, "converted to float32"),
        ("float16", "GenuineIntel", "fma avx512f avx512_fp16 amx_fp16", 512.0, "AMX-FP16"),
        # AVX-512 FP16's FMAs sum in float16: the float32 FMAs on converted values count.
        ("float16", "GenuineIntel", "fma avx512f avx512_fp16 amx_bf16", 32.0, "converted"),
        ("float16", "AuthenticAMD", "avx2 fma f16c", 16.0, "converted to float32"),
    ],
)
def test_cpu_half_type_peak_counts_the_units_that_sum_in_float32(
    monkeypatch, tmp_path, dtype, vendor, flags, macs_per_cycle, unit
):
    monkeypatch.setattr("pytest_gostcnn.machine.peak.CPUFREQ_MAX", str(tmp_path / "absent"))
    peak = cpu_peak(dtype, cpuinfo=CPUINFO.format(vendor=vendor, flags=flags), cores=2)
    assert peak.macs_per_cycle_per_unit == macs_per_cycle
    assert unit in peak.source and peak.estimated


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2.5e12", 2.5e12),
        ("2.5T", 2.5e12),
        ("400 G", 4e11),
        ("1.5TMAC/s", 1.5e12),
        ("5E", 5e18),  # exa, not an exponent without digits
        ("2E3k", 2e6),
        (".5P", 5e14),
    ],
)
def test_given_peak_accepts_numbers_and_si_prefixes(text, value):
    peak = parse_peak(text)
    assert peak.macs_per_second == pytest.approx(value)
    assert not peak.estimated


@pytest.mark.parametrize("text", ["0", "-3e12", "abc", "inf", "nan", "1e400", "E"])
def test_a_peak_that_is_not_a_positive_number_is_rejected(text):
    with pytest.raises(ValueError, match=r"--gost-peak=.*positive number of MAC/s"):
        parse_peak(text)


@pytest.mark.parametrize(("text", "letter"), [("100g", "g"), ("2.5X", "X"), ("1e", "e")])
def test_a_peak_with_a_letter_that_is_no_si_prefix_is_rejected_naming_it(text, letter):
    with pytest.raises(ValueError, match=rf"--gost-peak={text}: no SI prefix '{letter}'; "):
        parse_peak(text)


def test_a_peak_above_100_emac_per_second_is_rejected():
    # No computing cell is that fast: 1e30 is a slip of the exponent, not a machine.
    assert parse_peak("100E").macs_per_second == 1e20
    with pytest.raises(ValueError, match=r"--gost-peak=1e30: a peak above 100 EMAC/s"):
        parse_peak("1e30")


def test_a_peak_below_one_mac_per_second_is_rejected():
    # No cell is that slow, and ОРП over such a peak would overflow to infinity.
    with pytest.raises(ValueError, match=r"--gost-peak=1e-300: a peak below 1 MAC/s"):
        parse_peak("1e-300")


def test_si_prefixes():
    assert si(1.23e12) == "1.23 T"
    assert si(4.5e9) == "4.5 G"
    assert si(12.0) == "12 "


# GPUs: made-up device properties, checked against the vendors' dense TFLOPS / 2.


@pytest.mark.parametrize(
    ("dtype", "name", "sms", "dense_tflops"),
    [
        ("float16", "NVIDIA H100 80GB HBM3", 132, 989.4),
        ("bfloat16", "NVIDIA H200", 132, 989.4),
        ("tf32", "NVIDIA H200", 132, 494.7),
        ("float32", "NVIDIA H100 80GB HBM3", 132, 66.9),
        ("float16", "NVIDIA H100 PCIe", 114, 756.0),
        ("float32", "NVIDIA A100-SXM4-80GB", 108, 19.5),
        ("tf32", "NVIDIA A100 80GB PCIe", 108, 156.0),
        ("float16", "NVIDIA A100-SXM4-40GB", 108, 312.0),
    ],
)
def test_gpu_peak_of_a_known_model_is_its_datasheet_dense_figure(dtype, name, sms, dense_tflops):
    # The device's own clock (its maximum) is not used: the datasheet figures use their
    # own boost clocks (1.83 GHz for the H100 SXM5's tensor cores, below its 1.98 GHz).
    peak = gpu_peak(dtype, name, sms, clock_hz=1.98e9)
    assert peak.macs_per_second == pytest.approx(dense_tflops * 1e12 / 2, rel=2e-3)
    assert peak.units == sms and peak.unit_kind == "SMs"
    assert peak.estimated and "datasheet" in peak.source


def test_gpu_peak_scales_with_the_sms_a_cell_has():
    # A MIG slice of an H100 with 16 of its 132 SMs.
    whole = gpu_peak("float16", "NVIDIA H100 80GB HBM3", 132, 1.98e9)
    slice_ = gpu_peak("float16", "NVIDIA H100 80GB HBM3 MIG 2g.20gb", 16, 1.98e9)
    assert slice_.macs_per_second == pytest.approx(whole.macs_per_second * 16 / 132)


def test_another_gpu_of_a_known_architecture_uses_its_own_clock():
    peak = gpu_peak("float16", "NVIDIA H100 NVL", 132, 1.785e9, capability=(9, 0))
    assert peak.macs_per_second == pytest.approx(132 * 1.785e9 * 2048)
    assert "maximum clock" in peak.source and peak.estimated


@pytest.mark.parametrize(
    ("dtype", "name", "capability"),
    [("float16", "Tesla T4", (7, 5)), ("float16", "Some GPU", None), ("int8", "NVIDIA H200", None)],
)
def test_gpu_peak_is_unknown_rather_than_guessed(dtype, name, capability):
    assert gpu_peak(dtype, name, 40, 1.5e9, capability=capability) is None


def test_a_gpu_of_a_known_architecture_but_unknown_clock_has_no_estimate():
    # PyTorch's device properties may not report the clock; a datasheet model needs none.
    assert gpu_peak("float16", "NVIDIA H100 NVL", 132, None, capability=(9, 0)) is None
    assert gpu_peak("float16", "NVIDIA H200", 132, None, capability=(9, 0)) is not None


def test_smt_siblings_count_as_one_core():
    blocks = [f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu % 2}\n" for cpu in range(4)]
    cpuinfo = "\n".join(blocks)
    # CPUs 0 and 2 are siblings on core 0; 1 and 3 on core 1.
    assert physical_cores(cpuinfo, {0, 1, 2, 3}) == 2
    assert physical_cores(cpuinfo, {0, 2}) == 1
    assert physical_cores("processor\t: 0\n\nprocessor\t: 1\n", {0, 1}) == 2
