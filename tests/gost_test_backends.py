"""Third-party backends for the plugin's tests, each breaking one thing a real one might.

Not a test file: the tests copy it into a pytester directory as ``mymod.py`` (or next to an
``mpirun`` run), so that a run names these classes on its command line as a user names
their own backend, ``--gost-backend=mymod:Class``.
"""

import dataclasses
import functools
import inspect
import os
import queue
import sys
import threading
import time

import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.backends.numpy.integer import IntegerKernels
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.fixed_point import INTEGER_TYPES


class Mine(NumpyBackend):
    """Breaks nothing: the NumPy backend under a third party's name."""

    name = "mine"


class NotABackend:
    """Has a name, but does not subclass pytest_gostcnn.backend.Backend."""

    name = "not-a-backend"


class Nameless(NumpyBackend):
    """Its name is empty, as a class that forgot to set one."""

    name = ""


class Versionless(NumpyBackend):
    """Its version is empty."""

    version = ""


class NoDevice(NumpyBackend):
    """Unavailable: it finds no device, as a GPU backend on a machine without one."""

    @classmethod
    def unavailable_reason(cls):
        return "no CUDA device"


class ProbeRaises(NumpyBackend):
    """Its availability check fails the way a GPU runtime without a device does."""

    @classmethod
    def unavailable_reason(cls):
        raise RuntimeError("cudaErrorNoDevice")


class RaisesOnRelu(NumpyBackend):
    """Raises in every relu layer's forward step, as a missing kernel would."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "relu":
            raise RuntimeError("relu kernel missing")
        return super().forward(layer, inputs, weights)


class ReturnsNaN(NumpyBackend):
    """Every forward output is NaN."""

    def forward(self, layer, inputs, weights):
        return [np.full_like(out, np.nan) for out in super().forward(layer, inputs, weights)]


class Float64(NumpyBackend):
    """Computes right, but hands arrays back as float64 where float32 was asked for."""

    def to_device(self, host):
        return np.array(host, dtype=np.float64)

    def to_host(self, array):
        return np.asarray(array, dtype=np.float64)


class ScaledConv(NumpyBackend):
    """Every conv output 0.1 % too large: an error that depends on the drawn data."""

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if layer.type.name == "conv":
            outputs = [out * np.float32(1.001) for out in outputs]
        return outputs


class ScaledConvOnCell3(ScaledConv):
    """ScaledConv on the device of a node's cell 3 only (a faulty GPU 3, say)."""

    def forward(self, layer, inputs, weights):
        if self.cell == 3:
            return super().forward(layer, inputs, weights)
        return NumpyBackend.forward(self, layer, inputs, weights)


class PeakRaises(NumpyBackend):
    """Its peak() raises."""

    def peak(self):
        raise RuntimeError("peak boom")


class PeakIsANumber(NumpyBackend):
    """Its peak() is a bare number of MAC/s, not a Peak."""

    def peak(self):
        return 1e12


class PeakTiny(NumpyBackend):
    """Its peak() is a Peak below 1 MAC/s."""

    def peak(self):
        return Peak(1e-300, "estimated")


class DeviceRaises(NumpyBackend):
    """Its device() raises, as a device query after the driver went away does."""

    def device(self):
        raise RuntimeError("nvml gone")


class SystemNotJson(NumpyBackend):
    """Its system() holds an object the JSON report cannot take."""

    def system(self):
        return {"handle": object()}


class SystemSpoofs(NumpyBackend):
    """Its system() tries to replace the report's own backend facts (name, device)."""

    def system(self):
        return {"name": "spoofed", "device": "spoofed", "driver": "1.2.3"}


class WrongSign(NumpyBackend):
    """Training's weight update has the wrong sign: W -= W_D / B, where the standard adds."""

    def update(self, layer, weights, grads, batch):
        for name, grad in grads.items():
            weights[name] -= grad / batch


# Under mpirun: Open MPI's rank variable tells the cell.


class RaisesOnCell1(NumpyBackend):
    """Verifies on both cells; on cell 1 its whole-network inference raises when timed."""

    def infer(self, network, weights, image):
        if os.environ.get("OMPI_COMM_WORLD_RANK") == "1" and image.shape[0] == 1 and self.timing:
            raise RuntimeError("device lost")
        return super().infer(network, weights, image)

    timing = False

    def to_device(self, host):
        # Benchmark images arrive as float32 from the image set; verification's as float64.
        RaisesOnCell1.timing = host.dtype == "float32"
        return super().to_device(host)


def _loading_for_rounds() -> bool:
    """Whether the weights being loaded are a timed test's (the suite's rounds load them),
    not a verification's: read from the call stack, as a test double may."""
    here = os.path.join("performance", "rounds.py")
    return any(frame.filename.endswith(here) for frame in inspect.stack(0))


