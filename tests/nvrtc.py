"""NVRTC, NVIDIA's runtime CUDA compiler, called through ctypes: it compiles CUDA C++ to PTX
on a machine without a GPU, so CI can check that the backend's CUDA source compiles.

The library comes from the ``nvidia-cuda-nvrtc-cu12`` wheel (the ``test`` extra, Linux) or
the system's CUDA toolkit.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path


def find_library() -> str | None:
    """The path or name of libnvrtc, or None where neither the wheel nor a toolkit has it."""
    try:
        import nvidia.cuda_nvrtc
    except ImportError:
        pass
    else:
        for folder in nvidia.cuda_nvrtc.__path__:
            for candidate in sorted(Path(folder, "lib").glob("libnvrtc.so.*")):
                if "alt" not in candidate.name and "builtins" not in candidate.name:
                    return str(candidate)
    return ctypes.util.find_library("nvrtc")


class CompileError(Exception):
    pass


def compile_names(source: str, names: list[str], options: list[str]) -> dict[str, str]:
    """Compile ``source`` to PTX and return each named template instance's lowered (mangled)
    name, the name the compiled module exports it by.

    Raises CompileError with NVRTC's log when compilation fails.
    """
    library = find_library()
    if library is None:
        raise FileNotFoundError("libnvrtc not found")
    nvrtc = ctypes.CDLL(library)
    program = ctypes.c_void_p()
    _check(nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"k.cu", 0, None, None))
    try:
        for name in names:
            _check(nvrtc.nvrtcAddNameExpression(program, name.encode()))
        arguments = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        result = nvrtc.nvrtcCompileProgram(program, len(options), arguments)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
        if result != 0:
            raise CompileError(log.value.decode(errors="replace"))
        lowered = {}
        for name in names:
            text = ctypes.c_char_p()
            _check(nvrtc.nvrtcGetLoweredName(program, name.encode(), ctypes.byref(text)))
            lowered[name] = text.value.decode()
        return lowered
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))


def _check(result: int) -> None:
    if result != 0:
        raise CompileError(f"NVRTC call failed with status {result}")
