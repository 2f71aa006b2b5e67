"""Third-party backends for the plugin's tests, each breaking one thing a real one might.

Not a test file: the tests copy it into a pytester directory as ``mymod.py`` (or next to an
``mpirun`` run), so that a run names these classes on its command line as a user names
their own backend, ``--gost-backend=mymod:Class``.
"""

import os

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