class RaisesLoadingOnCell1(NumpyBackend):
    """Verifies on both cells; on cell 1 loading a timed test's weights raises."""

    def load_weights(self, network, host):
        if os.environ.get("OMPI_COMM_WORLD_RANK") == "1" and _loading_for_rounds():
            raise RuntimeError("out of device memory")
        return super().load_weights(network, host)


class StallsLoadingOnCell1(NumpyBackend):
    """Verifies on both cells; on cell 1 loading a timed test's weights never returns, as a
    hung device's load does."""

    def load_weights(self, network, host):
        while os.environ.get("OMPI_COMM_WORLD_RANK") == "1" and _loading_for_rounds():
            time.sleep(60)
        return super().load_weights(network, host)


class FailsOnCell1(NumpyBackend):
    """Correct on cell 0; on cell 1 every forward output is off by one."""

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
            outputs = [o + 1 for o in outputs]
        return outputs


# Right while verified, wrong while timed: the checked rounds (standard.md §7.7) must catch
# each. Section 8's images arrive as float64; a benchmark's come from the image set as
# float32, which is how these backends tell the two apart.


class _TimedCheat(NumpyBackend):
    """Notes whether the data it is given are a benchmark's (float32 images)."""

    timed = False

    def to_device(self, host):
        if host.ndim == 4 and len(host) > 0:  # an image batch or an output residual
            self.timed = self.timed or host.dtype == np.float32
        return super().to_device(host)


class StallsOnCell1(_TimedCheat):
    """Verifies on both cells; on cell 1 its whole-network inference never returns from its
    third timed call (the warm-up round, timed round 1, then timed round 2), as a hung
    device's does."""

    stalls = "1"  # the rank
    timed_calls = 0

    def infer(self, network, weights, image):
        if os.environ.get("OMPI_COMM_WORLD_RANK") == self.stalls and self.timed:
            self.timed_calls += 1
            while self.timed_calls == 3:
                time.sleep(60)
        return super().infer(network, weights, image)


class StallsOnCell0(StallsOnCell1):
    """As StallsOnCell1, on cell 0."""

    stalls = "0"


class CachesAnswer(NumpyBackend):
    """Computes its first two whole-network calls of each network (verification, the
    warm-up round), then answers every later call with the last answer it computed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: dict[str, int] = {}  # by network
        self.answers: dict[str, object] = {}

    def _answer(self, network, compute):
        self.calls[network.latin] = self.calls.get(network.latin, 0) + 1
        if self.calls[network.latin] <= 2:
            self.answers[network.latin] = compute()
        return self.answers[network.latin]

    def infer(self, network, weights, image):
        return self._answer(
            network, lambda: super(CachesAnswer, self).infer(network, weights, image)
        )

    def train(self, network, weights, image, out_residual):
        return self._answer(
            network, lambda: super(CachesAnswer, self).train(network, weights, image, out_residual)
        )


class SkipsLayerWhenTimed(_TimedCheat):
    """Once timed, it skips every ReLU: the layer's output is its input."""

    def forward(self, layer, inputs, weights):
        if self.timed and layer.type.name == "relu":
            return [inputs[0].copy()]
        return super().forward(layer, inputs, weights)


class LowPrecisionWhenTimed(_TimedCheat):
    """Once timed, it keeps every layer's output in float16 precision (stored as float32)."""

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if self.timed:
            outputs = [o.astype(np.float16).astype(np.float32) for o in outputs]
        return outputs


class SkipsUpdateWhenTimed(_TimedCheat):
    """Once timed, it leaves the weights as they were (no W += W_D / B)."""

    def update(self, layer, weights, grads, batch):
        if not self.timed:
            super().update(layer, weights, grads, batch)


class IgnoresFcBias(NumpyBackend):
    """Every fully connected layer forgets its biases."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "fc":
            weights = {**weights, "biases": np.zeros_like(weights["biases"])}
        return super().forward(layer, inputs, weights)


class ReluBackwardFromOut(NumpyBackend):
    """Its ReLU backward masks OUT_D by OUT > 0 rather than IN > 0: the same values, read
    from OUT, which ReLU's backward is not given (docs/backends.md)."""

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        if layer.type.name != "relu":
            return super().backward(layer, inputs, outputs, out_residuals, weights)
        return [np.where(outputs[0] > 0, out_residuals[0], np.float32(0))]


# Work that escapes the timed region unless the round ends when its results are delivered
# (standard.md §7, third release): each computes right, so it verifies correct and passes
# its checks; only the time tells.


class _Pending:
    """A result that is not there yet: ``value`` is set when its work has run."""

    def __init__(self, shape):
        self.shape = shape  # the executor checks shapes; these come from the call
        self.value = None


