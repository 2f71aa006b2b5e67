"""Write the canonical table set: the six widely used networks at full size (docs/tables.md).

    python tools/canonical_tables.py           # (re)write pytest_gostcnn/networks/canonical/
    python tools/canonical_tables.py --check   # exit 1 if a shipped table differs

Each network is built here from its paper's description, block by block, in the
standard's layer types; the loader (``pytest_gostcnn.model.network.parse_table``) checks
every table before it is written. Batch normalisation, LRN, dropout and softmax have no
layer type in the standard and are left out; each table's header names the paper and
every other departure from it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pytest_gostcnn.model.layers import NETWORK_INPUT, MapRef, make_layer
from pytest_gostcnn.model.network import parse_table

OUT_DIR = Path(__file__).resolve().parent.parent / "pytest_gostcnn" / "networks" / "canonical"
IMAGE = (224, 224, 3)
CLASSES = 1000
WINDOW_KEYS = ("Rx", "Ry", "S", "Px", "Py")


@dataclass
class Table:
    """A network table under construction; each method adds rows and returns the map made."""

    letter: str
    name: str
    header: list[str]
    rows: list[dict] = field(default_factory=list)
    shapes: dict[MapRef, tuple[int, int, int]] = field(default_factory=dict)

    def _row(self, type_name: str, inputs: list[MapRef], **params: int) -> list[MapRef]:
        number = len(self.rows) + 1
        in_shapes = [IMAGE if ref == NETWORK_INPUT else self.shapes[ref] for ref in inputs]
        layer = make_layer(type_name, in_shapes, number=number, inputs=tuple(inputs), **params)
        row: dict = {"n": number, "type": type_name}
        if number > 1:
            for column, ref in zip(("in1", "in2"), inputs, strict=False):
                row[column] = self._name(ref)
        row.update(params)
        self.rows.append(row)
        self.shapes.update(zip(layer.outputs, layer.out_shapes, strict=True))
        return list(layer.outputs)

    def _name(self, ref: MapRef) -> str | int:
        producer = self.rows[ref.layer - 1]
        return f"{ref.layer}.{ref.output + 1}" if producer["type"] == "split" else ref.layer

    def channels(self, ref: MapRef) -> int:
        return self.shapes[ref][2]

    def conv(self, x: MapRef, f: int, r: int, s: int = 1, p: int | None = None) -> MapRef:
        pad = (r - 1) // 2 if p is None else p
        return self._row("conv", [x], F=f, Rx=r, Ry=r, S=s, Px=pad, Py=pad)[0]

    def conv_relu(self, x: MapRef, f: int, r: int, s: int = 1, p: int | None = None) -> MapRef:
        return self.relu(self.conv(x, f, r, s, p))

    def depthwise(self, x: MapRef, s: int = 1) -> MapRef:
        return self._row("depthwise", [x], Rx=3, Ry=3, S=s, Px=1, Py=1)[0]

    def relu(self, x: MapRef) -> MapRef:
        return self._row("relu", [x])[0]

    def maxpool(self, x: MapRef, r: int, s: int, p: int = 0) -> MapRef:
        return self._row("maxpool", [x], Rx=r, Ry=r, S=s, Px=p, Py=p)[0]

    def global_avgpool(self, x: MapRef) -> MapRef:
        size_x, size_y, _ = self.shapes[x]
        return self._row("avgpool", [x], Rx=size_x, Ry=size_y, S=1, Px=0, Py=0)[0]

    def concat(self, *maps: MapRef) -> MapRef:
        """Two or more maps joined in order by a chain of the standard's two-input concats."""
        joined = maps[0]
        for other in maps[1:]:
            joined = self._row("concat", [joined, other])[0]
        return joined

    def split(self, x: MapRef) -> list[MapRef]:
        return self._row("split", [x], L1=self.channels(x) // 2)

    def add(self, a: MapRef, b: MapRef) -> MapRef:
        return self._row("eltwise", [a, b])[0]

    def shuffle(self, x: MapRef, groups: int) -> MapRef:
        return self._row("shuffle", [x], G=groups)[0]

    def fc(self, x: MapRef, f: int) -> MapRef:
        return self._row("fc", [x], F=f)[0]

    def text(self) -> str:
        lines = [f"# {line}" for line in self.header]
        lines += [
            f"letter: {self.letter}",
            f"name: {self.name}",
            "provenance: canonical",
            f"input: {{X: {IMAGE[0]}, Y: {IMAGE[1]}, L: {IMAGE[2]}}}",
            "layers:",
        ]
        for row in self.rows:
            lines.append("  - {" + ", ".join(f"{k}: {v}" for k, v in row.items()) + "}")
        return "\n".join(lines) + "\n"


NO_BN = "batch normalisation after every convolution is left out (no such layer type)"
NO_DROPOUT_SOFTMAX = "dropout and the final softmax are left out (no such layer types)"
RELU_PADDING = (
    "max pooling pads with zeros (standard.md §4); its input always follows a ReLU, so "
    "zeros change no maximum"
)


def mobilenet_v1() -> Table:
    t = Table(
        "М",
        "MobileNet v1 1.0, 224x224 (canonical set)",
        [
            "Canonical set: MobileNet v1, width multiplier 1.0, resolution 224 (Howard et al.,",
            "'MobileNets: Efficient Convolutional Neural Networks for Mobile Vision",
            "Applications', arXiv:1704.04861, 2017, Table 1). Departures from the paper:",
            f"- {NO_BN};",
            f"- {NO_DROPOUT_SOFTMAX};",
            "- every 3x3 layer pads 1 on each side (the standard's padding is symmetric);",
            "- the paper's Table 1 gives the last depthwise layer stride 2 on a 7x7 map that",
            "  stays 7x7; it has stride 1 here, as the table's sizes say.",
        ],
    )
    x = t.conv_relu(NETWORK_INPUT, 32, 3, 2)
    for f, s in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5]:
        x = t.conv_relu(t.relu(t.depthwise(x, s)), f, 1)
    for f, s in [(1024, 2), (1024, 1)]:
        x = t.conv_relu(t.relu(t.depthwise(x, s)), f, 1)
    t.fc(t.global_avgpool(x), CLASSES)
    return t


