"""sculler.onnx.export: onnxruntime's outputs equal paddle.infer's (1e-5) on the digits MLP and
CNN demos and on small cases of every exported layer kind; other layers are refused by name."""

from __future__ import annotations

import runpy

import numpy as np
import pytest

import sculler as paddle
from sculler.onnx import UnsupportedLayerError, export

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

A = paddle.activation
RNG = np.random.RandomState(0)


def randomize(params, seed: int = 0, low: float | None = None) -> None:
    """Every parameter random (moving variances positive), so nothing hides behind zeros."""
    rng = np.random.RandomState(seed)
    for name in params.names():
        value = rng.uniform(0.1, 1.0, params.get_shape(name)) if low is not None or (
            name.endswith(".w2")) else rng.randn(*params.get_shape(name)) * 0.5
        params.set(name, value.astype(np.float32))


def check(outputs, feeds: dict[str, np.ndarray], tmp_path, params=None, atol=1e-5,
          opset=None):
    """Export ``outputs`` and compare onnxruntime with paddle.infer on ``feeds``."""
    outputs = outputs if isinstance(outputs, list) else [outputs]
    if params is None:
        params = paddle.parameters.create(outputs)
        randomize(params)
    path = tmp_path / "model.onnx"
    export(outputs if len(outputs) > 1 else outputs[0], params, path, opset=opset)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in session.get_inputs()) == sorted(feeds)
    assert [o.name for o in session.get_outputs()] == [o.name for o in outputs]
    got = session.run(None, feeds)
    topo_order = [name for name, _ in paddle.topology.Topology(outputs).data_type()]
    samples = list(zip(*(feeds[n] for n in topo_order)))
    want = paddle.infer(output_layer=outputs, parameters=params, input=samples,
                        flatten_result=False)
    want = want if isinstance(want, list) else [want]
    for o, g, w in zip(outputs, got, want):
        assert g.shape == w.shape, o.name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol, err_msg=o.name)
    return session


def dense(name: str, dim: int, **kw):
    return paddle.layer.data(name=name, type=paddle.data_type.dense_vector(dim), **kw)


def test_digits_mlp_demo_matches_infer(tmp_path):
    g = runpy.run_path("demo/recognize_digits.py")
    params = paddle.parameters.create(g["cost"])
    x = np.stack([s[0] for s in list(paddle.dataset.digits.test()())[:50]]).astype(np.float32)
    check(g["predict"], {"pixel": x}, tmp_path, params=params)


def test_cnn_demo_with_dropout_matches_infer(tmp_path):
    g = runpy.run_path("demo/cnn_digits.py")
    params = paddle.parameters.create(g["cost"])
    randomize(params, seed=3)
    x = np.stack([s[0] for s in list(paddle.dataset.digits.test()())[:20]]).astype(np.float32)
    check(g["predict"], {"pixel": x}, tmp_path, params=params)


ACTIVATIONS = [A.Linear(), A.Sigmoid(), A.Tanh(), A.Relu(), A.BRelu(), A.SoftRelu(),
               A.STanh(), A.Softmax(), A.Exp(), A.Log(), A.Abs(), A.Square(), A.Sqrt(),
               A.Reciprocal(), A.SoftSign()]


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda a: a.name)
def test_every_activation_on_a_two_input_fc(act, tmp_path):
    paddle.layer.reset_names()
    a, b = dense("a", 5), dense("b", 3)
    positive = act.name in ("log", "sqrt", "reciprocal")
    out = paddle.layer.fc(input=[a, b], size=4, act=act)
    params = paddle.parameters.create(out)
    randomize(params, low=0.1 if positive else None)
    lo = 0.1 if positive else -2.0
    feeds = {"a": RNG.uniform(lo, 2.0, (6, 5)).astype(np.float32),
             "b": RNG.uniform(lo, 2.0, (6, 3)).astype(np.float32)}
    check(out, feeds, tmp_path, params=params)


def test_mixed_projections_and_operator(tmp_path):
    paddle.layer.reset_names()
    x, y = dense("x", 6), dense("y", 6)
    ids = paddle.layer.data(name="ids", type=paddle.data_type.integer_value(9))
    L = paddle.layer
    out = L.mixed(size=6, bias_attr=True, act=A.Tanh(), input=[
        L.full_matrix_projection(x, size=6), L.trans_full_matrix_projection(y, size=6),
        L.table_projection(ids, size=6), L.identity_projection(x), L.dotmul_projection(y),
        L.scaling_projection(x), L.dotmul_operator(a=x, b=y, scale=0.5)])
    window = L.mixed(size=3, input=[L.identity_projection(x, offset=2, size=3)])
    placed = L.mixed(size=10, input=[L.identity_projection(y, offset=3, size=10),
                                     L.full_matrix_projection(x, size=10)])
    feeds = {"x": RNG.randn(5, 6).astype(np.float32), "y": RNG.randn(5, 6).astype(np.float32),
             "ids": RNG.randint(0, 9, 5).astype(np.int64)}
    check([out, window, placed], feeds, tmp_path)