def _pending_result(network, image, mode):
    """Placeholders for what ``infer`` or ``train`` returns, before its work has run."""
    batch = image.shape[0]
    output = _Pending((batch, *network.output_shape))
    if mode == "inference":
        return output
    gradients = {
        layer.number: {name: _Pending(shape) for name, shape in layer.weight_shapes.items()}
        for layer in network.weight_layers
    }
    return executor.TrainingResult(output, _Pending((batch, *network.input_shape)), gradients)


def _fill(pending, computed):
    """Put what the work computed into its placeholders."""
    if isinstance(pending, _Pending):
        pending.value = computed
        return
    pending.output.value = computed.output
    pending.input_residual.value = computed.input_residual
    for number, grads in pending.gradients.items():
        for name, placeholder in grads.items():
            placeholder.value = computed.gradients[number][name]


class ComputesWhenRead(NumpyBackend):
    """A lazy framework: ``infer`` and ``train`` only note the call; the work runs, in
    order, when ``to_host`` reads any array (a result or a weight it updates)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.queued = []

    def _queue(self, network, image, mode, compute):
        pending = _pending_result(network, image, mode)
        self.queued.append((pending, compute))
        return pending

    def infer(self, network, weights, image):
        parent = super()
        return self._queue(
            network, image, "inference", lambda: parent.infer(network, weights, image)
        )

    def train(self, network, weights, image, out_residual):
        parent = super()
        return self._queue(
            network,
            image,
            "training",
            lambda: parent.train(network, weights, image, out_residual),
        )

    def to_host(self, array):
        while self.queued:
            pending, compute = self.queued.pop(0)
            _fill(pending, compute())
        return np.asarray(array.value if isinstance(array, _Pending) else array)


class NoSynchronize(NumpyBackend):
    """An asynchronous device whose author forgot ``synchronize``: the work runs on a worker
    thread, and ``to_host`` waits for the queue, as a copy on a CUDA stream does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stream = queue.Queue()
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self):
        while True:
            pending, compute = self.stream.get()
            try:
                _fill(pending, compute())
            finally:
                self.stream.task_done()

    def infer(self, network, weights, image):
        pending = _pending_result(network, image, "inference")
        parent = super()
        self.stream.put((pending, lambda: parent.infer(network, weights, image)))
        return pending

    def train(self, network, weights, image, out_residual):
        pending = _pending_result(network, image, "training")
        parent = super()
        self.stream.put((pending, lambda: parent.train(network, weights, image, out_residual)))
        return pending

    def to_host(self, array):
        self.stream.join()
        return np.asarray(array.value if isinstance(array, _Pending) else array)


class _Node:
    """One kernel's deferred result: ``compute(*values of args)``, run when read."""

    __slots__ = ("shape", "compute", "args", "value", "done")

    def __init__(self, shape, compute, args):
        self.shape, self.compute, self.args = tuple(shape), compute, list(args)
        self.value, self.done = None, False

    def __add__(self, other):  # the executor sums residuals at a fan-out
        return _Node(self.shape, np.add, [self, other])


def _evaluated(node):
    """The value of ``node``, running what it needs first (without recursion: a round's
    graph is as deep as its network's steps)."""
    if not isinstance(node, _Node):
        return node
    stack = [node]
    while stack:
        top = stack[-1]
        if top.done:
            stack.pop()
            continue
        waiting = [a for a in top.args if isinstance(a, _Node) and not a.done]
        if waiting:
            stack.extend(waiting)
            continue
        top.value = top.compute(*[a.value if isinstance(a, _Node) else a for a in top.args])
        top.done, top.args = True, []  # what it read may go
        stack.pop()
    return node.value


class DefersEachStep(NumpyBackend):
    """Defers every step until something reads its result: each kernel returns a node of a
    graph, and ``to_host`` runs only the steps the array it reads depends on. A step whose
    result nobody reads is never run: a training round's residual at the network input,
    unless it is read."""

    def _deferred(self, shapes, step, arrays, weights):
        names = list(weights)

        def compute(*values):
            given = values[len(arrays) :]
            return step(list(values[: len(arrays)]), dict(zip(names, given, strict=True)))

        whole = _Node((), compute, [*arrays, *weights.values()])
        return [
            _Node(shape, lambda outputs, i=i: outputs[i], [whole]) for i, shape in enumerate(shapes)
        ]

    def forward(self, layer, inputs, weights):
        batch = inputs[0].shape[0]
        shapes = [(batch, *s) for s in layer.out_shapes]
        parent = super()
        return self._deferred(shapes, lambda xs, ws: parent.forward(layer, xs, ws), inputs, weights)

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        batch = out_residuals[0].shape[0]
        shapes = [(batch, *s) for s in layer.in_shapes]
        parent = super()
        n_in, n_out = len(inputs), len(outputs)

        def step(xs, ws):
            ins, outs, res = xs[:n_in], xs[n_in : n_in + n_out], xs[n_in + n_out :]
            return parent.backward(layer, ins, outs, res, ws)

        return self._deferred(shapes, step, [*inputs, *outputs, *out_residuals], weights)

    def gradient(self, layer, inputs, out_residuals):
        names = list(layer.weight_shapes)
        parent = super()

        def step(xs, ws):
            grads = parent.gradient(layer, xs[: len(inputs)], xs[len(inputs) :])
            return [grads[name] for name in names]

        nodes = self._deferred(
            list(layer.weight_shapes.values()), step, [*inputs, *out_residuals], {}
        )
        return dict(zip(names, nodes, strict=True))

    def update(self, layer, weights, grads, batch):
        for name, grad in grads.items():
            weights[name] = _Node(
                weights[name].shape, lambda w, g: w + g / np.float32(batch), [weights[name], grad]
            )

    def to_host(self, array):
        return np.asarray(_evaluated(array))


