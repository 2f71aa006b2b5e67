"""The ONNX Runtime backend: ``graph.py`` (the standard's layers as ONNX nodes, whole
networks as models, and ``export``'s files), ``providers.py`` (the execution providers and
the sessions' settings), ``backend.py`` (inference on them). It imports without ONNX."""

from .backend import OnnxRuntimeBackend

__all__ = ["OnnxRuntimeBackend"]
