"""Layer-by-layer generators of the catalog CNNs (torchvision definitions): AlexNet, VGG-16, ResNets, Inception-v3.

Shapes, strides and channels follow torchvision's model code so parameter counts match its published
figures exactly; every conv is its own LayerSpec, followed by its BatchNorm and ReLU where the net has them.
"""
from __future__ import annotations

from simdist.workload.layers import Shape, activation, add, batch_norm, conv, global_pool, linear, norm, pool
from simdist.workload.specs import LayerSpec, ModelSpec

IMAGENET_CLASSES = 1000


class _Net:
    """Collects layers in forward order while tracking nothing else: shapes flow through return values."""

    def __init__(self) -> None:
        self.layers: list[LayerSpec] = []

    def conv_bn_relu(self, name: str, x: Shape, out_c: int, k, stride=1, pad=0, relu: bool = True) -> Shape:
        spec, y = conv(f"{name}.conv", x, out_c, k, stride, pad, bias=False)
        self.layers.append(spec)
        self.layers.append(batch_norm(f"{name}.bn", y.elems, out_c))
        if relu:
            self.layers.append(activation(f"{name}.relu", y.elems, saves=False))
        return y

    def conv_relu(self, name: str, x: Shape, out_c: int, k, stride=1, pad=0) -> Shape:
        spec, y = conv(f"{name}.conv", x, out_c, k, stride, pad, bias=True)
        self.layers.append(spec)
        self.layers.append(activation(f"{name}.relu", y.elems, saves=False))
        return y

    def pool(self, name: str, x: Shape, k: int, stride: int, pad: int = 0) -> Shape:
        spec, y = pool(name, x, k, stride, pad)
        self.layers.append(spec)
        return y

    def global_pool(self, name: str, x: Shape) -> Shape:
        spec, y = global_pool(name, x)
        self.layers.append(spec)
        return y

    def fc(self, name: str, d_in: int, d_out: int, relu: bool = False) -> None:
        self.layers.append(linear(name, 1, d_in, d_out, bias=True))
        if relu:
            self.layers.append(activation(f"{name}.relu", d_out, saves=False))


def alexnet() -> ModelSpec:
    """torchvision AlexNet (the one-GPU variant of Krizhevsky 2014): 61.1 M parameters at 224 x 224."""
    n = _Net()
    x = Shape(3, 224, 224)
    for i, (c, k, s, p) in enumerate([(64, 11, 4, 2), (192, 5, 1, 2), (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1)]):
        x = n.conv_relu(f"features.conv{i + 1}", x, c, k, s, p)
        if i in (0, 1, 4):
            x = n.pool(f"features.pool{i + 1}", x, 3, 2)
    assert (x.h, x.w) == (6, 6)
    n.fc("classifier.fc1", x.elems, 4096, relu=True)
    n.fc("classifier.fc2", 4096, 4096, relu=True)
    n.fc("classifier.fc3", 4096, IMAGENET_CLASSES)
    return ModelSpec("alexnet", "cnn", tuple(n.layers), source="torchvision.models.alexnet; Krizhevsky, arXiv:1404.5997")


def vgg16() -> ModelSpec:
    """VGG-16 (configuration D, Simonyan & Zisserman 2014): 138.4 M parameters, 15.5 GMACs at 224 x 224."""
    n = _Net()
    x = Shape(3, 224, 224)
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    i = 0
    for v in cfg:
        if v == "M":
            x = n.pool(f"features.pool{i}", x, 2, 2)
        else:
            i += 1
            x = n.conv_relu(f"features.conv{i}", x, int(v), 3, 1, 1)
    n.fc("classifier.fc1", x.elems, 4096, relu=True)
    n.fc("classifier.fc2", 4096, 4096, relu=True)
    n.fc("classifier.fc3", 4096, IMAGENET_CLASSES)
    return ModelSpec("vgg16", "cnn", tuple(n.layers), source="torchvision.models.vgg16; arXiv:1409.1556")


_RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def resnet(depth: int) -> ModelSpec:
    """Bottleneck ResNet-50/101/152 (He et al. 2015, torchvision v1.5: stride on the 3 x 3 conv)."""
    n = _Net()
    x = n.conv_bn_relu("conv1", Shape(3, 224, 224), 64, 7, 2, 3)
    x = n.pool("maxpool", x, 3, 2, 1)
    in_c = 64
    for stage, (blocks, width) in enumerate(zip(_RESNET_BLOCKS[depth], (64, 128, 256, 512))):
        for b in range(blocks):
            name = f"layer{stage + 1}.{b}"
            stride = 2 if (b == 0 and stage > 0) else 1
            inp = x
            y = n.conv_bn_relu(f"{name}.1", inp, width, 1)
            y = n.conv_bn_relu(f"{name}.2", y, width, 3, stride, 1)
            y = n.conv_bn_relu(f"{name}.3", y, width * 4, 1, relu=False)
            if b == 0:
                n.conv_bn_relu(f"{name}.downsample", inp, width * 4, 1, stride, relu=False)
            n.layers.append(add(f"{name}.add", y.elems))
            n.layers.append(activation(f"{name}.relu", y.elems, saves=False))
            x, in_c = y, width * 4
    x = n.global_pool("avgpool", x)
    n.fc("fc", in_c, IMAGENET_CLASSES)
    return ModelSpec(f"resnet{depth}", "cnn", tuple(n.layers), source=f"torchvision.models.resnet{depth}; arXiv:1512.03385")


def _concat(*shapes: Shape) -> Shape:
    assert len({(s.h, s.w) for s in shapes}) == 1, shapes
    return Shape(sum(s.c for s in shapes), shapes[0].h, shapes[0].w)


def _inception_a(n: _Net, name: str, x: Shape, pool_features: int) -> Shape:
    b1 = n.conv_bn_relu(f"{name}.branch1x1", x, 64, 1)
    b5 = n.conv_bn_relu(f"{name}.branch5x5_1", x, 48, 1)
    b5 = n.conv_bn_relu(f"{name}.branch5x5_2", b5, 64, 5, 1, 2)
    b3 = n.conv_bn_relu(f"{name}.branch3x3dbl_1", x, 64, 1)
    b3 = n.conv_bn_relu(f"{name}.branch3x3dbl_2", b3, 96, 3, 1, 1)
    b3 = n.conv_bn_relu(f"{name}.branch3x3dbl_3", b3, 96, 3, 1, 1)
    bp = n.pool(f"{name}.branch_pool.avg", x, 3, 1, 1)
    bp = n.conv_bn_relu(f"{name}.branch_pool", bp, pool_features, 1)
    return _concat(b1, b5, b3, bp)


def _inception_b(n: _Net, name: str, x: Shape) -> Shape:
    b3 = n.conv_bn_relu(f"{name}.branch3x3", x, 384, 3, 2)
    bd = n.conv_bn_relu(f"{name}.branch3x3dbl_1", x, 64, 1)
    bd = n.conv_bn_relu(f"{name}.branch3x3dbl_2", bd, 96, 3, 1, 1)
    bd = n.conv_bn_relu(f"{name}.branch3x3dbl_3", bd, 96, 3, 2)
    bp = n.pool(f"{name}.branch_pool.max", x, 3, 2)
    return _concat(b3, bd, bp)


def _inception_c(n: _Net, name: str, x: Shape, c7: int) -> Shape:
    b1 = n.conv_bn_relu(f"{name}.branch1x1", x, 192, 1)
    b7 = n.conv_bn_relu(f"{name}.branch7x7_1", x, c7, 1)
    b7 = n.conv_bn_relu(f"{name}.branch7x7_2", b7, c7, (1, 7), 1, (0, 3))
    b7 = n.conv_bn_relu(f"{name}.branch7x7_3", b7, 192, (7, 1), 1, (3, 0))
    bd = n.conv_bn_relu(f"{name}.branch7x7dbl_1", x, c7, 1)
    bd = n.conv_bn_relu(f"{name}.branch7x7dbl_2", bd, c7, (7, 1), 1, (3, 0))
    bd = n.conv_bn_relu(f"{name}.branch7x7dbl_3", bd, c7, (1, 7), 1, (0, 3))
    bd = n.conv_bn_relu(f"{name}.branch7x7dbl_4", bd, c7, (7, 1), 1, (3, 0))
    bd = n.conv_bn_relu(f"{name}.branch7x7dbl_5", bd, 192, (1, 7), 1, (0, 3))
    bp = n.pool(f"{name}.branch_pool.avg", x, 3, 1, 1)
    bp = n.conv_bn_relu(f"{name}.branch_pool", bp, 192, 1)
    return _concat(b1, b7, bd, bp)