class HonestWhenWatched(NumpyBackend):
    """Honest right after its weights were loaded or read back (section 8's iteration, the
    warm-up, a weight copy before a round); otherwise it returns its last answer."""

    skips = "answer"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.watched, self.loaded, self.last, self.skipping = False, {}, None, False

    def load_weights(self, network, host):
        self.watched = True
        self.loaded = super().load_weights(network, host)
        return self.loaded

    def to_host(self, array):
        if any(array is a for ws in self.loaded.values() for a in ws.values()):
            self.watched = True
        return super().to_host(array)

    def train(self, network, weights, image, out_residual):
        honest, self.watched = self.watched, False
        if not honest and self.skips == "answer" and self.last is not None:
            return self.last
        self.skipping = not honest
        self.last = super().train(network, weights, image, out_residual)
        return self.last

    def update(self, layer, weights, grads, batch):
        if not self.skipping:
            super().update(layer, weights, grads, batch)


class SkipsUpdateUnlessWatched(HonestWhenWatched):
    """As HonestWhenWatched, but computes every round and leaves out the update unless its
    weights were just loaded or read."""

    skips = "update"


class SkipsFirstUpdateAfterLoad(NumpyBackend):
    """Leaves out its first weighted layer's update in every round but the first after its
    weights were loaded: right in section 8's iteration and in a segment's first round,
    and a weight array wrong by one more update in each round after."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded, self.skipping, self.first = False, False, None

    def load_weights(self, network, host):
        self.loaded = True
        return super().load_weights(network, host)

    def train(self, network, weights, image, out_residual):
        self.skipping, self.loaded = not self.loaded, False
        self.first = network.weight_layers[0].number
        return super().train(network, weights, image, out_residual)

    def update(self, layer, weights, grads, batch):
        if not (self.skipping and layer.number == self.first):
            super().update(layer, weights, grads, batch)


class DoublesAnUpdate(_TimedCheat):
    """Once timed, doubles its first weighted layer's update in timed round ``wrong`` (the
    warm-up is call 1) and is right in every other round."""

    wrong = 2

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.first = 0, None

    def train(self, network, weights, image, out_residual):
        self.calls += self.timed
        self.first = network.weight_layers[0].number
        return super().train(network, weights, image, out_residual)

    def update(self, layer, weights, grads, batch):
        super().update(layer, weights, grads, batch)
        if self.calls == self.wrong + 1 and layer.number == self.first:
            super().update(layer, weights, grads, batch)


class ZeroesHalfAChannelBank(DoublesAnUpdate):
    """Once timed, after its update in timed round ``wrong`` zeroes half the output channels
    of its first weighted layer (filters and biases): a state cheaper to go on from, whose
    channels stay dead (ReLU passes no residual at 0), so each later round is consistent
    with it; right otherwise."""

    def update(self, layer, weights, grads, batch):
        NumpyBackend.update(self, layer, weights, grads, batch)
        if self.calls == self.wrong + 1 and layer.number == self.first:
            for array in weights.values():
                array[: len(array) // 2] = 0


class SkipsAnInputResidual(DoublesAnUpdate):
    """Once timed, hands back zeros for the input residual of timed round ``wrong``, as if
    it left out the backward step to the network's input there (it forces nothing that
    round's gradients or update need), and is right in every other round."""

    def train(self, network, weights, image, out_residual):
        result = super().train(network, weights, image, out_residual)
        if self.calls == self.wrong + 1:
            zeros = np.zeros_like(result.input_residual)
            return dataclasses.replace(result, input_residual=zeros)
        return result

    def update(self, layer, weights, grads, batch):
        NumpyBackend.update(self, layer, weights, grads, batch)


