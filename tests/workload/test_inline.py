"""Inline layer lists: validation messages name the index; good input round-trips."""
from __future__ import annotations

import pytest

from simdist.workload import model_from_layers

GOOD = [
    {"name": "fc1", "kind": "linear", "params": 256 * 128 + 256, "fwd_flops": 2 * 256 * 128,
     "input_elems": 128, "output_elems": 256, "grad_shapes": [[256, 128], [256]]},
    {"name": "relu", "kind": "activation", "params": 0, "fwd_flops": 256, "input_elems": 256, "output_elems": 256},
    {"name": "head", "kind": "linear", "params": 2570, "fwd_flops": 5120, "input_elems": 256, "output_elems": 10},
]


def test_good_layers_build_a_model() -> None:
    m = model_from_layers(GOOD, "mlp")
    assert m.params == 256 * 128 + 256 + 2570
    assert m.family == "custom"
    assert m.layers[0].grad_shapes == ((256, 128), (256,))
    assert m.layers[2].grad_shapes == ((2570,),)  # default: one flat tensor
    assert m.layers[1].grad_shapes == ()
    assert m.layers[1].saved_elems == 256  # default: the input


@pytest.mark.parametrize("index,change,match", [
    (1, {"kind": "lstm"}, r"layers\[1\]\.kind"),
    (0, {"params": -1}, r"layers\[0\]\.params"),
    (0, {"params": 1.5}, r"layers\[0\]\.params"),
    (2, {"fwd_flops": "lots"}, r"layers\[2\]\.fwd_flops"),
    (0, {"grad_shapes": [[256, 128]]}, r"layers\[0\]\.grad_shapes: elements sum to 32768"),
    (0, {"grad_shapes": [[256, 0], [256]]}, r"layers\[0\]\.grad_shapes\[0\]"),
    (1, {"colour": "red"}, r"layers\[1\]: unknown key"),
    (2, {"name": "fc1"}, r"layers\[2\]\.name: 'fc1' repeats layers\[0\]"),
    (1, {"name": ""}, r"layers\[1\]\.name"),
])
def test_bad_layer_names_its_index(index: int, change: dict, match: str) -> None:
    layers = [dict(d) for d in GOOD]
    layers[index].update(change)
    with pytest.raises(ValueError, match=match):
        model_from_layers(layers, "bad")


def test_missing_key_and_non_mapping() -> None:
    with pytest.raises(ValueError, match=r"layers\[0\]: missing key\(s\) fwd_flops"):
        model_from_layers([{"name": "a", "kind": "linear", "params": 1}], "bad")
    with pytest.raises(ValueError, match=r"layers\[1\]"):
        model_from_layers([GOOD[0], 42], "bad")
    with pytest.raises(ValueError, match="non-empty list"):
        model_from_layers([], "bad")