def _inception_d(n: _Net, name: str, x: Shape) -> Shape:
    b3 = n.conv_bn_relu(f"{name}.branch3x3_1", x, 192, 1)
    b3 = n.conv_bn_relu(f"{name}.branch3x3_2", b3, 320, 3, 2)
    b7 = n.conv_bn_relu(f"{name}.branch7x7x3_1", x, 192, 1)
    b7 = n.conv_bn_relu(f"{name}.branch7x7x3_2", b7, 192, (1, 7), 1, (0, 3))
    b7 = n.conv_bn_relu(f"{name}.branch7x7x3_3", b7, 192, (7, 1), 1, (3, 0))
    b7 = n.conv_bn_relu(f"{name}.branch7x7x3_4", b7, 192, 3, 2)
    bp = n.pool(f"{name}.branch_pool.max", x, 3, 2)
    return _concat(b3, b7, bp)


def _inception_e(n: _Net, name: str, x: Shape) -> Shape:
    b1 = n.conv_bn_relu(f"{name}.branch1x1", x, 320, 1)
    b3 = n.conv_bn_relu(f"{name}.branch3x3_1", x, 384, 1)
    b3a = n.conv_bn_relu(f"{name}.branch3x3_2a", b3, 384, (1, 3), 1, (0, 1))
    b3b = n.conv_bn_relu(f"{name}.branch3x3_2b", b3, 384, (3, 1), 1, (1, 0))
    bd = n.conv_bn_relu(f"{name}.branch3x3dbl_1", x, 448, 1)
    bd = n.conv_bn_relu(f"{name}.branch3x3dbl_2", bd, 384, 3, 1, 1)
    bda = n.conv_bn_relu(f"{name}.branch3x3dbl_3a", bd, 384, (1, 3), 1, (0, 1))
    bdb = n.conv_bn_relu(f"{name}.branch3x3dbl_3b", bd, 384, (3, 1), 1, (1, 0))
    bp = n.pool(f"{name}.branch_pool.avg", x, 3, 1, 1)
    bp = n.conv_bn_relu(f"{name}.branch_pool", bp, 192, 1)
    return _concat(b1, b3a, b3b, bda, bdb, bp)


def inception_v3() -> ModelSpec:
    """torchvision Inception-v3 at 299 x 299 WITHOUT the auxiliary classifier: 23.8 M parameters (27.2 M with it)."""
    n = _Net()
    x = n.conv_bn_relu("Conv2d_1a_3x3", Shape(3, 299, 299), 32, 3, 2)
    x = n.conv_bn_relu("Conv2d_2a_3x3", x, 32, 3)
    x = n.conv_bn_relu("Conv2d_2b_3x3", x, 64, 3, 1, 1)
    x = n.pool("maxpool1", x, 3, 2)
    x = n.conv_bn_relu("Conv2d_3b_1x1", x, 80, 1)
    x = n.conv_bn_relu("Conv2d_4a_3x3", x, 192, 3)
    x = n.pool("maxpool2", x, 3, 2)
    x = _inception_a(n, "Mixed_5b", x, 32)
    x = _inception_a(n, "Mixed_5c", x, 64)
    x = _inception_a(n, "Mixed_5d", x, 64)
    x = _inception_b(n, "Mixed_6a", x)
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(n, name, x, c7)
    x = _inception_d(n, "Mixed_7a", x)
    x = _inception_e(n, "Mixed_7b", x)
    x = _inception_e(n, "Mixed_7c", x)
    assert (x.c, x.h, x.w) == (2048, 8, 8), x
    x = n.global_pool("avgpool", x)
    n.fc("fc", x.c, IMAGENET_CLASSES)
    return ModelSpec("inception-v3", "cnn", tuple(n.layers),
                     source="torchvision.models.inception_v3(aux_logits=False); arXiv:1512.00567")
