"""Backend adapters (installed as ``pytest_gostcnn.backends``).

Each backend subclasses ``pytest_gostcnn.backend.Backend`` and provides the layer kernels
of the executor for one device: ``numpy_cpu`` (NumPy, float32, CPU) and ``cupy_gpu``
(CuPy, NVIDIA GPUs; its kernels, in ``_xp_kernels``, are written against an array module
and CI runs them with NumPy). Both register through the entry-point group
``pytest_gostcnn.backends``, as a third-party backend would.
"""
