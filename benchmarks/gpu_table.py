"""A saved ``compare_torch_gpu.py --json`` run as the Markdown table of docs/performance.md.

Needs neither a GPU nor PyTorch::

    python benchmarks/gpu_table.py gpu_check_out/compare_torch_gpu.json
    python benchmarks/gpu_table.py run.json --peak float32=33.5e12 --peak float16=495e12

ОРП (section 9.5) of the CuPy side = MACs per image (``pytest_gostcnn.model.complexity``) x
images per second / the device's peak in the row's data type: the peaks the run saved
(``peak_macs_per_second``), or ``--peak`` for a run saved without them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.timing import relative_real_performance


def peak_option(text: str) -> tuple[str, float]:
    dtype, _, value = text.partition("=")
    try:
        return dtype, float(value)
    except ValueError:
        message = f"--peak {text!r}: expected DTYPE=MACS_PER_SECOND"
        raise argparse.ArgumentTypeError(message) from None


def table(report: dict, peaks: dict[str, float]) -> list[str]:
    networks = load_networks()
    lines = [
        "| network | mode | dtype | B | CuPy img/s | PyTorch img/s | ratio | CuPy ОРП |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        key, mode, dtype = row["network"], row["mode"], row["dtype"]
        name = f"{CYRILLIC[key]} ({key})"
        if "error" in row:
            lines.append(f"| {name} | {mode} | {dtype} | {row['batch']} | {row['error']} | | | |")
            continue
        macs = (inference_macs if mode == "inference" else training_macs)(networks[key])
        rate = row["cupy_images_per_second"]
        orp = (
            f"{relative_real_performance(macs, 1, 1 / rate, peaks[dtype]):.2f} %"
            if peaks.get(dtype)
            else "no peak"
        )
        ratio = f"{row['ratio']:.2f}" if row["meets_target"] else f"**{row['ratio']:.2f}**"
        lines.append(
            f"| {name} | {mode} | {dtype} | {row['batch']} | {rate:.0f} | "
            f"{row['torch_images_per_second']:.0f} | {ratio} | {orp} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--peak", type=peak_option, action="append", default=[])
    args = parser.parse_args()
    report = json.loads(args.report.read_text(encoding="utf-8"))
    peaks = {**report.get("peak_macs_per_second", {}), **dict(args.peak)}
    print("\n".join(table(report, peaks)))


if __name__ == "__main__":
    main()