# Inception modules of GoogLeNet: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj.
INCEPTION = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def googlenet() -> Table:
    t = Table(
        "Г",
        "GoogLeNet (Inception v1) (canonical set)",
        [
            "Canonical set: GoogLeNet (Szegedy et al., 'Going Deeper with Convolutions',",
            "arXiv:1409.4842, 2014, Table 1 and Figure 3), with the paper's 5x5 convolution",
            "in the third branch of every inception module. Departures from the paper:",
            "- the two auxiliary classifiers (used only in training) are left out;",
            "- the two local response normalisation layers are left out (no such layer type);",
            f"- {NO_DROPOUT_SOFTMAX};",
            "- every convolution pads (R-1)/2 on each side, every 3x3 stride-2 max pooling",
            "  pads 1, which gives the paper's map sizes (112, 56, 28, 14, 7);",
            f"- {RELU_PADDING};",
            "- an inception module's four branches are joined by a chain of three two-input",
            "  concats (the standard's concat takes two inputs), in the paper's order.",
        ],
    )
    x = t.conv_relu(NETWORK_INPUT, 64, 7, 2)
    x = t.maxpool(x, 3, 2, 1)
    x = t.conv_relu(t.conv_relu(x, 64, 1), 192, 3)
    x = t.maxpool(x, 3, 2, 1)
    for module, (b1, r3, b3, r5, b5, proj) in INCEPTION.items():
        if module in ("4a", "5a"):
            x = t.maxpool(x, 3, 2, 1)
        x = t.concat(
            t.conv_relu(x, b1, 1),
            t.conv_relu(t.conv_relu(x, r3, 1), b3, 3),
            t.conv_relu(t.conv_relu(x, r5, 1), b5, 5),
            t.conv_relu(t.maxpool(x, 3, 1, 1), proj, 1),
        )
    t.fc(t.global_avgpool(x), CLASSES)
    return t


def vgg16() -> Table:
    t = Table(
        "В",
        "VGG-16 (canonical set)",
        [
            "Canonical set: VGG-16, configuration D (Simonyan and Zisserman, 'Very Deep",
            "Convolutional Networks for Large-Scale Image Recognition', arXiv:1409.1556,",
            "2014, Table 1). Departures from the paper:",
            f"- {NO_DROPOUT_SOFTMAX};",
            "- the first fully connected layer reads the 7x7x512 map directly (the",
            "  standard's fully connected layer takes a map).",
        ],
    )
    x = NETWORK_INPUT
    for f, count in [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]:
        for _ in range(count):
            x = t.conv_relu(x, f, 3)
        x = t.maxpool(x, 2, 2)
    x = t.relu(t.fc(t.relu(t.fc(x, 4096)), 4096))
    t.fc(x, CLASSES)
    return t


