"""The literal oracle: Appendix A of GOST R 57700.36-2021, loop for loop, in Python.

Each function transcribes one section (forward, backward, gradient or update) of one
Appendix A fragment, with the same loops in the same order and the same conditions, so a
reader can hold it next to the C text of the standard's Appendix A. It is
slow on purpose and only meant for the small shapes of ``test_oracle.py``, which checks
the vectorised reference (``reference/``) against it.

Conventions:

- Arrays are NumPy float64 (the C text says ``float``; the project's reference is float64).
- Array names, index names and parameter names are the C ones (``IN``, ``OUT_D``, ``l``,
  ``Rx``...). Sizes the C code takes from its declarations (B, X, Y, L, Xout, ...) come from
  the shapes of the arrays passed in; layer parameters are arguments.
- The C declarations at the top of a fragment leave arrays uninitialised; ``_declare``
  fills them with NaN, so an element a fragment fails to write shows in any comparison.
- The update sections change the weight arrays in place, as the C code does.
- Where the C text has a typo, the standard.md §4 reading is applied and marked with a comment.
"""

# ruff: noqa: E741  -- `l` is Appendix A's channel index; renaming it would break the
# line-by-line correspondence with the C text.

import numpy as np


def _declare(*shape: int) -> np.ndarray:
    """``float A[..][..];``: uninitialised in C, NaN here."""
    return np.full(shape, np.nan)


def output_size(size: int, window: int, stride: int, pad: int) -> int:
    """Xout / Yout: ``floor((X + 2*P - R) / S) + 1`` (standard.md §4: what the loops imply)."""
    return (size + 2 * pad - window) // stride + 1


# Convolution (6.1): IN[B][X][Y][L], OUT[B][Xout][Yout][F], FILTERS[Rx][Ry][L][F], BIASES[F].


def conv_forward(
    IN: np.ndarray, FILTERS: np.ndarray, BIASES: np.ndarray, S: int, Px: int, Py: int
) -> np.ndarray:
    """Convolution fragment, section "// Прямой ход" (forward). Returns OUT."""
    B, X, Y, L = IN.shape
    Rx, Ry, _, F = FILTERS.shape
    Xout, Yout = output_size(X, Rx, S, Px), output_size(Y, Ry, S, Py)
    OUT = _declare(B, Xout, Yout, F)
    for b in range(B):
        for f in range(F):
            for x in range(Xout):
                for y in range(Yout):
                    OUT[b, x, y, f] = BIASES[f]
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            for l in range(L):
                                                OUT[b, x, y, f] += (
                                                    IN[b, x * S + rx - Px, y * S + ry - Py, l]
                                                    * FILTERS[rx, ry, l, f]
                                                )
    return OUT


def conv_backward(
    IN: np.ndarray, OUT_D: np.ndarray, FILTERS: np.ndarray, S: int, Px: int, Py: int
) -> np.ndarray:
    """Convolution fragment, section "// Обратный ход" (backward). Returns IN_D.

    IN is read for its shape only.
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, F = OUT_D.shape
    Rx, Ry = FILTERS.shape[:2]
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            for x in range(X):
                for y in range(Y):
                    IN_D[b, x, y, l] = 0
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            for f in range(F):
                                                IN_D[b, x * S + rx - Px, y * S + ry - Py, l] += (
                                                    OUT_D[b, x, y, f] * FILTERS[rx, ry, l, f]
                                                )
    return IN_D


def conv_gradient(
    IN: np.ndarray, OUT_D: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int
) -> tuple[np.ndarray, np.ndarray]:
    """Convolution fragment, section "// Вычисление градиента". Returns FILTERS_D, BIASES_D.

    The C text's ``OUT_D[b][x][y][f|`` is read as ``[f]`` (standard.md §4: a syntax typo).
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, F = OUT_D.shape
    FILTERS_D = _declare(Rx, Ry, L, F)
    BIASES_D = _declare(F)
    for f in range(F):
        for l in range(L):
            for rx in range(Rx):
                for ry in range(Ry):
                    FILTERS_D[rx, ry, l, f] = 0
                    for b in range(B):
                        for x in range(Xout):
                            for y in range(Yout):
                                if x * S + rx - Px >= 0:
                                    if y * S + ry - Py >= 0:
                                        if x * S + rx - Px < X:
                                            if y * S + ry - Py < Y:
                                                FILTERS_D[rx, ry, l, f] += (
                                                    IN[b, x * S + rx - Px, y * S + ry - Py, l]
                                                    * OUT_D[b, x, y, f]
                                                )
    for f in range(F):
        BIASES_D[f] = 0
        for b in range(B):
            for x in range(Xout):
                for y in range(Yout):
                    BIASES_D[f] += OUT_D[b, x, y, f]
    return FILTERS_D, BIASES_D


