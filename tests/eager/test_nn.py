"""nn.Layer registration and state, the built-in modules and the losses."""

import numpy as np
import pytest

import sculler as paddle
import sculler.nn.functional as F
from sculler import nn


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.Tanh()
        self.head = nn.Sequential(nn.Linear(3, 2, bias_attr=False), nn.Softmax())
        self.scale = self.create_parameter([1], default_initializer=nn.initializer.Constant(2.0))
        self.note = "not a parameter"

    def forward(self, x):
        return self.head(self.act(self.fc1(x))) * self.scale


def test_parameters_register_by_attribute_and_follow_the_optimizer_protocol():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "head.0.weight"]
    assert list(net.state_dict()) == names
    w = net.fc1.weight
    assert w.shape == [4, 3] and w.dtype == np.float32
    assert w.stop_gradient is False and w.trainable
    assert w.optimize_attr == {"learning_rate": 1.0}
    assert len({p.name for p in net.parameters()}) == 4
    assert net.head[0].bias is None and len(net.head) == 2
    np.testing.assert_array_equal(net.fc1.bias.numpy(), np.zeros(3))
    assert net.scale.numpy().tolist() == [2.0]
    w.trainable = False
    assert w.stop_gradient is True


def test_backward_reaches_every_parameter():
    net = Net()
    out = net(paddle.randn([5, 4]))
    assert out.shape == [5, 2]
    out.sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
    net.clear_gradients()
    assert all(p.grad is None for p in net.parameters())


def test_set_state_dict_copies_values_and_reports_keys():
    a, b = Net(), Net()
    missing, unexpected = b.set_state_dict({**a.state_dict(), "extra": np.zeros(1)})
    assert missing == [] and unexpected == ["extra"]
    for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
        assert pa is not pb
    with pytest.raises(ValueError, match="fc1.weight.*shape"):
        b.set_state_dict({"fc1.weight": np.zeros((2, 2))})


def test_train_eval_toggle_dropout():
    paddle.seed(0)
    model = nn.Sequential(nn.Dropout(0.5))
    x = paddle.ones([1000])
    y = model(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    model.eval()
    assert not model[0].training
    np.testing.assert_array_equal(model(x).numpy(), x.numpy())
    model.train()
    assert model[0].training


def test_linear_matches_formula_and_weight_attr():
    lin = nn.Linear(3, 2, weight_attr=paddle.ParamAttr(
        name="my_w", initializer=nn.initializer.Constant(0.5), learning_rate=0.1))
    assert lin.weight.name == "my_w" and lin.weight.optimize_attr["learning_rate"] == 0.1
    x = paddle.to_tensor([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(lin(x).numpy(), [[3.0, 3.0]])
    with pytest.raises(ValueError, match=r"\[\.\.\., 3\]"):
        lin(paddle.ones([1, 4]))
    with pytest.raises(ValueError, match="positive int"):
        nn.Linear(0, 2)


def test_embedding_lookup_padding_and_gradient():
    emb = nn.Embedding(5, 3, padding_idx=0)
    ids = paddle.to_tensor([[1, 0], [1, 4]])
    out = emb(ids)
    assert out.shape == [2, 2, 3]
    np.testing.assert_array_equal(out.numpy()[0, 1], np.zeros(3))
    out.sum().backward()
    g = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g[:, 0], [0.0, 2.0, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        emb(paddle.to_tensor([7]))


def test_losses_match_numpy():
    x = paddle.to_tensor(np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]]))
    label = paddle.to_tensor(np.array([[0], [2]]))
    logp = x.numpy() - np.log(np.exp(x.numpy()).sum(1, keepdims=True))
    want = -(logp[0, 0] + logp[1, 2]) / 2
    assert np.isclose(nn.CrossEntropyLoss()(x, label).item(), want)
    a, b = paddle.to_tensor([1.0, 2.0]), paddle.to_tensor([0.0, 4.0])
    assert np.isclose(nn.MSELoss()(a, b).item(), 2.5)
    assert np.isclose(nn.MSELoss("sum")(a, b).item(), 5.0)
    assert np.isclose(nn.L1Loss()(a, b).item(), 1.5)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss("avg")
    with pytest.raises(TypeError, match="integers"):
        F.cross_entropy(x, paddle.to_tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        F.cross_entropy(x, paddle.to_tensor([0, 5]))


def test_activation_modules_and_functional_relu():
    x = paddle.to_tensor([-1.0, 0.5])
    assert nn.ReLU()(x).tolist() == [0.0, 0.5]
    assert F.relu(x).tolist() == [0.0, 0.5]
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp([1.0, -0.5])),
                               rtol=1e-6)
    np.testing.assert_allclose(nn.Softmax()(x).numpy().sum(), 1.0, rtol=1e-6)
    with pytest.raises(TypeError, match="Sequential takes"):
        nn.Sequential(3)


def test_layer_without_super_init_raises_clearly():
    class Bad(nn.Layer):
        def __init__(self):
            self.w = 1

    with pytest.raises(RuntimeError, match="super"):
        Bad()


def test_buffers_are_saved_and_reassignable():
    layer = nn.Layer()
    layer.register_buffer("mean", paddle.zeros([2]))
    layer.register_buffer("scratch", paddle.zeros([1]), persistable=False)
    layer.mean = paddle.ones([2])
    assert list(layer.state_dict()) == ["mean"]
    assert layer.state_dict()["mean"].tolist() == [1.0, 1.0]
    assert layer.parameters() == []
