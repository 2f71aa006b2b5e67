"""Computational complexity, the project's Table 1 (standard.md §7): MACs per image.

Convolution, depthwise and fully connected MACs over the full window at every output
position; a training iteration is forward + backward + gradient, 3x inference.
"""

from __future__ import annotations

from .network import Network

TRAINING_STEPS_WITH_MACS = ("forward", "backward", "gradient")


def inference_macs(network: Network) -> int:
    """MACs of one forward pass for one image."""
    return sum(layer.macs for layer in network.layers)


def training_macs(network: Network) -> int:
    """MACs of one training iteration for one image: forward + backward + gradient."""
    return len(TRAINING_STEPS_WITH_MACS) * inference_macs(network)