def conv_update(
    FILTERS: np.ndarray, BIASES: np.ndarray, FILTERS_D: np.ndarray, BIASES_D: np.ndarray, B: int
) -> None:
    """Convolution fragment, section "// Изменение значений весов" (update), in place."""
    Rx, Ry, L, F = FILTERS.shape
    for f in range(F):
        BIASES[f] += (BIASES_D[f]) / B
        for rx in range(Rx):
            for ry in range(Ry):
                for l in range(L):
                    FILTERS[rx, ry, l, f] += (FILTERS_D[rx, ry, l, f]) / B


# Max pooling (6.2): IN[B][X][Y][L], OUT[B][Xout][Yout][L].


def maxpool_forward(IN: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int) -> np.ndarray:
    """Max-pooling fragment, section "// Прямой ход" (forward). Returns OUT.

    The C condition ``(...)&& if (...)&& if (...)`` is read without the stray ``if``s
    (standard.md §4: a syntax typo). The FIRST/RES logic is kept as written: a window position
    outside the map counts as the value 0.
    """
    B, X, Y, L = IN.shape
    Xout, Yout = output_size(X, Rx, S, Px), output_size(Y, Ry, S, Py)
    OUT = _declare(B, Xout, Yout, L)
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    FIRST = 0
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if (
                                (x * S + rx - Px >= 0)
                                and (y * S + ry - Py >= 0)
                                and (x * S + rx - Px < X)
                                and (y * S + ry - Py < Y)
                            ):
                                if FIRST == 0:
                                    FIRST = 1
                                    RES = IN[b, x * S + rx - Px, y * S + ry - Py, l]
                                else:
                                    if RES < IN[b, x * S + rx - Px, y * S + ry - Py, l]:
                                        RES = IN[b, x * S + rx - Px, y * S + ry - Py, l]
                            else:
                                if FIRST == 0:
                                    FIRST = 1
                                    RES = 0
                                else:
                                    if RES < 0:
                                        RES = 0
                    OUT[b, x, y, l] = RES
    return OUT


def maxpool_backward(
    IN: np.ndarray, OUT: np.ndarray, OUT_D: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int
) -> np.ndarray:
    """Max-pooling fragment, section "// Обратный ход" (backward). Returns IN_D.

    Same reading of the ``&& if`` typo as the forward section.
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, _ = OUT_D.shape
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            for x in range(X):
                for y in range(Y):
                    IN_D[b, x, y, l] = 0
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if (
                                (x * S + rx - Px >= 0)
                                and (y * S + ry - Py >= 0)
                                and (x * S + rx - Px < X)
                                and (y * S + ry - Py < Y)
                            ):
                                if IN[b, x * S + rx - Px, y * S + ry - Py, l] == OUT[b, x, y, l]:
                                    IN_D[b, x * S + rx - Px, y * S + ry - Py, l] += OUT_D[
                                        b, x, y, l
                                    ]
    return IN_D


# Average pooling (6.2): IN[B][X][Y][L], OUT[B][Xout][Yout][L].


def avgpool_forward(IN: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int) -> np.ndarray:
    """Average-pooling fragment, section "// Прямой ход" (forward). Returns OUT."""
    B, X, Y, L = IN.shape
    Xout, Yout = output_size(X, Rx, S, Px), output_size(Y, Ry, S, Py)
    OUT = _declare(B, Xout, Yout, L)
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    RES = 0
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            RES += IN[b, x * S + rx - Px, y * S + ry - Py, l]
                    OUT[b, x, y, l] = RES / float(Rx * Ry)
    return OUT


def avgpool_backward(
    IN: np.ndarray, OUT_D: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int
) -> np.ndarray:
    """Average-pooling fragment, section "// Обратный ход" (backward). Returns IN_D.

    IN is read for its shape only. The ``&& if`` typo is read as in max pooling.
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, _ = OUT_D.shape
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            for x in range(X):
                for y in range(Y):
                    IN_D[b, x, y, l] = 0
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if (
                                (x * S + rx - Px >= 0)
                                and (y * S + ry - Py >= 0)
                                and (x * S + rx - Px < X)
                                and (y * S + ry - Py < Y)
                            ):
                                IN_D[b, x * S + rx - Px, y * S + ry - Py, l] += OUT_D[
                                    b, x, y, l
                                ] / float(Rx * Ry)
    return IN_D


