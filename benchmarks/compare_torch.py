"""Throughput of the NumPy backend against PyTorch CPU (oneDNN) on the six networks.

How to run it (PyTorch only for this script, never a dependency of the project)::

    python -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 numpy pyyaml pytest pytest-benchmark
    /tmp/torchvenv/bin/pip install -e . --no-deps
    /tmp/torchvenv/bin/python benchmarks/compare_torch.py            # all six, both modes
    /tmp/torchvenv/bin/python benchmarks/compare_torch.py --networks V,M --modes training \\
        --batch 16 --repeats 5 --old --profile
    /tmp/torchvenv/bin/python benchmarks/compare_torch.py --tables canonical --repeats 3 \\
        --warmup 1 --profile                        # the widely used networks at full size

Both sides run in one process on the same tables (``load_networks``) and the same
weights, float32, batch 16 by default. The NumPy side is exactly what the suite runs:
``executor.infer`` / ``executor.train`` with ``NumpyBackend``'s kernels. The PyTorch side
translates each table row to torch ops on channels-last tensors (docs/standard.md §4
semantics: max pooling pads with zeros, average pooling divides by Rx*Ry, FC reads the map
in (l, x, y) order). Training is forward, backward from a fixed output residual (the network input's
residual too, as the standard's backward step computes it for the first layer), weight
gradients, and the standard's update ``W += W_D / B``.

A measurement is ``--repeats`` timed iterations per side after ``--warmup`` untimed ones,
the two sides alternating so that other load on the machine hits both alike; the table
gives the best iteration of each, as images/s and GMAC/s (the table's MACs per image,
``pytest_gostcnn.model.complexity``), and each side's GMAC/s as a share of this machine's
float32 GEMM rate: the best of a large square ``numpy.matmul`` and ``torch.mm``, measured
before the first network and after the last. ``--old`` adds the previous backend (the reference
modules run in float32 through the executor) as a third column; ``--profile`` prints
where the NumPy backend spends an iteration, by layer type and step.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from pytest_gostcnn import executor
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.layers import NETWORK_INPUT, Layer
from pytest_gostcnn.model.network import CYRILLIC, Network, network_key
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.reference import ReferenceKernels


def draw(network: Network, batch: int, seed: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """Weights scaled by 1/sqrt(fan-in), input and output residual: float32 host arrays.

    Section 8's ranges would overflow float32 after a few updates with the standard's
    plus sign; these keep every map in a normal range for the whole run.
    """
    rng = np.random.default_rng(seed)
    weights = {}
    for layer in network.weight_layers:
        arrays = {}
        for name, shape in layer.weight_shapes.items():
            if name == "biases":
                fan_in = 100
            elif layer.type.name == "fc":
                fan_in = math.prod(shape[1:])
            else:
                fan_in = math.prod(shape[:-1]) if layer.type.name == "conv" else shape[0] * shape[1]
            arrays[name] = (rng.uniform(-1, 1, shape) / math.sqrt(fan_in)).astype(np.float32)
        weights[layer.number] = arrays
    image = rng.uniform(-1, 1, (batch, *network.input_shape)).astype(np.float32)
    residual = rng.uniform(-1e-3, 1e-3, (batch, *network.output_shape)).astype(np.float32)
    return weights, image, residual


# The PyTorch translation of a table. -----------------------------------------------------


def torch_parameters(network: Network, host: dict) -> dict[int, dict[str, torch.Tensor]]:
    """The weights in torch's layouts (channels last where torch has a layout)."""
    params = {}
    for layer in network.weight_layers:
        arrays = host[layer.number]
        b = torch.tensor(arrays["biases"])
        if layer.type.name == "conv":  # [Rx][Ry][L][F] -> [F][L][Rx][Ry]
            w = torch.tensor(arrays["filters"]).permute(3, 2, 0, 1).contiguous()
            w = w.to(memory_format=torch.channels_last)
        elif layer.type.name == "depthwise":  # [Rx][Ry][L] -> [L][1][Rx][Ry]
            w = torch.tensor(arrays["filters"]).permute(2, 0, 1).unsqueeze(1).contiguous()
            w = w.to(memory_format=torch.channels_last)
        else:  # fc: [F][L][X][Y] -> [F][L*X*Y], the order of flatten on [B][L][X][Y]
            w = torch.tensor(arrays["weights"]).reshape(arrays["weights"].shape[0], -1)
        params[layer.number] = {"w": w.requires_grad_(), "b": b.requires_grad_()}
    return params


