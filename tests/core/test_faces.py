"""Each layer file declares its public faces; sculler.layer, the v1 helpers and the reference
page are built from those declarations, and unnamed layers get PaddlePaddle's names."""

import inspect
import pathlib
import pkgutil
import sys

import pytest

import sculler as paddle
import sculler.config.helpers as helpers
import sculler.layers
from sculler.core import faces as faces_module
from sculler.core.expression import reset_names
from sculler.core.faces import faces, layer_function
from sculler.reference import reference_markdown

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOT_DECLARED = {"make_layer", "as_inputs", "reset_names", "py_layer", "layer_support"}


def test_every_layer_module_is_imported_without_a_list():
    files = {m.name for m in pkgutil.iter_modules(sculler.layers.__path__)}
    assert files and all(f"sculler.layers.{name}" in sys.modules for name in files)


def test_every_v2_layer_function_is_declared_in_a_layer_file():
    declared = {f.function for f in faces()}
    group_names = set(paddle.layer._groups.__all__)
    for name in paddle.layer.__all__:
        obj = getattr(paddle.layer, name)
        if name in NOT_DECLARED or name in group_names or inspect.isclass(obj):
            continue
        assert obj in declared, f"paddle.layer.{name} is not declared with @layer_function"
    for face in faces():
        if face.module.startswith("sculler.layers."):
            for name in face.v2_names:
                assert getattr(paddle.layer, name) is face.function


def test_every_declared_v1_name_is_a_helper_that_adds_its_layer_to_the_config():
    for face in faces():
        for name in face.v1_names:
            assert name in helpers.__all__ and callable(getattr(helpers, name)), name
    assert helpers.full_matrix_projection is paddle.layer.full_matrix_projection  # plain
    assert helpers.img_conv_layer is not paddle.layer.img_conv  # adopts into the config


# PaddlePaddle 0.11's default names (trainer_config_helpers' wrap_name_default prefixes)
PADDLE_NAMES = [
    ("fc", dict(size=3), "__fc_layer_0__"),
    ("embedding", dict(size=3), "__embedding_0__"),
    ("pooling", {}, "__seq_pooling_0__"),
    ("last_seq", {}, "__last_seq_0__"),
    ("first_seq", {}, "__first_seq_0__"),
    ("kmax_seq_score", dict(beam_size=1), "__kmax_seq_score_layer_0__"),
    ("seq_reshape", dict(reshape_size=4), "__seqreshape_0__"),
    ("grumemory", {}, "__gru_0__"),
    ("lstmemory", {}, "__lstmemory_0__"),
    ("img_cmrnorm", dict(size=3), "__crmnorm_0__"),
    ("max_id", {}, "__maxid_layer_0__"),
    ("repeat", dict(num_repeats=2), "__repeat_layer_0__"),
    ("trans", {}, "__trans_layer_0__"),
    ("clip", dict(min=-1.0, max=1.0), "__clip_0__"),
    ("scale_shift", {}, "__scale_shift_0__"),
    ("sum_to_one_norm", {}, "__sum_to_one_norm_layer_0__"),
]


@pytest.mark.parametrize("fn, kwargs, expected", PADDLE_NAMES, ids=[r[0] for r in PADDLE_NAMES])
def test_unnamed_layers_get_paddles_default_names(fn, kwargs, expected):
    reset_names()
    if fn in ("pooling", "last_seq", "first_seq", "kmax_seq_score", "seq_reshape"):
        width = 1 if fn == "kmax_seq_score" else 12
        x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(width))
    elif fn == "embedding":
        x = paddle.layer.data(name="x", type=paddle.data_type.integer_value(10))
    elif fn == "img_cmrnorm":
        x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3 * 16),
                              height=4, width=4)
    else:
        x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector_sequence(12))
    out = getattr(paddle.layer, fn)(input=x, **kwargs)
    assert out.name == expected


def test_exp_activation_is_written_as_paddle_writes_it():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    y = paddle.layer.fc(input=x, size=2, act=paddle.activation.Exp())
    assert y.config.active_type == "exponential"
    assert helpers.ExpActivation().name == "exponential"


def test_a_declared_function_names_its_layers_with_its_prefix(monkeypatch):
    monkeypatch.setattr(faces_module, "_FACES", list(faces_module._FACES))

    @layer_function(v1=None, v2=False, prefix="my_scaled")
    def my_scaled(input, name=None):  # noqa: A002
        return paddle.layer.make_layer("addto", [input], name=name)

    reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    assert my_scaled(x).name == "__my_scaled_0__"
    assert my_scaled(x, name="s").name == "s"
    assert paddle.layer.make_layer("addto", [x]).name == "__addto_0__"  # no declared prefix


def test_the_reference_page_is_what_the_declarations_give():
    page = (ROOT / "docs" / "layer_reference.md").read_text()
    assert page == reference_markdown(), (
        "docs/layer_reference.md is stale: run "
        "`python -m sculler.reference > docs/layer_reference.md`")
    for face in faces():
        for name in face.v2_names:
            assert f"`{name}`" in page


def test_the_onnx_table_is_the_converters_declared_beside_the_layers():
    from sculler.core.faces import onnx_converters
    from sculler.onnx.convert import CONVERTERS

    assert CONVERTERS == onnx_converters()
    for type_name in ("fc", "embedding", "concat", "addto", "mixed", "exconv", "pool",
                      "batch_norm"):
        assert CONVERTERS[type_name].__module__.startswith("sculler.layers."), type_name


def test_parameters_record_the_dims_paddle_writes_where_they_differ():
    img = paddle.layer.data(name="img", type=paddle.data_type.dense_vector(3 * 8 * 8),
                            height=8, width=8)
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=4, name="c")
    bn = paddle.layer.batch_norm(input=conv, name="bn")
    a = paddle.layer.data(name="a", type=paddle.data_type.dense_vector(5))
    b = paddle.layer.data(name="b", type=paddle.data_type.dense_vector(6))
    t = paddle.layer.tensor(a=a, b=b, size=2, name="t")
    model = paddle.topology.Topology([bn, t]).proto()
    written = {p.name: (p.dims, p.paddle_dims) for p in model.parameters}
    assert written["_c.w0"] == ([4, 27], [])
    assert written["_c.wbias"] == ([1, 4], [4, 1])
    assert written["_bn.w0"] == ([1, 4], [])
    assert written["_bn.w1"] == ([1, 4], None)
    assert written["_t.w0"] == ([5, 12], [5, 6, 2])
