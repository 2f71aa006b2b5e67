"""The PyTorch backend: ``backend.py`` (the device, from ``--gost-backend-option
device=...``), its kernels ``kernels.py`` (the standard's semantics on PyTorch's
operators). It imports without PyTorch."""

from .backend import TorchBackend

__all__ = ["TorchBackend"]
