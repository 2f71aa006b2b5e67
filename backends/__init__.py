"""Backend adapters (installed as ``pytest_gostcnn.backends``).

Each backend provides the layer kernels of the executor's ``Kernels`` protocol
(``pytest_gostcnn.executor``) for one device. The built-in NumPy and CuPy adapters and the
entry-point group through which they and third-party backends register come with the
plugin work; until then this package holds no adapter.
"""