def test_embedding_concat_addto_dropout(tmp_path):
    paddle.layer.reset_names()
    ids = paddle.layer.data(name="word", type=paddle.data_type.integer_value(20))
    x = dense("x", 4)
    emb = paddle.layer.embedding(input=ids, size=4)
    cat = paddle.layer.concat(input=[emb, x], act=A.Relu(), bias_attr=True)
    add = paddle.layer.addto(input=[emb, x], bias_attr=True, act=A.Sigmoid())
    drop = paddle.layer.dropout(input=add, dropout_rate=0.3)
    out = paddle.layer.fc(input=[cat, drop], size=3, act=A.Softmax())
    feeds = {"word": RNG.randint(0, 20, 7).astype(np.int64),
             "x": RNG.randn(7, 4).astype(np.float32)}
    check([out, drop], feeds, tmp_path)


@pytest.mark.parametrize("shared_biases", [True, False])
def test_conv_groups_stride_dilation_and_pools(shared_biases, tmp_path):
    paddle.layer.reset_names()
    img = dense("img", 4 * 9 * 9, height=9, width=9)
    conv = paddle.layer.img_conv(input=img, filter_size=3, num_filters=6, num_channels=4,
                                 groups=2, stride=2, padding=2, dilation=2, act=A.Relu(),
                                 shared_biases=shared_biases)
    conv2 = paddle.layer.img_conv(input=img, filter_size=2, filter_size_y=3, num_filters=3,
                                  num_channels=4, padding=1, padding_y=0, bias_attr=False)
    maxp = paddle.layer.img_pool(input=conv, pool_size=3, stride=2, padding=1)
    avgp = paddle.layer.img_pool(input=conv2, pool_size=2, stride=2, padding=1,
                                 pool_type=paddle.pooling.Avg())
    avg_in = paddle.layer.img_pool(input=conv2, pool_size=3, stride=2, padding=1,
                                   pool_type=paddle.pooling.Avg(), exclude_mode=False)
    check([maxp, avgp, avg_in], {"img": RNG.randn(3, 324).astype(np.float32)}, tmp_path)


def test_batch_norm_uses_the_moving_statistics(tmp_path):
    paddle.layer.reset_names()
    img = dense("img", 2 * 4 * 4, height=4, width=4)
    bn_img = paddle.layer.batch_norm(input=img, act=A.Relu(), num_channels=2)
    flat = dense("flat", 5)
    bn_flat = paddle.layer.batch_norm(input=flat, epsilon=1e-3)
    feeds = {"img": RNG.randn(4, 32).astype(np.float32),
             "flat": RNG.randn(4, 5).astype(np.float32)}
    check([bn_img, bn_flat], feeds, tmp_path)


def test_layers_it_cannot_express_are_refused_by_name(tmp_path):
    paddle.layer.reset_names()
    words = paddle.layer.data(name="words",
                              type=paddle.data_type.sparse_binary_vector(10))
    emb = paddle.layer.fc(input=words, size=3, name="emb")
    x, y = dense("x", 4), dense("y", 4)
    cos = paddle.layer.cos_sim(a=x, b=y, name="similarity")
    seq_act = paddle.layer.fc(input=x, size=3, act=A.SequenceSoftmax(), name="seqsoft")
    params = paddle.parameters.create([emb, cos, seq_act])
    with pytest.raises(UnsupportedLayerError) as info:
        export([emb, cos, seq_act], params, tmp_path / "m.onnx")
    msg = str(info.value)
    assert "'words' (data layer" in msg and "'similarity' (type cos)" in msg
    assert "'seqsoft' (type fc): activation 'sequence_softmax'" in msg
    assert not (tmp_path / "m.onnx").exists()
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(3))
    predict = paddle.layer.fc(input=x, size=3, act=A.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=label)
    with pytest.raises(UnsupportedLayerError, match=r"\(type multi-class-cross-entropy\)"):
        export(cost, paddle.parameters.create(cost), tmp_path / "m.onnx")


def test_an_input_of_the_wrong_kind_is_refused_by_name(tmp_path):
    paddle.layer.reset_names()
    ids = paddle.layer.data(name="ids", type=paddle.data_type.integer_value(5))
    out = paddle.layer.fc(input=ids, size=2, name="over_ids")
    with pytest.raises(UnsupportedLayerError, match=r"'over_ids' \(fc\): input 0 \('ids'\)"):
        export(out, paddle.parameters.create(out), tmp_path / "m.onnx")


