"""With use_gpu each trainer actor asks Ray for one GPU; checked on the CPU by the options the
actors would get, and on a CPU-only Ray cluster by the clear error before any trainer starts
(Ray would otherwise wait forever for a GPU)."""

import pytest

import sculler as paddle
from sculler import backend
from sculler.distributed import Cluster
from sculler.distributed.cluster import check_gpus, trainer_actor_options


def test_a_gpu_trainer_asks_for_one_gpu_and_a_cpu_trainer_for_none():
    assert trainer_actor_options(True) == {"max_restarts": 0, "num_cpus": 0, "num_gpus": 1}
    assert "num_gpus" not in trainer_actor_options(False)


def test_too_few_gpus_in_the_cluster_is_one_clear_error():
    check_gpus({"CPU": 16.0, "GPU": 2.0}, 2)
    with pytest.raises(ValueError, match="2 trainers need one GPU each but the Ray cluster "
                                         "has 1 GPUs"):
        check_gpus({"CPU": 16.0, "GPU": 1.0}, 2)


@pytest.mark.slow
def test_use_gpu_follows_init_unless_given(monkeypatch, ray_cluster):
    monkeypatch.setitem(backend._state, "use_gpu", True)  # as init(use_gpu=True) leaves it
    with Cluster(num_trainers=1, num_pservers=1) as cluster:
        assert cluster.use_gpu
    monkeypatch.setitem(backend._state, "use_gpu", False)
    with Cluster(num_trainers=1, num_pservers=1, use_gpu=True) as cluster:
        assert cluster.use_gpu


@pytest.mark.slow
def test_a_cpu_only_ray_cluster_refuses_gpu_trainers_before_starting_them(ray_cluster):
    paddle.layer.reset_names()
    paddle.init(seed=1)
    pixel = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(4))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    pred = paddle.layer.fc(input=pixel, size=2, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=pred, label=label)
    params = paddle.parameters.create(cost)

    def reader():
        yield [([0.1, 0.2, 0.3, 0.4], 1)] * 4

    with Cluster(num_trainers=1, num_pservers=1, use_gpu=True) as cluster:
        with pytest.raises(ValueError, match="need one GPU each but the Ray cluster has 0 GPUs"):
            cluster.train(cost, params, paddle.optimizer.Momentum(learning_rate=0.1), reader)
        assert cluster.trainers == []
