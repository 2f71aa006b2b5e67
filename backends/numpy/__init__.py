"""The NumPy CPU backend (float32): ``backend.py``, its kernels ``kernels/``, their
scratch memory and worker threads ``workspace.py``."""

from .backend import NumpyBackend

__all__ = ["NumpyBackend"]
