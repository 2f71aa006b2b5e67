"""The cell's threads (pytest_gostcnn/machine/threads.py): BLAS never runs more threads
than asked, the float64 reference runs it on one, and a report names what decides them."""

import sys
import types

import numpy as np  # loads the BLAS the functions below see
from threadpoolctl import ThreadpoolController

from pytest_gostcnn.machine import threads


def _threads() -> list[int]:
    return [library["threads"] for library in threads.blas()]


def test_numpy_loads_a_blas_that_threadpoolctl_reports():
    assert np.ones((2, 2)) @ np.ones((2, 2)) is not None
    assert threads.blas() and all(
        set(b) == {*threads.BLAS_FIELDS, "threads"} for b in threads.blas()
    )


def test_a_limit_lowers_the_threads_and_never_raises_them():
    with ThreadpoolController().limit(limits=2, user_api="blas"):
        before = _threads()
        threads.limit_blas(before[0] + 3)
        assert _threads() == before
        threads.limit_blas(1)
        assert _threads() == [1] * len(before)


def test_the_reference_runs_blas_on_one_thread_and_leaves_it_as_it_was():
    with ThreadpoolController().limit(limits=2, user_api="blas"):
        before = _threads()
        with threads.one_blas_thread():
            assert _threads() == [1] * len(before)
        assert _threads() == before


def test_a_blas_loaded_after_the_first_limit_is_limited_too(monkeypatch):
    # Importing Numba loads SciPy's OpenBLAS beside NumPy's: the libraries must be found anew
    # at each call, not once for the process.
    class Library:
        user_api, num_threads = "blas", 2

        def set_num_threads(self, n):
            self.num_threads = n

    loaded = [Library()]
    monkeypatch.setattr(threads, "ThreadpoolController", lambda: types.SimpleNamespace(
        lib_controllers=list(loaded)
    ))  # fmt: skip
    threads.limit_blas(1)
    loaded.append(Library())  # loaded later in the process
    threads.limit_blas(1)
    assert [library.num_threads for library in loaded] == [1, 1]


def test_the_reference_finds_the_libraries_again_only_after_an_import(monkeypatch):
    # one_blas_thread runs around each of a run's hundreds of layer items: it searches the
    # loaded libraries again only where a module was imported since (a new BLAS comes with
    # an import), and a library loaded so is limited too.
    searches = []

    def controller():
        searches.append(1)
        return ThreadpoolController()

    monkeypatch.setattr(threads, "ThreadpoolController", controller)
    monkeypatch.setattr(threads, "_found", None)
    for _ in range(3):
        with threads.one_blas_thread():
            pass
    assert len(searches) == 1
    monkeypatch.setitem(sys.modules, "a_module_that_loads_a_blas", types.ModuleType("m"))
    with threads.one_blas_thread():
        pass
    assert len(searches) == 2


def test_the_environment_names_only_the_speed_variables_that_are_set(monkeypatch):
    for name in threads.SPEED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("UNRELATED", "x")
    assert threads.environment() == {"OMP_NUM_THREADS": "3", "CUDA_VISIBLE_DEVICES": "1"}
    assert threads.environment(threads.THREAD_VARIABLES) == {"OMP_NUM_THREADS": "3"}
    assert threads.thread_limit() == 3


def test_the_reference_works_without_numpys_huge_page_advice_and_gives_it_back():
    # A fresh large array's first touch under the advice can wait for the kernel to compact
    # memory: the suite's own float64 work goes without it, the backend's rounds keep it.
    from pytest_gostcnn.machine import pool

    multiarray = np._core.multiarray
    before = multiarray._get_madvise_hugepage()
    with ThreadpoolController().limit(limits=2, user_api="blas"), pool.reference_work():
        assert multiarray._get_madvise_hugepage() is False
        assert _threads() == [1] * len(_threads())
    assert multiarray._get_madvise_hugepage() == before
