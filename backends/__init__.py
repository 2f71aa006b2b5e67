"""Backend adapters (installed as ``pytest_gostcnn.backends``).

Each backend subclasses ``pytest_gostcnn.backend.Backend`` and provides the layer kernels
of the executor for one device: ``numpy`` (NumPy, float32, CPU), ``cupy`` (CuPy, NVIDIA
GPUs) and ``torch`` (PyTorch, CPU or CUDA). All three register through the entry-point
group ``pytest_gostcnn.backends``, as a third-party backend would; ``common`` holds what
their kernel sets share, the kernel lookup among it.

The kernel sets: the NumPy kernels (``numpy/kernels/``) are threaded CPU kernels tuned for
BLAS, with a workspace reused between calls; the xp kernels (``cupy/xp_kernels.py``) are
one code path for CuPy, written against an array module and verified on the CPU with
NumPy (on a GPU, ``cupy/kernels.cu`` fuses into one CUDA kernel what the xp code would run
as many array passes); the torch kernels (``torch/kernels.py``) call PyTorch's own
operators, on whichever device the backend holds.
"""
