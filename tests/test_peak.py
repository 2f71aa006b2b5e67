"""The theoretical peak of a cell: given (--gost-peak) or estimated, with every factor."""

import pytest

from pytest_gostcnn.peak import cpu_peak, parse_peak, si

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
    monkeypatch.setattr("pytest_gostcnn.peak.CPUFREQ_MAX", str(tmp_path / "absent"))
    cpuinfo = CPUINFO.format(vendor=vendor, flags=flags)
    peak = cpu_peak("float32", cpuinfo=cpuinfo, cores=4)
    assert peak.macs_per_cycle_per_unit == macs_per_cycle
    assert peak.units == 4
    # Without cpufreq, the highest clock /proc/cpuinfo reports.
    assert peak.clock_hz == 3.0e9
    assert peak.macs_per_second == pytest.approx(4 * 3.0e9 * macs_per_cycle)
    assert peak.estimated and "estimated" in peak.describe()


def test_cpufreq_maximum_clock_wins_over_the_current_clock(monkeypatch, tmp_path):
    (tmp_path / "max").write_text("3500000\n")  # kHz
    monkeypatch.setattr("pytest_gostcnn.peak.CPUFREQ_MAX", str(tmp_path / "max"))
    peak = cpu_peak("float32", cpuinfo=CPUINFO.format(vendor="x", flags="fma"), cores=2)
    assert peak.clock_hz == 3.5e9


def test_no_cpu_estimate_for_half_precision():
    assert cpu_peak("float16", cpuinfo=CPUINFO.format(vendor="x", flags="fma"), cores=1) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("2.5e12", 2.5e12), ("2.5T", 2.5e12), ("400 G", 4e11), ("1.5TMAC/s", 1.5e12)],
)
def test_given_peak_accepts_numbers_and_si_prefixes(text, value):
    peak = parse_peak(text)
    assert peak.macs_per_second == pytest.approx(value)
    assert not peak.estimated


@pytest.mark.parametrize("text", ["0", "-3e12", "abc", "inf", "nan", "2.5X"])
def test_a_peak_that_is_not_a_positive_number_is_rejected(text):
    with pytest.raises(ValueError, match=r"--gost-peak=.*positive number of MAC/s"):
        parse_peak(text)


def test_si_prefixes():
    assert si(1.23e12) == "1.23 T"
    assert si(4.5e9) == "4.5 G"
    assert si(12.0) == "12 "
