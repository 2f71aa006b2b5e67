"""Many computing cells: one MPI rank per cell, combined by the standard's rules (9.3)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gost_helpers import BACKENDS, SMALL, read_report

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.performance.cells import Cells, detect, launched_size
from pytest_gostcnn.performance.timing import CellTiming, Timing
from pytest_gostcnn.reports.check import check_report

PEAK = Peak(1e10, "given (--gost-peak)")


def cell(index: int, images: int, rounds: tuple[float, ...]) -> CellTiming:
    return CellTiming(index, "cpu", images, rounds, PEAK, f"{index:08x}")


def test_system_time_adds_each_rounds_slowest_cell_and_orp_uses_every_cells_peak():
    # Rounds start together (a barrier) and end with the slowest cell.
    cells = (cell(0, 16, (1.0, 1.0)), cell(1, 16, (0.5, 2.5)))
    timing = Timing("R", "training", "float32", 2, 2, 10**9, cells)
    assert timing.images == 32
    assert timing.seconds == 1.0 + 2.5
    assert timing.peak_macs_per_second == 2e10
    # All cells' MACs over (the system's time x the sum of the peaks).
    assert timing.orp == pytest.approx(100 * 10**9 * 32 / 3.5 / 2e10)
    # Each cell's own ОРП shows a straggler.
    assert timing.cell_orp(cells[0]) == pytest.approx(100 * 10**9 * 16 / 2.0 / 1e10)
    assert timing.cell_orp(cells[1]) == pytest.approx(100 * 10**9 * 16 / 3.0 / 1e10)


def test_without_an_mpi_launcher_there_is_one_cell(monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(name, raising=False)
    cells = detect()
    assert (cells.rank, cells.size, cells.comm) == (0, 1, None)
    assert cells.allgather("x") == ["x"] and cells.gather("x") == ["x"]


@pytest.mark.parametrize("name", ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"])
def test_launcher_environment_gives_the_number_of_ranks(name):
    assert launched_size({name: "4"}) == 4
    assert launched_size({}) == 1


def test_one_rank_under_a_launcher_is_the_single_cell_run(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "1")
    assert detect() == Cells(host=detect().host)


# A real two-rank run, as CI runs it: Open MPI's mpirun over the NumPy backend.

MPIRUN = shutil.which("mpirun")
try:
    import mpi4py  # noqa: F401

    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False
# CI sets GOST_REQUIRE_MPI=1 (.ci/run installs Open MPI): there a missing MPI is a failure.
if os.environ.get("GOST_REQUIRE_MPI") == "1" and not (MPIRUN and HAVE_MPI4PY):
    raise RuntimeError("GOST_REQUIRE_MPI=1 but mpirun or mpi4py is missing")
needs_mpi = pytest.mark.skipif(
    not (MPIRUN and HAVE_MPI4PY), reason="needs mpirun (Open MPI) and mpi4py: see .ci/run"
)


def mpirun(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Two ranks of pytest with ``args``; the test fails if they have not ended in ``timeout``
    seconds."""
    (tmp_path / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), encoding="utf-8")
    env = {
        **os.environ,
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": str(tmp_path),
    }
    command = [MPIRUN, "-n", "2", sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as job:
        try:
            stdout, stderr = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.terminate()  # mpirun ends its ranks on SIGTERM; on SIGKILL they would stay
            stdout, stderr = job.communicate()
            pytest.fail(
                f"the MPI job had not ended after {timeout:g} s:\n{stdout[-3000:]}{stderr[-3000:]}"
            )
    return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


@pytest.mark.mpi
@needs_mpi
def test_two_ranks_print_one_evaluation_with_two_cells_and_report_both(tmp_path):
    report = tmp_path / "report.json"
    run = mpirun(tmp_path, "--gost-backend=numpy", *SMALL, f"--gost-report={report}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    data = read_report(report)
    (evaluation,) = data["evaluations"]
    assert evaluation["cells"] == 2
    assert evaluation["designation"].startswith("ОП-П-float32-B1-N2")
    # Only cell 0 prints the summary: the plugin's section, the evaluation's account and its
    # last line appear once.
    assert run.stdout.count("GOST R 57700.36-2021, section 8: verification") == 1
    assert run.stdout.count(f"\nevaluation {evaluation['designation']}:") == 1
    assert run.stdout.count(f"inference evaluation {evaluation['designation']}: ") == 1
    assert [c["cell"] for c in data["cells"]] == [0, 1]
    (benchmark,) = data["benchmarks"]
    cells = benchmark["cells"]
    assert len(cells) == 2
    # Two distinct image sets.
    assert cells[0]["first_image_crc32"] != cells[1]["first_image_crc32"]
    # System figures follow from the cells'.
    assert benchmark["images"] == sum(c["images"] for c in cells)
    # The system's time is at least the slowest cell's (rounds start together).
    assert benchmark["seconds"] >= max(c["seconds"] for c in cells)
    peaks = sum(c["peak"] for c in data["cells"])
    assert benchmark["peak_macs_per_second"] == pytest.approx(peaks)
    assert benchmark["orp_percent"] == pytest.approx(
        100 * benchmark["macs_per_image"] * benchmark["images"] / benchmark["seconds"] / peaks
    )


@pytest.mark.mpi
@needs_mpi
def test_a_cell_that_fails_verification_is_listed_and_leaves_the_evaluation_incomplete(tmp_path):
    report = tmp_path / "report.json"
    run = mpirun(
        tmp_path,
        "--gost-backend=mymod:FailsOnCell1",
        *SMALL,
        "-k",
        "test_network or test_benchmark",
        f"--gost-report={report}",
    )
    assert run.returncode != 0
    data = read_report(report)
    # The report's exit status is the system's, and its reason the failing cell's (cell 0's
    # own is not 0 either: its benchmark was skipped, as every cell's was).
    assert [c["exit_status"] for c in data["cells"]] == [1, 1]
    assert data["exit_status"] == 1
    assert data["exit_reason"] == "cell 1: 1 of 2 selected items of the suite failed"
    assert data["cells"][0]["failures"] == []
    ((item, why),) = data["cells"][1]["failures"]
    assert item == "test_network[Sh-inference-B1]"
    # Its rerun command runs one process on cell 1's device.
    assert "rerun: pytest --gost-backend=mymod:FailsOnCell1" in why
    assert why.endswith("--gost-local-cell=1 -k test_network")
    # The summary lists it as the report does.
    assert f"cell 1 failed {item}: {why}" in run.stdout
    # No cell times an implementation that one cell failed to verify.
    assert data["benchmarks"] == []
    (evaluation,) = data["evaluations"]
    assert evaluation["complete"] is False and "Sh" in evaluation["missing"]


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize(
    ("backend", "said"),
    [
        ("RaisesOnCell1", "while timing: the backend raised RuntimeError: device lost"),
        (
            "RaisesLoadingOnCell1",
            "while preparing: the backend raised RuntimeError: out of device memory",
        ),
    ],
    ids=["timed", "loading the weights"],
)
def test_a_cell_whose_backend_raises_fails_the_item_on_every_cell(tmp_path, backend, said):
    report = tmp_path / "report.json"
    run = mpirun(
        tmp_path,
        f"--gost-backend=mymod:{backend}",
        *SMALL,
        "-k",
        "test_network or test_benchmark",
        f"--gost-report={report}",
    )
    # No rank waits forever for another: the run ends, failed, naming the cell.
    assert run.returncode != 0
    for cell in read_report(report)["cells"]:
        ((item, why),) = cell["failures"]
        assert item == "test_benchmark[Sh-inference-B1]" and f"cell 1 failed {said}" in why


@pytest.mark.mpi
@needs_mpi
def test_options_that_let_ranks_diverge_are_refused(tmp_path):
    run = mpirun(tmp_path, "--gost-backend=numpy", *SMALL, "-x")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "-x/--maxfail" in run.stderr and "same items" in run.stderr
    assert run.stderr.count("same items") == 1  # once for the job, by cell 0


@pytest.mark.mpi
@needs_mpi
def test_a_failure_on_another_cell_alone_sets_the_systems_exit_status(tmp_path):
    report = tmp_path / "report.json"
    run = mpirun(
        tmp_path,
        "--gost-backend=mymod:FailsOnCell1",
        *SMALL,
        "-k",
        "relu-forward",
        f"--gost-report={report}",
    )
    data = read_report(report)
    # Cell 0 ran and passed every item; cell 1 failed them: the system did not pass.
    assert [c["exit_status"] for c in data["cells"]] == [0, 1]
    assert data["exit_status"] == 1 and data["exit_reason"].startswith("cell 1: ")
    assert run.returncode != 0


# A stalled cell ends the job (docs/cells.md): the other cells wait for it no longer than
# the deadline, here a few seconds, after starting (mpirun, pytest, verifying М on both cells
# of a shared machine), which STARTUP bounds with room to spare.
STALL = (
    "--gost-networks=Sh",
    "--gost-mode=inference",
    "--gost-stall-timeout=3",
    "-k",
    "test_benchmark",
)
STARTUP = 120


@pytest.mark.mpi
@needs_mpi
def test_a_cell_that_stalls_while_timed_ends_the_job_naming_it_the_test_and_the_round(tmp_path):
    run = mpirun(tmp_path, "--gost-backend=mymod:StallsOnCell1", *STALL, timeout=3 + STARTUP)
    assert run.returncode != 0
    # Cell 0 names it; cell 1 never answers again (its inference sleeps) until it is killed.
    assert (
        "gostcnn: cell 1 of 2 stalled in Ш (Sh) inference, timed round 2 of 8: not at the "
        "barrier after it within 3 s (--gost-stall-timeout); ending the job"
    ) in run.stdout
    # Cell 1 sleeps for good: only the abort ends the job before mpirun()'s timeout. (Open MPI's
    # own "MPI_ABORT was invoked" line is not asserted: under load its help aggregation loses it.)


@pytest.mark.mpi
@needs_mpi
def test_a_cell_that_stalls_loading_the_weights_ends_the_job_naming_it(tmp_path):
    run = mpirun(tmp_path, "--gost-backend=mymod:StallsLoadingOnCell1", *STALL, timeout=3 + STARTUP)
    assert run.returncode != 0
    assert "gostcnn: cell 1 of 2 stalled in Ш (Sh) inference, loading the weights" in run.stdout


@pytest.mark.mpi
@needs_mpi
def test_a_stalled_job_keeps_the_report_of_its_finished_tests_marked_incomplete(tmp_path):
    report = tmp_path / "report.json"
    # Ш, the smallest network: its training finishes, its inference stalls on cell 1
    args = ["--gost-networks=Sh", *STALL[2:], f"--gost-report={report}"]
    run = mpirun(tmp_path, "--gost-backend=mymod:StallsOnCell1", *args, timeout=3 + 2 * STARTUP)
    assert run.returncode != 0
    data = read_report(report)  # Ш training finished; Ш inference stalled
    assert data["complete"] is False and data["exit_status"] is None
    assert data["run"]["finished"] == ["ТП-Ш-О-float32-B2"]
    assert data["run"]["unfinished"] == ["ТП-Ш-П-float32-B2"]
    assert data["run"]["stopped"].startswith("cell 1 of 2 stalled in Ш (Sh) inference")
    assert [(b["network"], b["mode"], len(b["cells"])) for b in data["benchmarks"]] == [
        ("Sh", "training", 2)
    ]
    assert any(r.startswith("run incomplete") for r in data["noncompliance_reasons"])
    assert check_report(data) == []


@pytest.mark.mpi
@needs_mpi
def test_a_stall_of_cell_0_is_named_by_the_others_after_twice_the_deadline(tmp_path):
    run = mpirun(tmp_path, "--gost-backend=mymod:StallsOnCell0", *STALL, timeout=6 + STARTUP)
    assert run.returncode != 0
    assert (
        "gostcnn: cell 0 of 2 stalled in Ш (Sh) inference, timed round 2 of 8: cell 1 waited "
        "for it at the barrier after it for twice the deadline of 3 s (--gost-stall-timeout); "
        "ending the job"
    ) in run.stderr
    # Cell 0 sleeps for good: only cell 1's abort ends the job before mpirun()'s timeout.