@functools.cache
def _torch_backends():
    # Built on first use: PyTorch must not load when this module is imported, for an
    # in-process pytester run drops the modules it loaded, and PyTorch cannot load twice.
    import torch
    import torch.nn.functional as F

    from pytest_gostcnn.backends.torch import TorchBackend
    from pytest_gostcnn.backends.torch.arithmetic import Arithmetic
    from pytest_gostcnn.backends.torch.integer import Int8Kernels
    from pytest_gostcnn.backends.torch.kernels import TorchKernels, nchw, to_map

    class TorchNativeMaxPool(TorchBackend):
        """PyTorch's own max pooling: padding is -inf, not 0 (docs/standard.md §4), and its
        backward (autograd) sends OUT_D to one of tied maxima, not to every one."""

        def _pool(self, layer, x):
            p = layer.params
            return F.max_pool2d(x, (p["Rx"], p["Ry"]), p["S"], (p["Px"], p["Py"]))

        def forward(self, layer, inputs, weights):
            if layer.type.name != "maxpool":
                return super().forward(layer, inputs, weights)
            return [
                self._pool(layer, inputs[0].permute(0, 3, 1, 2)).permute(0, 2, 3, 1).contiguous()
            ]

        def backward(self, layer, inputs, outputs, out_residuals, weights):
            if layer.type.name != "maxpool":
                return super().backward(layer, inputs, outputs, out_residuals, weights)
            x = inputs[0].permute(0, 3, 1, 2).detach().requires_grad_()
            self._pool(layer, x).backward(out_residuals[0].permute(0, 3, 1, 2))
            return [x.grad.permute(0, 2, 3, 1).contiguous()]

    class _SumsInTheType(TorchKernels):
        def _conv(self, layer, x, filters, biases, groups):
            # Every product and every partial sum of a convolution rounded to the storage
            # type, one window element and channel after another.
            if groups != 1:
                return super()._conv(layer, x, filters, biases, groups)
            p, kind = layer.params, self.arithmetic.storage
            cols = F.unfold(
                nchw(x).to(kind), (p["Rx"], p["Ry"]), padding=(p["Px"], p["Py"]), stride=p["S"]
            )
            matrix = filters.reshape(filters.shape[0], -1).to(kind)
            out = biases.to(kind)[None, :, None].expand(x.shape[0], -1, cols.shape[2])
            for k in range(matrix.shape[1]):
                out = out + matrix[None, :, k, None] * cols[:, None, k, :]
            x_out, y_out, features = layer.out_shapes[0]
            return [to_map(out.reshape(x.shape[0], features, x_out, y_out))]

    class TorchHalfSums(TorchBackend):
        """float16 or bfloat16 whose convolutions sum in the type itself, not in float32."""

        def __init__(self, dtype="float16", cell=0, options=None):
            super().__init__(dtype, cell, {"device": "cpu"})
            self.kernels = _SumsInTheType(self.arithmetic)

    class TorchNoMasterCopy(TorchBackend):
        """float16 training with no float32 master copy: each updated weight is rounded to
        float16 (held in float32, so that its type does not give it away)."""

        def __init__(self, dtype="float16", cell=0, options=None):
            super().__init__(dtype, cell, {"device": "cpu"})

        def update(self, layer, weights, grads, batch):
            for name, grad in grads.items():
                new = weights[name].float() + grad.float() / batch
                weights[name] = new.to(torch.float16).float()

    class TorchTf32OnCpu(TorchBackend):
        """The tf32 kernels on the CPU: float32 arithmetic on factors rounded to TF32 is
        exactly the tensor cores' (two 11-bit significands multiply exactly in float32)."""

        arithmetic_class = Arithmetic

        def __init__(self, dtype="tf32", cell=0, options=None):
            super().__init__("float32", cell, {"device": "cpu"})
            self.dtype = "tf32"
            self.arithmetic = self.arithmetic_class.of("tf32", self.torch_device)
            self.kernels = TorchKernels(self.arithmetic)

    class TorchInt8Fbgemm(TorchBackend):
        """int8 on PyTorch's fbgemm engine, not QNNPACK: without VNNI it multiplies with
        VPMADDUBSW, which saturates each pair of products at int16."""

        def __init__(self, dtype="int8", cell=0, options=None):
            super().__init__(dtype, cell, {"device": "cpu"})
            self.integer = type("Fbgemm", (Int8Kernels,), {"engine": "fbgemm"})()

    class _Truncating(Arithmetic):
        def factor(self, a):
            bits = a.float().contiguous().view(torch.int32) & ~0x1FFF
            return bits.view(torch.float32)

    class TorchTf32Truncated(TorchTf32OnCpu):
        """tf32 whose factors lose their low 13 bits (truncated) instead of being rounded
        to nearest, as tensor cores do to float32 operands."""

        arithmetic_class = _Truncating

    return {
        cls.__name__: cls
        for cls in (
            TorchNativeMaxPool,
            TorchHalfSums,
            TorchNoMasterCopy,
            TorchTf32OnCpu,
            TorchTf32Truncated,
            TorchInt8Fbgemm,
        )
    }


def __getattr__(name):
    """The classes that need PyTorch (``TorchNativeMaxPool``, ...), made when asked for."""
    if name.startswith("Torch"):
        found = _torch_backends().get(name)
        if found is not None:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Integer inference (docs/standard.md §6): the NumPy backend's int8/int16 kernels with one
