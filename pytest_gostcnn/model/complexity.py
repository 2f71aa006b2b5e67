"""Computational complexity (section 9.5, the project's Table 1): MACs per image.

Counted: the multiply-accumulates of convolution, depthwise convolution and fully connected
layers, over the full window at every output position (padding positions included, as
published complexity figures count them), so the count depends on the table alone and not
on the algorithm a backend runs. Not counted: bias additions, pooling, ReLU, eltwise and the
update's additions.

A training iteration counts, per layer with weights, forward + backward (IN_D, also for the
first layer, as the standard's backward step computes it) + gradient (the weight ``*_D``
arrays); each of the three is one MAC per forward MAC, so training is 3x inference.
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
