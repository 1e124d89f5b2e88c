"""The torch importer against hand counts on tiny models built on the meta device."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from simdist.workload.torch_import import import_model  # noqa: E402

from . import tiny_models  # noqa: E402

MOD = tiny_models.__name__


def test_mlp_by_hand() -> None:
    m = import_model(f"{MOD}:tiny_mlp", [4, 8])
    assert [l.name for l in m.layers] == ["0", "1", "2"]
    assert [l.kind for l in m.layers] == ["linear", "activation", "linear"]
    fc1, relu, fc2 = m.layers
    assert fc1.params == 8 * 16 + 16 and fc1.grad_shapes == ((16, 8), (16,))
    assert fc1.fwd_flops == 2 * 8 * 16  # per sample: the batch of 4 is divided out
    assert (fc1.input_elems, fc1.output_elems, fc1.saved_elems) == (8, 16, 8)
    assert relu.fwd_flops == 0 and relu.saved_elems == 16
    assert fc2.fwd_flops == 2 * 16 * 4
    assert m.params == 8 * 16 + 16 + 16 * 4 + 4
    assert m.name == f"{MOD}:tiny_mlp"


def test_cnn_by_hand() -> None:
    m = import_model(f"{MOD}:tiny_cnn", (2, 3, 8, 8), name="tiny")
    conv, bn, relu, pool, flat, fc = m.layers
    assert m.name == "tiny"
    assert conv.kind == "conv" and conv.grad_shapes == ((4, 3, 3, 3), (4,))
    assert conv.fwd_flops == 2 * (4 * 8 * 8) * (3 * 3 * 3)
    assert conv.input_elems == 3 * 8 * 8 and conv.output_elems == 4 * 8 * 8
    assert bn.kind == "norm" and bn.params == 8
    assert pool.kind == "pool" and pool.output_elems == 4 * 4 * 4
    assert flat.kind == "other"
    assert fc.fwd_flops == 2 * 64 * 10
    for layer in m.layers:
        assert sum(math.prod(s) for s in layer.grad_shapes) == layer.params


def test_embedding_with_integer_input() -> None:
    m = import_model(f"{MOD}:tiny_embedding", [2, 7], input_dtype="int64", tokens_per_sample=7)
    emb, fc = m.layers
    assert emb.kind == "embedding" and emb.grad_shapes == ((100, 16),)
    assert emb.output_elems == 7 * 16
    assert fc.fwd_flops == 2 * 7 * 16 * 16 and fc.grad_shapes == ((16, 16),)
    assert m.tokens_per_sample == 7


def test_direct_params_and_functional_flops_are_kept() -> None:
    m = import_model(f"{MOD}:tiny_functional", [3, 6])
    assert m.layers[0].name == "_Scaled.(direct)"
    assert m.layers[0].grad_shapes == ((6,), (6, 3))
    assert m.params == 6 + 18 + 36 + 6
    assert m.layers[-1].name == "(functional)"
    assert m.layers[-1].fwd_flops == 2 * 6 * 3  # the x @ proj outside any leaf
    assert sum(math.prod(s) for _, s in m.gradients_backward_order()) == m.params


def test_module_called_twice_sums_flops_once_params() -> None:
    m = import_model(f"{MOD}:shared_twice", [1, 5])
    (fc,) = m.layers
    assert fc.params == 30
    assert fc.fwd_flops == 2 * (2 * 5 * 5)


@pytest.mark.parametrize("factory,match", [
    ("no_colon_here", "expected 'package.module:callable'"),
    (":tiny_mlp", "expected 'package.module:callable'"),
    ("simdist_no_such_pkg.models:net", "cannot import 'simdist_no_such_pkg.models'"),
    (f"{MOD}:missing", "has no attribute 'missing'"),
    (f"{MOD}:NOT_CALLABLE", "is not callable"),
    (f"{MOD}:broken", "failed: RuntimeError: no such checkpoint"),
    (f"{MOD}:not_a_module", "returned int"),
])
def test_bad_factories_raise_clear_errors(factory: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        import_model(factory, [1, 8])


def test_bad_shapes_and_forward_failure() -> None:
    with pytest.raises(ValueError, match="input_shape"):
        import_model(f"{MOD}:tiny_mlp", [])
    with pytest.raises(ValueError, match="input_shape"):
        import_model(f"{MOD}:tiny_mlp", [2, 0])
    with pytest.raises(ValueError, match="forward .* failed"):
        import_model(f"{MOD}:tiny_mlp", [2, 9])  # wrong feature size
    with pytest.raises(ValueError, match="input_dtype"):
        import_model(f"{MOD}:tiny_mlp", [2, 8], input_dtype="float99")