def squeezenet_1_1() -> Table:
    t = Table(
        "С",
        "SqueezeNet 1.1 (canonical set)",
        [
            "Canonical set: SqueezeNet 1.1 (Iandola et al., 'SqueezeNet: AlexNet-level",
            "accuracy with 50x fewer parameters and <0.5MB model size', arXiv:1602.07360,",
            "2016; version 1.1 as released by its authors: a 3x3 stride-2 first convolution",
            "with 64 filters and the max poolings after it, fire2 and fire4). Departures:",
            f"- {NO_DROPOUT_SOFTMAX};",
            "- the max poolings count sizes with floor where the release uses ceil; at these",
            "  sizes (111, 55, 27) both give the same maps (55, 27, 13);",
            "- the classifier's global average pooling is a 13x13 average pooling.",
        ],
    )

    def fire(x: MapRef, squeeze: int, expand: int) -> MapRef:
        s = t.conv_relu(x, squeeze, 1)
        return t.concat(t.conv_relu(s, expand, 1), t.conv_relu(s, expand, 3))

    x = t.conv_relu(NETWORK_INPUT, 64, 3, 2, 0)
    x = t.maxpool(x, 3, 2)
    x = fire(fire(x, 16, 64), 16, 64)
    x = t.maxpool(x, 3, 2)
    x = fire(fire(x, 32, 128), 32, 128)
    x = t.maxpool(x, 3, 2)
    for squeeze, expand in [(48, 192), (48, 192), (64, 256), (64, 256)]:
        x = fire(x, squeeze, expand)
    t.global_avgpool(t.conv_relu(x, CLASSES, 1))
    return t


def resnet50_v1_5() -> Table:
    t = Table(
        "Р",
        "ResNet-50 v1.5 (canonical set)",
        [
            "Canonical set: ResNet-50 (He et al., 'Deep Residual Learning for Image",
            "Recognition', arXiv:1512.03385, 2015, Table 1) in its v1.5 form: in a block that",
            "halves the map the stride is on the 3x3 convolution, not the first 1x1; every",
            "block that changes the shape has a 1x1 projection shortcut (option B).",
            "Departures from the paper:",
            f"- {NO_BN};",
            "- the final softmax is left out (no such layer type);",
            f"- {RELU_PADDING}.",
        ],
    )
    x = t.conv_relu(NETWORK_INPUT, 64, 7, 2)
    x = t.maxpool(x, 3, 2, 1)
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            branch = t.conv_relu(t.conv_relu(x, width, 1), width, 3, stride)
            branch = t.conv(branch, 4 * width, 1)
            shortcut = t.conv(x, 4 * width, 1, stride) if block == 0 else x
            x = t.relu(t.add(branch, shortcut))
    t.fc(t.global_avgpool(x), CLASSES)
    return t


def shufflenet_v2() -> Table:
    t = Table(
        "Ш",
        "ShuffleNet v2 1.0x (canonical set)",
        [
            "Canonical set: ShuffleNet v2 1.0x (Ma et al., 'ShuffleNet V2: Practical",
            "Guidelines for Efficient CNN Architecture Design', arXiv:1807.11164, 2018,",
            "Table 5 and Figure 3 (c), (d)). Departures from the paper:",
            f"- {NO_BN};",
            "- the final softmax is left out (no such layer type);",
            f"- {RELU_PADDING};",
            "- the channel split is a split layer (first half kept, second half through the",
            "  branch), the channel shuffle a shuffle layer with G = 2.",
        ],
    )

    def branch(x: MapRef, f: int, s: int) -> MapRef:
        return t.conv_relu(t.depthwise(t.conv_relu(x, f, 1), s), f, 1)

    x = t.conv_relu(NETWORK_INPUT, 24, 3, 2)
    x = t.maxpool(x, 3, 2, 1)
    for channels, repeats in [(116, 4), (232, 8), (464, 4)]:
        half = channels // 2
        x = t.shuffle(t.concat(t.conv_relu(t.depthwise(x, 2), half, 1), branch(x, half, 2)), 2)
        for _ in range(repeats - 1):
            kept, through = t.split(x)
            x = t.shuffle(t.concat(kept, branch(through, half, 1)), 2)
    x = t.conv_relu(x, 1024, 1)
    t.fc(t.global_avgpool(x), CLASSES)
    return t


BUILDERS = {
    "M": mobilenet_v1,
    "G": googlenet,
    "V": vgg16,
    "S": squeezenet_1_1,
    "R": resnet50_v1_5,
    "Sh": shufflenet_v2,
}


def tables() -> dict[str, str]:
    """Each table's file name and text, every one checked by the loader."""
    texts = {}
    for latin, build in BUILDERS.items():
        text = build().text()
        parse_table(yaml.safe_load(text), f"{latin}.yaml")  # raises TableError on a bad table
        texts[f"{latin}.yaml"] = text
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    differ = []
    for name, text in tables().items():
        path = OUT_DIR / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                differ.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    if differ:
        print(f"differ from what this script writes: {', '.join(differ)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