# Rectification, ReLU (6.3): IN, OUT [B][X][Y][L].


def relu_forward(IN: np.ndarray) -> np.ndarray:
    """Rectification fragment, section "// Прямой ход" (forward). Returns OUT."""
    B, X, Y, L = IN.shape
    OUT = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    if IN[b, x, y, l] > 0:
                        OUT[b, x, y, l] = IN[b, x, y, l]
                    else:
                        OUT[b, x, y, l] = 0
    return OUT


def relu_backward(IN: np.ndarray, OUT_D: np.ndarray) -> np.ndarray:
    """Rectification fragment, section "// Обратный ход" (backward). Returns IN_D."""
    B, X, Y, L = IN.shape
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    if IN[b, x, y, l] > 0:
                        IN_D[b, x, y, l] = OUT_D[b, x, y, l]
                    else:
                        IN_D[b, x, y, l] = 0
    return IN_D


# Concatenation (6.4): IN1[B][X][Y][L1], IN2[B][X][Y][L2], OUT[B][X][Y][L1+L2].


def concat_forward(IN1: np.ndarray, IN2: np.ndarray) -> np.ndarray:
    """Concatenation fragment, section "// Прямой ход" (forward). Returns OUT."""
    B, X, Y, L1 = IN1.shape
    L2 = IN2.shape[3]
    OUT = _declare(B, X, Y, L1 + L2)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L1):
                    OUT[b, x, y, l] = IN1[b, x, y, l]
                for l in range(L2):
                    OUT[b, x, y, l + L1] = IN2[b, x, y, l]
    return OUT


