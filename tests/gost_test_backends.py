"""Third-party backends for the plugin's tests, each breaking one thing a real one might.

Not a test file: the tests copy it into a pytester directory as ``mymod.py`` (or next to an
``mpirun`` run), so that a run names these classes on its command line as a user names
their own backend, ``--gost-backend=mymod:Class``.
"""

import os
import time

import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.machine.peak import Peak


class Mine(NumpyBackend):
    """Breaks nothing: the NumPy backend under a third party's name."""

    name = "mine"


class NotABackend:
    """Has a name, but does not subclass pytest_gostcnn.backend.Backend."""

    name = "not-a-backend"


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


class FailsOnCell1(NumpyBackend):
    """Correct on cell 0; on cell 1 every forward output is off by one."""

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
            outputs = [o + 1 for o in outputs]
        return outputs


# Right while verified, wrong while timed: the audited rounds (standard.md §7.7) must catch
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