# mistake each; tests/test_mutants.py holds that each fails by ten times its СКОП.


class _IntegerMutant(NumpyBackend):
    """The NumPy backend in an integer type, its kernels replaced by ``kernels``."""

    kernels = IntegerKernels

    def __init__(self, dtype="int8", cell=0, threads=None):
        super().__init__(dtype, cell, threads)
        self.integer = self.kernels(INTEGER_TYPES[dtype], self.workspace)


class _WrapsAround(IntegerKernels):
    def requantise(self, values, multiplier):
        q = np.rint(np.multiply(values, multiplier, dtype=np.float64))
        return q.astype(np.int64).astype(self.itype.storage)  # two's-complement wrap


class WrapsAround(_IntegerMutant):
    """Requantisation without saturation: a value past the range wraps around."""

    kernels = _WrapsAround


class _RoundsDown(IntegerKernels):
    def requantise(self, values, multiplier):
        q = np.floor(np.multiply(values, multiplier, dtype=np.float64))
        return np.clip(q, self.itype.smallest, self.itype.largest).astype(self.itype.storage)


class RoundsDown(_IntegerMutant):
    """Requantisation rounds down (floor) instead of to nearest."""

    kernels = _RoundsDown


class _Int16Accumulator(IntegerKernels):
    def accumulate(self, layer, x, weights):
        sums = super().accumulate(layer, x, weights).astype(np.int64)
        return (sums + 2**15) % 2**16 - 2**15  # an int16 register, overflowing


class Int16Accumulator(_IntegerMutant):
    """int8 sums of products kept in an int16 accumulator, which overflows."""

    kernels = _Int16Accumulator


class _BiasAtOutputScale(IntegerKernels):
    def weighted(self, layer, x, weights, scales):
        biases = weights["biases"]
        sums = self.accumulate(layer, x, {**weights, "biases": np.zeros_like(biases)})
        multiplier = scales.weights["biases"] / scales.outputs[0]
        return self.requantise(sums * multiplier + biases, 1.0)


class BiasAtOutputScale(_IntegerMutant):
    """The integer biases (at s_in*s_w) added as if they were at the output's scale."""

    kernels = _BiasAtOutputScale


class WrongScaleOnOneRow(NumpyBackend):
    """The first row with weights requantises to twice its output scale (a stale entry of
    the scale table): that one map is half its value."""

    def forward(self, layer, inputs, weights):
        first = min(n for n, s in self.scales.items() if len(s.weights))
        if self.integer is not None and layer.number == first:
            scales = self.scales[layer.number]
            wrong = dataclasses.replace(scales, outputs=(2 * scales.outputs[0],))
            return self.integer.forward(layer, inputs, weights, wrong)
        return super().forward(layer, inputs, weights)


# What a round delivers and when its check is drawn (standard.md §7.7, fourth release): each
# of these computes right while verified; once timed, each breaks one guard.


class _WhileTimed(NumpyBackend):
    """Notes whether the images it was given last are a benchmark's (float32), not section
    8's (float64)."""

    timed = False

    def to_device(self, host):
        if host.ndim == 4 and len(host) > 0:
            self.timed = host.dtype == np.float32
        return super().to_device(host)