def torch_layer(layer: Layer, inputs: list, params: dict) -> list:
    """One table row on NCHW tensors in channels-last memory (H = the standard's X)."""
    p = layer.params
    name = layer.type.name
    x = inputs[0]
    if name == "conv":
        out = F.conv2d(x, params["w"], params["b"], p["S"], (p["Px"], p["Py"]))
    elif name == "depthwise":
        out = F.conv2d(x, params["w"], params["b"], p["S"], (p["Px"], p["Py"]), groups=x.shape[1])
    elif name == "maxpool":  # docs/standard.md §4: padding counts as the value 0
        padded = F.pad(x, (p["Py"], p["Py"], p["Px"], p["Px"]))
        out = F.max_pool2d(padded, (p["Rx"], p["Ry"]), p["S"])
    elif name == "avgpool":  # docs/standard.md §4: divided by Rx*Ry always
        out = F.avg_pool2d(
            x, (p["Rx"], p["Ry"]), p["S"], (p["Px"], p["Py"]), count_include_pad=True
        )
    elif name == "relu":
        out = F.relu(x)
    elif name == "concat":
        out = torch.cat(inputs, dim=1)
    elif name == "split":
        return [x[:, : p["L1"]], x[:, p["L1"] :]]
    elif name == "eltwise":
        out = inputs[0] + inputs[1]
    elif name == "fc":  # WEIGHTS[F][L][X][Y]: the map flattened in (l, x, y) order
        out = F.linear(x.flatten(1), params["w"], params["b"])[:, :, None, None]
    elif name == "shuffle":  # channel g*(L/G) + j goes to j*G + g
        b, channels, h, w = x.shape
        groups = p["G"]
        out = x.reshape(b, groups, channels // groups, h, w).transpose(1, 2)
        out = out.reshape(b, channels, h, w)
    else:
        raise ValueError(f"no torch translation for layer type {name!r}")
    return [out]


def torch_forward(network: Network, params: dict, image: torch.Tensor) -> torch.Tensor:
    maps = {NETWORK_INPUT: image}
    for layer in network.layers:
        outs = torch_layer(layer, [maps[r] for r in layer.inputs], params.get(layer.number, {}))
        maps.update(zip(layer.outputs, outs, strict=True))
    return maps[network.layers[-1].outputs[0]]


def to_torch_map(array: np.ndarray) -> torch.Tensor:
    """[B][X][Y][L] as NCHW in channels-last memory: the same bytes, no copy."""
    return torch.from_numpy(array).permute(0, 3, 1, 2)


# The runs. -------------------------------------------------------------------------------


def numpy_step(backend, network: Network, mode: str, batch: int, seed: int) -> Callable[[], None]:
    host, image, residual = draw(network, batch, seed)
    weights = backend.load_weights(network, host)
    image, residual = backend.to_device(image), backend.to_device(residual)
    if mode == "inference":
        return lambda: executor.infer(network, backend, weights, image)
    return lambda: executor.train(network, backend, weights, image, residual)


def torch_step(network: Network, mode: str, batch: int, seed: int) -> Callable[[], None]:
    host, image, residual = draw(network, batch, seed)
    params = torch_parameters(network, host)
    image_t = to_torch_map(image)
    residual_t = torch.from_numpy(residual).permute(0, 3, 1, 2)
    return torch_iteration(network, params, image_t, residual_t, mode)


def torch_iteration(
    network: Network,
    params: dict,
    image_t: torch.Tensor,
    residual_t: torch.Tensor,
    mode: str,
    finish: Callable[[], None] = lambda: None,
) -> Callable[[], None]:
    """One inference or training iteration in torch; ``finish`` ends it (a GPU's sync)."""
    flat = [t for arrays in params.values() for t in arrays.values()]
    batch = image_t.shape[0]

    def infer() -> None:
        with torch.no_grad():
            torch_forward(network, params, image_t)
        finish()

    def train() -> None:
        # The standard's backward step gives the first layer's IN_D too.
        x = image_t.detach().requires_grad_()
        torch_forward(network, params, x).backward(residual_t)
        with torch.no_grad():
            for t in flat:
                t += t.grad / batch  # section 3.35: W += W_D / B
                t.grad = None
        finish()

    return infer if mode == "inference" else train


def agreement(network: Network, batch: int, seed: int) -> float:
    """Relative RMS difference of the two inference outputs: the translation is faithful."""
    host, image, _ = draw(network, batch, seed)
    backend = NumpyBackend()
    ours = executor.infer(network, backend, backend.load_weights(network, host), image)
    with torch.no_grad():
        theirs = torch_forward(network, torch_parameters(network, host), to_torch_map(image))
    theirs = theirs.permute(0, 2, 3, 1).numpy()
    return float(np.sqrt(np.mean((ours - theirs) ** 2) / np.mean(theirs**2)))


def best_times(steps: dict[str, Callable[[], None]], warmup: int, repeats: int) -> dict:
    """Seconds of the best iteration of each step, the steps alternating."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    best = dict.fromkeys(steps, math.inf)
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


class PreviousBackend(NumpyBackend):
    """The backend before the fast kernels: the reference modules run on float32 arrays."""

    _reference = ReferenceKernels()

    def forward(self, layer, inputs, weights):
        return self._reference.forward(layer, inputs, weights)

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        return self._reference.backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer, inputs, out_residuals):
        return self._reference.gradient(layer, inputs, out_residuals)


class TimedNumpy(NumpyBackend):
    """The NumPy backend with a timer around every kernel call, by layer type and step."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)

    def _timed(self, step: str, layer: Layer, call: Callable):
        start = time.perf_counter()
        result = call()
        self.seconds[layer.type.name, step] += time.perf_counter() - start
        return result

    def forward(self, layer, inputs, weights):
        return self._timed(
            "forward", layer, lambda: super(TimedNumpy, self).forward(layer, inputs, weights)
        )

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        return self._timed(
            "backward",
            layer,
            lambda: super(TimedNumpy, self).backward(
                layer, inputs, outputs, out_residuals, weights
            ),
        )

    def gradient(self, layer, inputs, out_residuals):
        return self._timed(
            "gradient",
            layer,
            lambda: super(TimedNumpy, self).gradient(layer, inputs, out_residuals),
        )

    def update(self, layer, weights, grads, batch):
        return self._timed(
            "update", layer, lambda: super(TimedNumpy, self).update(layer, weights, grads, batch)
        )


def profile(network: Network, mode: str, batch: int, seed: int, repeats: int) -> list[str]:
    """Lines: the share of an iteration each (layer type, step) takes, largest first."""
    backend = TimedNumpy()
    step = numpy_step(backend, network, mode, batch, seed)
    step()
    backend.seconds.clear()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    total = time.perf_counter() - start
    rows = sorted(backend.seconds.items(), key=lambda item: -item[1])
    lines = [f"  {network.latin} {mode}: {total / repeats * 1e3:.1f} ms per iteration"]
    for (type_name, kernel), seconds in rows:
        lines.append(f"    {type_name:10s} {kernel:9s} {100 * seconds / total:5.1f} %")
    outside = total - sum(backend.seconds.values())
    lines.append(
        f"    {'(executor and Python outside the kernels)':30s} {100 * outside / total:5.1f} %"
    )
    return lines


def _best_block(step: Callable[[], object], repeats: int) -> float:
    """Seconds of the best of ``repeats`` calls after one untimed call.

    One side's calls run as a block: alternating call by call, PyTorch's OpenMP threads,
    still spinning after its call, take the cores from the NumPy call that follows (on a
    2-core machine that slowed a 10 ms NumPy convolution to 17-19 ms).
    """
    step()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def _layer_steps(
    backend: NumpyBackend,
    layer: Layer,
    inputs: list[np.ndarray],
    weights: dict,
    params: dict,
    mode: str,
    rng: np.random.Generator,
) -> tuple[list[np.ndarray], list[tuple[str, Callable, Callable]]]:
    """The layer's outputs, and ``(step, NumPy call, PyTorch call)`` for each step timed."""
    outputs = backend.forward(layer, inputs, weights)
    tensors = [to_torch_map(a) for a in inputs]

    def torch_forward_step() -> None:
        with torch.no_grad():
            torch_layer(layer, tensors, params)

    steps = [
        ("forward", lambda: backend.forward(layer, inputs, weights), torch_forward_step),
    ]
    if mode == "training":
        residuals = [rng.uniform(-1e-3, 1e-3, out.shape).astype(np.float32) for out in outputs]
        leaves = [to_torch_map(a.copy()).requires_grad_() for a in inputs]
        graph = torch_layer(layer, leaves, params)
        residuals_t = [to_torch_map(r) for r in residuals]
        steps.append(
            (
                "backward",
                lambda: backend.backward(layer, inputs, outputs, residuals, weights),
                lambda: torch.autograd.grad(graph, leaves, residuals_t, retain_graph=True),
            )
        )
        if weights:
            steps.append(
                (
                    "gradient",
                    lambda: backend.gradient(layer, inputs, residuals),
                    lambda: torch.autograd.grad(
                        graph, list(params.values()), residuals_t, retain_graph=True
                    ),
                )
            )
    return outputs, steps


def layer_times(
    network: Network, mode: str, batch: int, seed: int, repeats: int
) -> dict[tuple[str, str], dict[str, float]]:
    """Seconds of each layer's steps on both sides, summed by (layer type, step).

    Every layer runs on the maps the NumPy forward pass gives it (the same bytes on both
    sides). Training adds backward (IN_D, PyTorch's input gradient) and, where a layer has
    weights, gradient (the weights' gradient), each from a fixed residual of the layer's
    output. Values: ``numpy`` and ``torch`` seconds, ``macs`` of the step for the batch.
    """
    backend = NumpyBackend()
    host, image, _ = draw(network, batch, seed)
    weights = backend.load_weights(network, host)
    params = torch_parameters(network, host)
    rng = np.random.default_rng(seed)
    maps = {NETWORK_INPUT: image}
    totals: dict[tuple[str, str], dict[str, float]] = defaultdict(
        lambda: {"numpy": 0.0, "torch": 0.0, "macs": 0.0}
    )
    for layer in network.layers:
        inputs = [maps[r] for r in layer.inputs]
        outputs, steps = _layer_steps(
            backend,
            layer,
            inputs,
            weights.get(layer.number, {}),
            params.get(layer.number, {}),
            mode,
            rng,
        )
        for step, ours, theirs in steps:
            row = totals[layer.type.name, step]
            row["numpy"] += _best_block(ours, repeats)
            row["torch"] += _best_block(theirs, repeats)
            row["macs"] += layer.macs * batch
        maps.update(zip(layer.outputs, [o.copy() for o in outputs], strict=True))
    return totals


def layer_lines(network: Network, mode: str, batch: int, seed: int, repeats: int) -> list[str]:
    """The per-(layer type, step) table of ``layer_times``, the largest NumPy time first."""
    totals = layer_times(network, mode, batch, seed, repeats)
    lines = [
        f"  {network.latin} {mode}, B = {batch}: {'NumPy ms':>9s} {'torch ms':>9s} "
        f"{'ratio':>6s} {'NumPy GMAC/s':>13s} {'torch GMAC/s':>13s}"
    ]
    for (type_name, step), row in sorted(totals.items(), key=lambda item: -item[1]["numpy"]):
        rates = ""
        if row["macs"]:
            numpy_rate, torch_rate = row["macs"] / row["numpy"], row["macs"] / row["torch"]
            rates = f" {numpy_rate / 1e9:13.1f} {torch_rate / 1e9:13.1f}"
        lines.append(
            f"    {type_name:10s} {step:9s} {row['numpy'] * 1e3:9.2f} {row['torch'] * 1e3:9.2f} "
            f"{row['torch'] / row['numpy']:6.2f}{rates}"
        )
    numpy_total = sum(row["numpy"] for row in totals.values())
    torch_total = sum(row["torch"] for row in totals.values())
    lines.append(
        f"    {'all layers':20s} {numpy_total * 1e3:9.2f} {torch_total * 1e3:9.2f} "
        f"{torch_total / numpy_total:6.2f}"
    )
    return lines


GEMM_SIZE = 2048  # square float32 operands: large enough that either library reaches its rate


def gemm_rates(backend: NumpyBackend, repeats: int = 5) -> dict[str, float]:
    """MAC/s of the best of ``repeats`` float32 GEMMs of GEMM_SIZE, NumPy's and torch's.

    NumPy's runs the way the backend runs its GEMMs: ``Workspace.matmul``, split over the
    backend's threads with BLAS on one (a bare ``numpy.matmul`` after ``NumpyBackend()``
    would run on one core only and halve the rate of a 2-core machine).
    """
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((GEMM_SIZE, GEMM_SIZE), dtype=np.float32) for _ in range(2))
    out = np.empty_like(a)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    steps = {
        "numpy": lambda: backend.workspace.matmul(a, b, out),
        "torch": lambda: torch.mm(ta, tb),
    }
    best = best_times(steps, 1, repeats)
    return {side: GEMM_SIZE**3 / seconds for side, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default="V,R,G,S,M,Sh", help="comma-separated letters")
    parser.add_argument(
        "--tables", default=None, help="a shipped set (canonical) or a directory of tables"
    )
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5, help="timed iterations per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations per side")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--old", action="store_true", help="also time the previous backend")
    parser.add_argument("--profile", action="store_true", help="NumPy time by layer type")
    parser.add_argument(
        "--layers",
        action="store_true",
        help="each layer type and step timed on both sides (time, ratio, GMAC/s)",
    )
    args = parser.parse_args()

    networks = load_networks(args.tables)
    keys = [network_key(k.strip()) for k in args.networks.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    backend = NumpyBackend()
    old = PreviousBackend()
    print(f"CPU: {cpu_model()}; {len(os.sched_getaffinity(0))} cores in this process's set")
    print(
        f"NumPy {np.__version__} ({backend.workspace.threads} threads, BLAS default); "
        f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads, "
        f"oneDNN {torch.backends.mkldnn.is_available()})"
    )
    print(f"tables: {args.tables or 'reconstructions (default)'}")
    print(f"batch {args.batch}, float32, best of {args.repeats} after {args.warmup} warm-up")
    gemm = gemm_rates(backend)
    print(
        f"float32 GEMM {GEMM_SIZE}x{GEMM_SIZE}: NumPy {gemm['numpy'] / 1e9:.1f} GMAC/s, "
        f"torch {gemm['torch'] / 1e9:.1f} GMAC/s\n",
        flush=True,
    )
    header = (
        f"{'network':8s} {'mode':9s} {'NumPy img/s':>12s} {'torch img/s':>12s} {'ratio':>6s} "
        f"{'NumPy GMAC/s':>13s} {'torch GMAC/s':>13s}"
    )
    if args.old:
        header += f" {'old img/s':>10s} {'new/old':>8s}"
    print(header)
    profiles: list[str] = []
    layers: list[str] = []
    rows: list[tuple[str, str, dict[str, float]]] = []
    for key in keys:
        network = networks[key]
        name = f"{CYRILLIC[key]} ({key})"
        for mode in modes:
            steps = {
                "numpy": numpy_step(backend, network, mode, args.batch, args.seed),
                "torch": torch_step(network, mode, args.batch, args.seed),
            }
            if args.old:
                steps["old"] = numpy_step(old, network, mode, args.batch, args.seed)
            best = best_times(steps, args.warmup, args.repeats)
            rate = {side: args.batch / seconds for side, seconds in best.items()}
            macs = (inference_macs if mode == "inference" else training_macs)(network)
            rows.append((name, mode, {side: r * macs for side, r in rate.items()}))
            line = (
                f"{name:8s} {mode:9s} {rate['numpy']:12.1f} {rate['torch']:12.1f} "
                f"{rate['numpy'] / rate['torch']:6.2f} "
                f"{rate['numpy'] * macs / 1e9:13.1f} {rate['torch'] * macs / 1e9:13.1f}"
            )
            if args.old:
                line += f" {rate['old']:10.1f} {rate['numpy'] / rate['old']:8.1f}"
            print(line, flush=True)
            if args.profile:
                profiles += profile(network, mode, args.batch, args.seed, args.repeats)
            if args.layers:
                layers += layer_lines(network, mode, args.batch, args.seed, args.repeats)
    after = gemm_rates(backend)
    machine = max(*gemm.values(), *after.values())
    print(
        f"\nfloat32 GEMM after the last network: NumPy {after['numpy'] / 1e9:.1f} GMAC/s, "
        f"torch {after['torch'] / 1e9:.1f} GMAC/s; this machine's rate (the best of the four): "
        f"{machine / 1e9:.1f} GMAC/s"
    )
    print("share of that rate (GMAC/s of the network / GMAC/s of the GEMM):")
    for name, mode, macs_per_second in rows:
        print(
            f"  {name:8s} {mode:9s} NumPy {100 * macs_per_second['numpy'] / machine:5.1f} %, "
            f"torch {100 * macs_per_second['torch'] / machine:5.1f} %"
        )
    print("\nagreement (relative RMS difference of the inference outputs, NumPy vs torch):")
    print("  " + ", ".join(f"{k} {agreement(networks[k], 2, args.seed):.1e}" for k in keys))
    if profiles:
        print("\nNumPy backend, share of an iteration by layer type and step:")
        print("\n".join(profiles))
    if layers:
        print(
            "\nBy layer type and step, both sides on the same maps (PyTorch's time / NumPy's is the"
            " ratio; each layer's best call, a side's calls in a block):"
        )
        print("\n".join(layers))


if __name__ == "__main__":
    main()