@pytest.mark.parametrize("opset", [13, 19])
def test_opsets(opset, tmp_path):
    paddle.layer.reset_names()
    x = dense("x", 3)
    out = paddle.layer.fc(input=x, size=2, act=A.Softmax())
    params = paddle.parameters.create(out)
    check(out, {"x": RNG.randn(2, 3).astype(np.float32)}, tmp_path, params=params, opset=opset)
    import onnx

    model = onnx.load(str(tmp_path / "model.onnx"))
    assert model.opset_import[0].version == opset
    # The IR version is the opset's own (7 for 13, 9 for 19), not the installed onnx's newest,
    # so an onnxruntime older than onnx still loads the file.
    assert model.ir_version == {13: 7, 19: 9}[opset] < onnx.IR_VERSION
    with pytest.raises(ValueError, match="opset 11 is too old"):
        export(out, params, tmp_path / "m.onnx", opset=11)


@pytest.mark.parametrize("shared_biases", [True, False])
def test_3d_convolutions_pools_and_batch_norm(shared_biases, tmp_path):
    paddle.layer.reset_names()
    vol = dense("vol", 4 * 4 * 5 * 6, depth=4, height=5, width=6)
    conv = paddle.layer.img_conv3d(input=vol, filter_size=[3, 2, 2], num_filters=6, groups=2,
                                   stride=[2, 1, 1], padding=[1, 0, 1], act=A.Relu(),
                                   shared_biases=shared_biases)
    deconv = paddle.layer.img_conv3d(input=vol, filter_size=2, num_filters=4, groups=2,
                                     stride=2, padding=[1, 0, 0], trans=True,
                                     shared_biases=shared_biases)
    maxp = paddle.layer.img_pool3d(input=conv, pool_size=3, stride=2, padding=1)
    avgp = paddle.layer.img_pool3d(input=deconv, pool_size=[3, 2, 2], stride=2, padding=1,
                                   pool_type=paddle.pooling.Avg())
    bn = paddle.layer.batch_norm(input=avgp, img3D=True, act=A.Tanh())
    check([maxp, bn], {"vol": RNG.randn(3, 480).astype(np.float32)}, tmp_path)


@pytest.mark.parametrize("strategy", ["z-score", "min-max", "decimal-scaling"])
def test_data_norm_with_its_statistics(strategy, tmp_path):
    from sculler.core.expression import LayerOutput
    from sculler.core.model_config import InputConfig, LayerConfig
    paddle.layer.reset_names()
    x = dense("x", 4)
    config = LayerConfig("norm", "data_norm", inputs=[InputConfig("x", "_norm.w0")],
                         attrs={"data_norm_strategy": strategy})
    norm = LayerOutput(config, [x], weight_attrs=[{"is_static": True}])
    check(norm, {"x": RNG.randn(3, 4).astype(np.float32)}, tmp_path)


def test_slice_projection_of_a_convolution(tmp_path):
    paddle.layer.reset_names()
    img = dense("img", 2 * 3 * 3, height=3, width=3)
    conv = paddle.layer.img_conv(input=img, filter_size=1, num_filters=5)
    sliced = paddle.layer.mixed(input=paddle.layer.slice_projection(conv, [[0, 2], [3, 4]]),
                                act=A.Tanh(), bias_attr=True)
    check(sliced, {"img": RNG.randn(3, 18).astype(np.float32)}, tmp_path)


@pytest.mark.gpu
def test_a_model_trained_on_the_gpu_exports_and_matches_infer(tmp_path):
    """A model whose parameters live and train on the GPU exports from their host copies, and
    onnxruntime gives what paddle.infer gives there."""
    from sculler import backend

    paddle.init(use_gpu=True, seed=3)
    try:
        pixel = dense("pixel", 16)
        hidden = paddle.layer.fc(input=pixel, size=8, act=A.Relu())
        out = paddle.layer.fc(input=hidden, size=3, act=A.Softmax())
        label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(3))
        cost = paddle.layer.classification_cost(input=out, label=label)
        params = paddle.parameters.create(cost)
        trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.1,
                                                                             momentum=0.9))
        x = RNG.randn(64, 16).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)
        first = params.names()[0]
        assert backend.is_gpu_array(params._parameter(first).value)
        before = params.get(first)
        trainer.train(reader=paddle.batch(lambda: iter(zip(x, y.tolist())), 16), num_passes=2)
        assert not np.allclose(params.get(first), before)  # trained there
        check(out, {"pixel": x[:10]}, tmp_path, params=params)
    finally:
        paddle.init(use_gpu=False)