class CopiesOutputLate(_WhileTimed):
    """Once timed, a copy of a round's output to the host nobody waits for (a non-blocking
    copy into pinned memory): ``to_host`` hands back the copy's destination at once and
    fills it at the backend's next call; a later read of the same output returns that
    destination, filled by then."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.output = None  # the output map of the last infer or train
        self.destination = None  # (output, its host copy) once handed back
        self.unfilled = []

    def _complete(self):
        for output, destination in self.unfilled:
            np.copyto(destination, output)
        self.unfilled = []

    def infer(self, network, weights, image):
        self._complete()
        self.output = super().infer(network, weights, image)
        return self.output

    def train(self, network, weights, image, out_residual):
        self._complete()
        result = super().train(network, weights, image, out_residual)
        self.output = result.output
        return result

    def to_host(self, array):
        self._complete()
        if self.destination is not None and array is self.destination[0]:
            return self.destination[1]
        if not self.timed or array is not self.output:
            return super().to_host(array)
        destination = np.zeros_like(array)  # pinned, not yet written
        self.destination = (array, destination)
        self.unfilled.append((array, destination))
        return destination


def _check_ahead():
    """What a backend can learn of its callers' decision: up the stack, every frame's
    locals with a round ``number``, and their attributes named for a check or a pending
    round. True when one of those holds the round now running or a later one of its
    segment (``segment_rounds``: a training round's check replays its segment's earlier
    rounds); False when nothing there tells."""
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            number = getattr(value, "number", None)
            attributes = getattr(value, "__dict__", None)
            if not isinstance(number, int) or not isinstance(attributes, dict):
                continue
            training = getattr(value, "mode", None) == "training"
            length = attributes.get("segment_rounds", 1) if training else 1
            end = ((number - 1) // length + 1) * length
            for name, held in list(attributes.items()):
                if "check" not in name and "pending" not in name:
                    continue
                rounds = held if isinstance(held, tuple | list | set) else (held,)
                if any(isinstance(r, int) and number <= r <= end for r in rounds):
                    return True
        frame = frame.f_back
    return False


class SkipsReluUnlessChecked(_WhileTimed):
    """Once timed, skips every ReLU in a round unless its callers' objects say the round is
    checked (``_check_ahead``): honest exactly where it is checked, if the decision is
    there to read before the round ends."""

    checked = True

    def infer(self, network, weights, image):
        self.checked = not self.timed or _check_ahead()
        return super().infer(network, weights, image)

    def train(self, network, weights, image, out_residual):
        self.checked = not self.timed or _check_ahead()
        return super().train(network, weights, image, out_residual)

    def forward(self, layer, inputs, weights):
        if not self.checked and layer.type.name == "relu":
            return [inputs[0].copy()]
        return super().forward(layer, inputs, weights)


class _Answering(_WhileTimed):
    """Answers each whole-network call through ``_answer(compute)``."""

    def _answer(self, compute):
        return compute()

    def infer(self, network, weights, image):
        parent = super()
        return self._answer(lambda: parent.infer(network, weights, image))

    def train(self, network, weights, image, out_residual):
        parent = super()
        return self._answer(lambda: parent.train(network, weights, image, out_residual))


class RepeatsUnlessChecked(_Answering):
    """Once timed, answers a round with the round before's result, doing no work, unless
    its callers' objects say the round is checked (``_check_ahead``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last = None

    def _answer(self, compute):
        if self.timed and self.last is not None and not _check_ahead():
            return self.last
        self.last = compute()
        return self.last


class WaitsForItsCopies(NoSynchronize):
    """Correct and really asynchronous: the work runs on a worker thread, ``synchronize``
    waits for it, and ``to_host`` queues its copy to a fresh host array behind the work and
    waits for that copy before it returns."""

    def synchronize(self):
        self.stream.join()

    def to_host(self, array):
        copied = _Pending(getattr(array, "shape", ()))
        value = (lambda: array.value) if isinstance(array, _Pending) else (lambda: array)
        self.stream.put((copied, lambda: np.array(value(), copy=True)))
        self.stream.join()
        return copied.value


class _OutputNoted(_WhileTimed):
    """Notes the output map of its last ``infer`` or ``train``."""

    output = None

    def infer(self, network, weights, image):
        self.output = super().infer(network, weights, image)
        return self.output

    def train(self, network, weights, image, out_residual):
        result = super().train(network, weights, image, out_residual)
        self.output = result.output
        return result


class ReturnsAList(_OutputNoted):
    """Once timed, ``to_host`` hands a round's output map back as nested lists."""

    def to_host(self, array):
        host = super().to_host(array)
        return host.tolist() if self.timed and array is self.output else host


class ScribblesOnWhatItDelivered(_OutputNoted):
    """Computes right and hands back its own output map from ``to_host``; once timed, it
    writes NaN into that map at its next call: what it delivered is changed after the
    round."""

    handed = None

    def _scribble(self):
        if self.handed is not None:
            self.handed.fill(np.nan)
            self.handed = None

    def infer(self, network, weights, image):
        self._scribble()
        return super().infer(network, weights, image)

    def train(self, network, weights, image, out_residual):
        self._scribble()
        return super().train(network, weights, image, out_residual)

    def to_host(self, array):
        self._scribble()
        host = super().to_host(array)
        if self.timed and array is self.output:
            self.handed = host
        return host


# Backends that want a better number (standard.md §7.7, fifth release): each is honest
# while verified and once timed cheats where the checks of an earlier release did not look.
# Each skipped round answers with its last output nudged by one ulp, so that no two rounds
# deliver the same bytes and only a check can tell.


def _nudged(array):
    return np.nextafter(array, np.array(np.inf, dtype=array.dtype))


def _above(attribute):
    """The nearest object up the stack with ``attribute`` (what a backend can read of its
    callers: the round loop and its plan)."""
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if attribute in getattr(value, "__dict__", {}):
                return value
        frame = frame.f_back
    return None


