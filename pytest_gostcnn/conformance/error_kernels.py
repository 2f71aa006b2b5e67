"""The error model's executor kernels: the float64 reference run with the variance of a
rounding implementation's error beside every array (``error_model.ValueAndVariance``).

``forward`` and ``backward`` take each layer type's rule from ``error_model.RULES``
(``_forward_<rule>``, ``_backward_<rule>``); ``gradient`` and ``update`` are one for every
type. Each term is derived in docs/verification.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from array_api_compat import array_namespace, device

from pytest_gostcnn.machine.pool import elementwise, split
from pytest_gostcnn.model.dtypes import Precision
from pytest_gostcnn.model.layers import Layer, window_overlap
from pytest_gostcnn.reference import MODULES
from pytest_gostcnn.reference._window import batch_parts, crop, offsets, pad
from pytest_gostcnn.reference.library import NUMPY, Array, ReferenceLibrary

from . import passes
from .error_model import UNCERTAINTY, GradientPart, ValueAndVariance, rule


class ErrorModelKernels:
    """Executor kernels over ``ValueAndVariance`` arrays: the float64 reference and its error
    model."""

    def __init__(
        self,
        precision: Precision,
        master: Precision | None = None,
        library: ReferenceLibrary = NUMPY,
        carried: bool = False,
    ) -> None:
        """``master``: the precision gradients and updated weights are stored in, where it
        is not the data type's (float16 training, standard.md §6); ``library``: the array
        library the reference runs on; ``carried``: the weights carry the error of earlier
        updates (a replay's, ``replay.Replay``), which every position of a map shares
        (``_forward_avgpool``)."""
        self.precision = precision
        self.master = master or precision
        self.library = library
        self.carried = carried

    def bound(self, host: np.ndarray) -> ValueAndVariance:
        """A float64 host array as handed to the implementation, on the reference's library:
        its error is its rounding (computed on the host, as the draws are)."""
        value = np.asarray(host, dtype=np.float64)

        def squared_error(v):
            error = self.precision.round(v) - v
            return error * error

        return ValueAndVariance(
            self.library.asarray(value),
            self.library.asarray(elementwise(squared_error, value)),
            self.precision.storage,
            self.precision.underflow,
        )

    def _stored(self, value: Array, var: Array) -> ValueAndVariance:
        """A computed array, stored in the data type: its rounding adds ``(u*v)^2``, and
        near zero (a subnormal) the type's underflow bound squared."""
        u, tiny = self.precision.storage, self.precision.underflow
        var = elementwise(lambda v, var: var + (u * v) ** 2 + tiny**2, value, var)
        return ValueAndVariance(value, var, u, tiny)

    def _sum_of_products(self, length: int) -> float:
        """Variance one sum of ``length`` products adds, per unit of ``sum (w*x)^2``.

        Each addition rounds the partial sum; with terms of random sign the partial sums
        walk like ``sqrt(k)`` and the rounding errors add up to about ``length * u^2`` times
        the sum of squared terms. TF32 also rounds both factors of every product.
        """
        p = self.precision
        return length * p.accumulate**2 + 2 * p.multiply**2

    def _drift(self, length: int, total: Array, magnitude: Array) -> Array:
        """Variance a sum of ``length`` terms adds when its terms share a sign.

        ``total`` is the sum, ``magnitude`` the sum of the terms' absolute values. Terms of
        one sign and size (a bias gradient summing one broadcast residual over a map, a
        pooling sum after ReLU) make partial sums grow in step and their roundings lean
        the same way: the error approaches ``length * u * |total| / 2``. The factor
        ``(total / magnitude)^2`` is 1 for such sums and about ``1/length`` for terms of
        random sign, where ``_sum_of_products`` already holds the rounding.
        """
        xp, summed = array_namespace(total), magnitude > 0
        coherence = xp.where(summed, total / xp.where(summed, magnitude, 1.0), 0.0)
        return (length * self.precision.accumulate * total * coherence / 2) ** 2

    # forward and backward: one rule per layer type, found in RULES. -----------------------
    def forward(
        self, layer: Layer, inputs: list[ValueAndVariance], weights: dict[str, ValueAndVariance]
    ) -> list:
        module = MODULES[layer.type.name]
        values = module.forward(layer, [x.value for x in inputs], _values(weights))
        forward = getattr(self, f"_forward_{rule(layer.type.name)}")
        return forward(layer, module, inputs, weights, values)

    def backward(
        self,
        layer: Layer,
        inputs: list[ValueAndVariance],
        outputs: list[ValueAndVariance],
        out_residuals: list[ValueAndVariance],
        weights: dict[str, ValueAndVariance],
    ) -> list:
        module = MODULES[layer.type.name]
        in_values = [x.value for x in inputs]
        out_values = [o.value for o in outputs]
        values = module.backward(
            layer, in_values, out_values, [r.value for r in out_residuals], _values(weights)
        )
        backward = getattr(self, f"_backward_{rule(layer.type.name)}")
        maps = (in_values, out_values)  # the float64 maps, for the rules' variance passes
        return backward(layer, module, inputs, outputs, out_residuals, weights, values, maps)

    def _forward_weighted(self, layer, module, inputs, weights, values) -> list:
        # var(sum w*x) = sum w^2 var(x) + sum x^2 (var(w) + c w^2), c from the sum's length.
        squares = _squares(weights)
        c = self._sum_of_products(layer.fan_in + 1)  # the bias too
        scaled = {k: _scaled(weights[k].var, c, squares[k]) for k in squares}
        x = inputs[0]
        var = passes.forward_sum(layer, module, ((x.var, squares), (x.value**2, scaled)))
        var += weights["biases"].var
        return [self._stored(values[0], var)]

    def _backward_weighted(
        self, layer, module, inputs, outputs, out_residuals, weights, values, maps
    ):
        r = out_residuals[0]
        squares = _squares(weights)
        c = self._sum_of_products(layer.fan_out)
        scaled = {k: _scaled(weights[k].var, c, squares[k]) for k in squares}
        pairs = ((r.var, squares), (r.value**2, scaled))
        var = passes.backward_sum(layer, module, maps, pairs)
        return [self._stored(values[0], var)]

    def _forward_relu(self, layer, module, inputs, weights, values) -> list:
        x = inputs[0]

        def chain(value, var):
            through = (value > 0) | _uncertain(value, var)
            return array_namespace(var).where(through, var, 0.0)

        var = elementwise(chain, x.value, x.var)
        return [ValueAndVariance(values[0], var, x.storage, x.underflow)]

    def _backward_relu(self, layer, module, inputs, outputs, out_residuals, weights, values, maps):
        x, r = inputs[0], out_residuals[0]

        def chain(value, var, residual, residual_var):
            flipped = _uncertain(value, var)
            xp = array_namespace(value)
            return xp.where(value > 0, residual_var, 0.0) + xp.where(
                flipped, (xp.abs(residual) + xp.sqrt(residual_var)) ** 2, 0.0
            )

        var = elementwise(chain, x.value, x.var, r.value, r.var)
        return [ValueAndVariance(values[0], var, r.storage, r.underflow)]

    def _forward_maxpool(self, layer, module, inputs, weights, values) -> list:
        # max is 1-Lipschitz: its error is at most the largest error in the window.
        x = inputs[0]
        return [
            ValueAndVariance(
                values[0], module.forward(layer, [x.var], {})[0], x.storage, x.underflow
            )
        ]

    def _backward_maxpool(
        self, layer, module, inputs, outputs, out_residuals, weights, values, maps
    ):
        # Overlapping windows add their residuals at a shared maximum: that sum rounds.
        r = out_residuals[0]
        in_values, out_values = maps
        c = self._sum_of_products(window_overlap(layer.params))
        # The residual's variance and its square routed together, the maxima found once.
        routed_var, routed_square = module.route(
            layer, in_values[0], out_values[0], [r.var, r.value**2]
        )
        var = _maxpool_residual_var(layer, inputs[0], outputs[0], r, routed_var)
        return [self._stored(values[0], var + c * routed_square)]

    def _forward_avgpool(self, layer, module, inputs, weights, values) -> list:
        window = layer.params["Rx"] * layer.params["Ry"]
        x = inputs[0]
        c = self._sum_of_products(window)
        if self.carried:
            # A weight's carried error is the same at every position its map reads it, so
            # the window's errors may not average out: they are bounded as if fully
            # correlated, var(mean e) <= (mean sd(e))^2 (Cauchy-Schwarz); the sum's rounding
            # stays independent. A decision an update followed the other way (a ReLU or
            # a maximum at a near tie) moves the map's errors together this way.
            spread = module.forward(layer, [array_namespace(x.var).sqrt(x.var)], {})[0]
            var = spread**2 + module.forward(layer, [c * x.value**2], {})[0] / window
        else:
            var = module.forward(layer, [x.var + c * x.value**2], {})[0] / window
        magnitude = module.forward(layer, [array_namespace(x.value).abs(x.value)], {})[0]
        return [self._stored(values[0], var + self._drift(window, values[0], magnitude))]

    def _backward_avgpool(
        self, layer, module, inputs, outputs, out_residuals, weights, values, maps
    ):
        r = out_residuals[0]
        in_values, out_values = maps
        window = layer.params["Rx"] * layer.params["Ry"]
        c = self._sum_of_products(window_overlap(layer.params) + 1)
        var = module.backward(layer, in_values, out_values, [r.var + c * r.value**2], {})[0]
        return [self._stored(values[0], var / window)]

    def _forward_eltwise(self, layer, module, inputs, weights, values) -> list:
        return [self._stored(values[0], inputs[0].var + inputs[1].var)]

    def _backward_eltwise(
        self, layer, module, inputs, outputs, out_residuals, weights, values, maps
    ):
        r = out_residuals[0]
        return [r, r]

    def _forward_moved(self, layer, module, inputs, weights, values) -> list:
        # The layer moves values: the errors move with them.
        variances = module.forward(layer, [x.var for x in inputs], {})
        x = inputs[0]
        return [
            ValueAndVariance(v, var, x.storage, x.underflow)
            for v, var in zip(values, variances, strict=True)
        ]

    def _backward_moved(self, layer, module, inputs, outputs, out_residuals, weights, values, maps):
        in_values, out_values = maps
        variances = module.backward(
            layer, in_values, out_values, [o.var for o in out_residuals], {}
        )
        r = out_residuals[0]
        return [
            ValueAndVariance(v, var, r.storage, r.underflow)
            for v, var in zip(values, variances, strict=True)
        ]

    # gradient and update -------------------------------------------------------------
    def gradient(
        self, layer: Layer, inputs: list[ValueAndVariance], out_residuals: list[ValueAndVariance]
    ) -> dict[str, ValueAndVariance]:
        batch = inputs[0].shape[0]
        return self.gradient_total(
            layer, self.gradient_part(layer, inputs, out_residuals, batch), batch
        )

    def gradient_part(
        self,
        layer: Layer,
        inputs: list[ValueAndVariance],
        out_residuals: list[ValueAndVariance],
        batch: int,
    ) -> dict[str, GradientPart]:
        """The sums over these images that a gradient over ``batch`` images is made of: a
        slice's parts add up to the whole batch's (``executor.train_in_slices``)."""
        module = MODULES[layer.type.name]
        x, r = inputs[0], out_residuals[0]
        xp = array_namespace(x.value)
        values = module.gradient(layer, [x.value], [r.value])
        c = self._sum_of_products(_gradient_length(layer, batch))
        # Residual errors are not independent across positions: global average pooling
        # hands one error to every position of its window, and a sum over the positions
        # adds them coherently. Their term is bounded as if fully correlated:
        # (sum |x| sd(r))^2 >= var(sum x e_r) whatever the correlation (Cauchy-Schwarz).
        # ``magnitude``, sum |x| |r|, reads the same map: one pass gives both.
        coherent, magnitude = passes.gradient_pair(
            layer, module, xp.abs(x.value), (xp.sqrt(r.var), xp.abs(r.value))
        )
        # The input's error, sum var(x) r^2, and the sum's rounding, c sum x^2 r^2, are one
        # pass: a gradient is linear in its map. A bias gradient reads no map: its part is
        # the rounding alone, c sum r^2 (``gradient_total``).
        read = module.gradient(layer, [x.var + c * x.value**2], [r.value**2])
        return {
            name: GradientPart(value, magnitude[name], read[name], coherent[name])
            for name, value in values.items()
        }

    def gradient_total(
        self, layer: Layer, parts: dict[str, GradientPart], batch: int
    ) -> dict[str, ValueAndVariance]:
        """The gradient over ``batch`` images from its parts, summed over the batch."""
        length = _gradient_length(layer, batch)
        c = self._sum_of_products(length)
        out = {}
        u, tiny = self.master.storage, self.master.underflow
        for name, part in parts.items():

            def chain(value, magnitude, read, coherent, biases=name == "biases"):
                summed = c * read if biases else read
                var = coherent**2 + summed + self._drift(length, value, magnitude)
                return var + (u * value) ** 2 + tiny**2  # stored in the master type

            var = elementwise(chain, *part)
            out[name] = ValueAndVariance(part.value, var, u, tiny)
        return out

    def update(
        self,
        layer: Layer,
        weights: dict[str, ValueAndVariance],
        grads: dict[str, ValueAndVariance],
        batch: int,
    ) -> None:
        u, tiny = self.master.storage, self.master.underflow

        def chain(w, w_var, grad, grad_var):
            value = w + grad / batch
            # Two roundings, in the master type: the division by B and the addition.
            return value, w_var + grad_var / batch**2 + 2 * ((u * value) ** 2 + tiny**2)

        for name, grad in grads.items():
            w = weights[name]
            value, var = elementwise(chain, w.value, w.var, grad.value, grad.var)
            weights[name] = ValueAndVariance(value, var, u, tiny)


def _values(weights: Mapping[str, ValueAndVariance]) -> dict[str, Array]:
    return {name: w.value for name, w in weights.items()}


def _squares(weights: Mapping[str, ValueAndVariance]) -> dict[str, Array]:
    return {
        name: elementwise(lambda v: v**2, w.value)
        for name, w in weights.items()
        if name != "biases"
    }


def _scaled(var: Array, c: float, square: Array) -> Array:
    """A weight's error variance and its products' rounding, ``var + c w^2``."""
    return elementwise(lambda var, square: var + c * square, var, square)


def _uncertain(value: Array, var: Array) -> Array:
    """Where an implementation's value may lie on the other side of 0 from the reference."""
    xp = array_namespace(value)
    return (var > 0) & (xp.abs(value) <= UNCERTAINTY * xp.sqrt(var))


def _gradient_length(layer: Layer, batch: int) -> int:
    """Products summed into one weight gradient: every output position of the batch."""
    x_out, y_out, _ = layer.out_shapes[0]
    return batch * x_out * y_out


def _maxpool_residual_var(
    layer: Layer, x: ValueAndVariance, out: ValueAndVariance, r: ValueAndVariance, routed: Array
) -> Array:
    """Max pooling backward: errors of routed residuals (``routed``, the residual's variance
    routed to the maxima), and windows whose choice may differ.

    A window's choice is uncertain when a second position (padding included) is within
    ``UNCERTAINTY`` deviations of the maximum and one of them carries an error; then every
    such in-bounds position may receive or lose the window's whole residual. On NumPy a
    part of the batch on each of the pool's threads.
    """
    values, variances = pad(x.value, layer), pad(x.var, layer)
    xp, on = array_namespace(x.value), device(x.value)
    moved = xp.zeros_like(values)
    windows = list(offsets(layer))

    def part(span: slice) -> None:
        value, var = values[span], variances[span]
        maximum, maximum_var = out.value[span], out.var[span]
        near, erring = [], xp.zeros(maximum.shape, dtype=xp.bool, device=on)
        count = xp.zeros(maximum.shape, dtype=xp.int64, device=on)
        for _, _, index in windows:
            spread = var[index] + maximum_var
            close = xp.abs(value[index] - maximum) <= UNCERTAINTY * xp.sqrt(spread)
            near.append((index, close))
            count += xp.astype(close, xp.int64)
            erring |= close & (spread > 0)
        contested = (count >= 2) & erring
        share = xp.where(contested, (xp.abs(r.value[span]) + xp.sqrt(r.var[span])) ** 2, 0.0)
        into = moved[span]
        for index, close in near:
            into[index] += xp.where(close, share, 0.0)

    split(batch_parts(values, math.prod(values.shape) * len(windows)), part)
    return routed + crop(moved, layer)