def concat_backward(OUT_D: np.ndarray, L1: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenation fragment, section "// Обратный ход" (backward). Returns IN1_D, IN2_D.

    L1 is the depth of IN1 (a size the C code takes from its declarations).
    """
    B, X, Y, L = OUT_D.shape
    L2 = L - L1
    IN1_D = _declare(B, X, Y, L1)
    IN2_D = _declare(B, X, Y, L2)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L1):
                    IN1_D[b, x, y, l] = OUT_D[b, x, y, l]
                for l in range(L2):
                    IN2_D[b, x, y, l] = OUT_D[b, x, y, l + L1]
    return IN1_D, IN2_D


# Split (6.5): IN[B][X][Y][L], OUT1[B][X][Y][L1], OUT2[B][X][Y][L-L1].


def split_forward(IN: np.ndarray, L1: int) -> tuple[np.ndarray, np.ndarray]:
    """Split fragment, section "// Прямой ход" (forward). Returns OUT1, OUT2."""
    B, X, Y, L = IN.shape
    OUT1 = _declare(B, X, Y, L1)
    OUT2 = _declare(B, X, Y, L - L1)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L1):
                    OUT1[b, x, y, l] = IN[b, x, y, l]
                for l in range(L - L1):
                    OUT2[b, x, y, l] = IN[b, x, y, L1 + l]
    return OUT1, OUT2


def split_backward(OUT1_D: np.ndarray, OUT2_D: np.ndarray) -> np.ndarray:
    """Split fragment, section "// Обратный ход" (backward). Returns IN_D."""
    B, X, Y, L1 = OUT1_D.shape
    L = L1 + OUT2_D.shape[3]
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L1):
                    IN_D[b, x, y, l] = OUT1_D[b, x, y, l]
                for l in range(L - L1):
                    IN_D[b, x, y, L1 + l] = OUT2_D[b, x, y, l]
    return IN_D


# Depthwise convolution (6.6): IN[B][X][Y][L], OUT[B][Xout][Yout][L], FILTERS[Rx][Ry][L],
# BIASES[L] (standard.md §4: the C text declares BIASES[F]; the layer has one bias per channel).


def depthwise_forward(
    IN: np.ndarray, FILTERS: np.ndarray, BIASES: np.ndarray, S: int, Px: int, Py: int
) -> np.ndarray:
    """Depthwise-convolution fragment, section "// Прямой ход" (forward). Returns OUT.

    The C text's ``BIASES[f]`` (f unbound here) is read as ``BIASES[l]`` (standard.md §4).
    """
    B, X, Y, L = IN.shape
    Rx, Ry, _ = FILTERS.shape
    Xout, Yout = output_size(X, Rx, S, Px), output_size(Y, Ry, S, Py)
    OUT = _declare(B, Xout, Yout, L)
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    OUT[b, x, y, l] = BIASES[l]
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            OUT[b, x, y, l] += (
                                                IN[b, x * S + rx - Px, y * S + ry - Py, l]
                                                * FILTERS[rx, ry, l]
                                            )
    return OUT


def depthwise_backward(
    IN: np.ndarray, OUT_D: np.ndarray, FILTERS: np.ndarray, S: int, Px: int, Py: int
) -> np.ndarray:
    """Depthwise-convolution fragment, section "// Обратный ход" (backward). Returns IN_D.

    IN is read for its shape only.
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, _ = OUT_D.shape
    Rx, Ry, _ = FILTERS.shape
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            for x in range(X):
                for y in range(Y):
                    IN_D[b, x, y, l] = 0
    for b in range(B):
        for l in range(L):
            for x in range(Xout):
                for y in range(Yout):
                    for rx in range(Rx):
                        for ry in range(Ry):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            IN_D[b, x * S + rx - Px, y * S + ry - Py, l] += (
                                                OUT_D[b, x, y, l] * FILTERS[rx, ry, l]
                                            )
    return IN_D


def depthwise_gradient(
    IN: np.ndarray, OUT_D: np.ndarray, Rx: int, Ry: int, S: int, Px: int, Py: int
) -> tuple[np.ndarray, np.ndarray]:
    """Depthwise-convolution fragment, section "// Вычисление значений градиента".

    Returns FILTERS_D, BIASES_D. The C text's ``BIASES_D[I]`` is read as ``BIASES_D[l]``
    (standard.md §4).
    """
    B, X, Y, L = IN.shape
    _, Xout, Yout, _ = OUT_D.shape
    FILTERS_D = _declare(Rx, Ry, L)
    BIASES_D = _declare(L)
    for l in range(L):
        for rx in range(Rx):
            for ry in range(Ry):
                FILTERS_D[rx, ry, l] = 0
                for b in range(B):
                    for x in range(Xout):
                        for y in range(Yout):
                            if x * S + rx - Px >= 0:
                                if y * S + ry - Py >= 0:
                                    if x * S + rx - Px < X:
                                        if y * S + ry - Py < Y:
                                            FILTERS_D[rx, ry, l] += (
                                                IN[b, x * S + rx - Px, y * S + ry - Py, l]
                                                * OUT_D[b, x, y, l]
                                            )
    for l in range(L):
        BIASES_D[l] = 0
        for b in range(B):
            for x in range(Xout):
                for y in range(Yout):
                    BIASES_D[l] += OUT_D[b, x, y, l]
    return FILTERS_D, BIASES_D


def depthwise_update(
    FILTERS: np.ndarray, BIASES: np.ndarray, FILTERS_D: np.ndarray, BIASES_D: np.ndarray, B: int
) -> None:
    """Depthwise-convolution fragment, section "// Изменение значений весов", in place.

    The C text's ``BIASES[I]`` / ``BIASES_D[I]`` are read as index ``l`` (standard.md §4).
    """
    Rx, Ry, L = FILTERS.shape
    for l in range(L):
        BIASES[l] += (BIASES_D[l]) / B
        for rx in range(Rx):
            for ry in range(Ry):
                FILTERS[rx, ry, l] += (FILTERS_D[rx, ry, l]) / B


# Elementwise addition (6.7): IN1, IN2, OUT [B][X][Y][L].


def eltwise_forward(IN1: np.ndarray, IN2: np.ndarray) -> np.ndarray:
    """Elementwise fragment, section "// Прямой ход" (forward). Returns OUT."""
    B, X, Y, L = IN1.shape
    OUT = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    OUT[b, x, y, l] = IN1[b, x, y, l] + IN2[b, x, y, l]
    return OUT


def eltwise_backward(OUT_D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise fragment, section "// Обратный ход" (backward). Returns IN1_D, IN2_D."""
    B, X, Y, L = OUT_D.shape
    IN1_D = _declare(B, X, Y, L)
    IN2_D = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    IN1_D[b, x, y, l] = OUT_D[b, x, y, l]
                    IN2_D[b, x, y, l] = OUT_D[b, x, y, l]
    return IN1_D, IN2_D


# Fully connected (6.8): IN[B][X][Y][L], OUT[B][F], WEIGHTS[F][L][X][Y] (standard.md §4: the C text
# declares WEIGHTS[F][L] but indexes it, like WEIGHTS_D, as [f][l][x][y]), BIASES[F].


def fc_forward(IN: np.ndarray, WEIGHTS: np.ndarray, BIASES: np.ndarray) -> np.ndarray:
    """Fully-connected fragment, section "// Прямой ход" (forward). Returns OUT[B][F]."""
    B, X, Y, L = IN.shape
    F = WEIGHTS.shape[0]
    OUT = _declare(B, F)
    for b in range(B):
        for f in range(F):
            OUT[b, f] = BIASES[f]
            for x in range(X):
                for y in range(Y):
                    for l in range(L):
                        OUT[b, f] += IN[b, x, y, l] * WEIGHTS[f, l, x, y]
    return OUT


def fc_backward(IN: np.ndarray, OUT_D: np.ndarray, WEIGHTS: np.ndarray) -> np.ndarray:
    """Fully-connected fragment, section "// Обратный ход" (backward). Returns IN_D.

    OUT_D is [B][F]; IN is read for its shape only.
    """
    B, X, Y, L = IN.shape
    F = WEIGHTS.shape[0]
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    IN_D[b, x, y, l] = 0
                    for f in range(F):
                        IN_D[b, x, y, l] += OUT_D[b, f] * WEIGHTS[f, l, x, y]
    return IN_D


def fc_gradient(IN: np.ndarray, OUT_D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fully-connected fragment, section "// Вычисления значений градиента".

    Returns WEIGHTS_D[F][L][X][Y], BIASES_D[F]; OUT_D is [B][F].
    """
    B, X, Y, L = IN.shape
    F = OUT_D.shape[1]
    WEIGHTS_D = _declare(F, L, X, Y)
    BIASES_D = _declare(F)
    for f in range(F):
        # C: `BIASES_D[f]=OUT_D[b][f];` with b unbound. standard.md §4 reads it as the sum over b,
        # written as the convolution fragment writes its BIASES_D sum.
        BIASES_D[f] = 0
        for b in range(B):
            BIASES_D[f] += OUT_D[b, f]
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    WEIGHTS_D[f, l, x, y] = 0
        for b in range(B):
            for x in range(X):
                for y in range(Y):
                    for l in range(L):
                        WEIGHTS_D[f, l, x, y] += IN[b, x, y, l] * OUT_D[b, f]
    return WEIGHTS_D, BIASES_D


def fc_update(
    WEIGHTS: np.ndarray, BIASES: np.ndarray, WEIGHTS_D: np.ndarray, BIASES_D: np.ndarray, B: int
) -> None:
    """Fully-connected fragment, section "// Изменение значений весов" (update), in place."""
    F, L, X, Y = WEIGHTS.shape
    for f in range(F):
        BIASES[f] += (BIASES_D[f]) / B
        for x in range(X):
            for y in range(Y):
                for l in range(L):
                    WEIGHTS[f, l, x, y] += (WEIGHTS_D[f, l, x, y]) / B


# Channel shuffle (6.9): IN, OUT [B][X][Y][L], G groups, L divisible by G.


def shuffle_forward(IN: np.ndarray, G: int) -> np.ndarray:
    """Shuffle fragment, section "// Прямой ход" (forward). Returns OUT.

    ``/`` in the C index formula is integer division (``//`` here).
    """
    B, X, Y, L = IN.shape
    OUT = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            f = (l // (L // G)) + G * (l % (L // G))
            for x in range(X):
                for y in range(Y):
                    OUT[b, x, y, f] = IN[b, x, y, l]
    return OUT


def shuffle_backward(OUT_D: np.ndarray, G: int) -> np.ndarray:
    """Shuffle fragment, section "// Обратный ход" (backward). Returns IN_D."""
    B, X, Y, L = OUT_D.shape
    IN_D = _declare(B, X, Y, L)
    for b in range(B):
        for l in range(L):
            f = (l // (L // G)) + G * (l % (L // G))
            for x in range(X):
                for y in range(Y):
                    IN_D[b, x, y, l] = OUT_D[b, x, y, f]
    return IN_D