class _Skipper(_Answering):
    """Counts its timed rounds (the warm-up is the first); where ``skip(number)`` says so it
    answers with its last answer nudged: inference's output, or training's result with the
    output nudged and no step done (the weights as they were)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.last, self.skipped = 0, None, []

    def skip(self, number):
        return False

    def _answer(self, compute):
        if self.timed:
            self.calls += 1
        number = self.calls - 1  # the warm-up round is 0
        if self.timed and self.last is not None and self.skip(number):
            self.skipped.append(number)
            if isinstance(self.last, executor.TrainingResult):
                self.last = dataclasses.replace(self.last, output=_nudged(self.last.output))
            else:
                self.last = _nudged(self.last)
            return self.last
        self.last = compute()
        return self.last


class SkipsTheMiddle(_Skipper):
    """Skips every timed round between the first ten and the last ten, the test's rounds
    read from its callers' plan: the rounds an earlier release's checks never looked at."""

    def skip(self, number):
        plan = _above("plan").plan
        return 10 < number <= plan.rounds - 10


class ReadsTheDraw(_Skipper):
    """Finds the suite's check draw among the process's objects (the garbage collector) and
    skips each round whose chance to be checked is the lowest it has read: every round,
    when every round's chance is the same and below 1."""

    lowest = 1.0

    def skip(self, number):
        import gc

        chances = [o.chance for o in gc.get_objects() if type(o).__name__ == "CheckDraw"]
        chance = min(chances, default=1.0)
        lowest, self.lowest = self.lowest, min(self.lowest, chance)
        return chance < 1.0 and chance <= lowest


class _Random(_Skipper):
    """Cheats in a random ``share`` of its timed rounds, drawn from its own generator
    (``GOST_TEST_CHEAT_SEED``, else 0), nothing of the suite's read."""

    share = 0.05

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        seed = int(os.environ.get("GOST_TEST_CHEAT_SEED", "0"))
        self.rng = np.random.default_rng(seed)
        self.cheating = False

    def skip(self, number):
        return number >= 1 and self.rng.random() < self.share


class SkipsTwoPercent(_Random):
    """Skips a random 2 % of its timed rounds."""

    share = 0.02


class RepeatsFivePercent(_Random):
    """Answers a random 5 % of its timed rounds with the round before's, nudged, doing no
    work (in training, no update either)."""


class DropsFivePercentOfUpdates(_Random):
    """Computes every training round, but leaves out the update in a random 5 % of them."""

    def _answer(self, compute):
        if self.timed:
            self.calls += 1
        self.cheating = self.timed and self.calls > 1 and self.rng.random() < self.share
        if self.cheating:
            self.skipped.append(self.calls - 1)
        return compute()

    def update(self, layer, weights, grads, batch):
        if not self.cheating:
            super().update(layer, weights, grads, batch)


class Float16FivePercent(DropsFivePercentOfUpdates):
    """Computes a random 5 % of its inference rounds in float16: every layer's output kept
    in float16 precision (stored as float32)."""

    def update(self, layer, weights, grads, batch):
        super(DropsFivePercentOfUpdates, self).update(layer, weights, grads, batch)

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if self.cheating:
            outputs = [o.astype(np.float16).astype(np.float32) for o in outputs]
        return outputs


class WorksInToDevice(NumpyBackend):
    """Runs the network on a round's images while they are handed over (``to_device``) and
    answers ``infer`` with that output at once: every round's work where the hand-over is,
    or every other round's (``every``). Each hand-over's seconds are noted."""

    every = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.network, self.loaded, self.ready = None, None, None
        self.handed, self.worked = 0, []  # images handed over; (seconds) of each that worked

    def load_weights(self, network, host):
        self.network, self.loaded = network, super().load_weights(network, host)
        return self.loaded

    def to_device(self, host):
        given = super().to_device(host)
        images = self.network is not None and host.shape[1:] == self.network.input_shape
        if images and host.dtype == np.float32:
            self.handed += 1
            if self.handed % self.every == 0:
                started = time.perf_counter()
                self.ready = super().infer(self.network, self.loaded, given)
                self.worked.append(time.perf_counter() - started)
        return given

    def infer(self, network, weights, image):
        ready, self.ready = self.ready, None
        return ready if ready is not None else super().infer(network, weights, image)


class WorksInEveryOtherToDevice(WorksInToDevice):
    every = 2


class ComputesItsSegmentAhead(_WhileTimed):
    """When its weights are loaded again at a segment's start, it runs the segment's rounds
    at once on the data it can guess (the last round's images and residual: the next ones'
    are drawn later, from randomness it cannot read) and answers the segment's rounds from
    them, doing no work in the rounds themselves."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen, self.ahead, self.network = None, [], None

    def load_weights(self, network, host):
        timed = self.timed  # loading hands over 4-D float64 filters too
        loaded = super().load_weights(network, host)
        rounds = _above("segment_rounds")
        if timed and self.seen is not None and rounds is not None:
            image, residual = self.seen
            self.ahead = [
                super(ComputesItsSegmentAhead, self).train(network, loaded, image, residual)
                for _ in range(rounds.segment_rounds)
            ]
        return loaded

    def train(self, network, weights, image, out_residual):
        self.seen = (image, out_residual)
        if self.ahead:
            return self.ahead.pop(0)
        return super().train(network, weights, image, out_residual)
