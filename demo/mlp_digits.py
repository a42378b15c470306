"""The main job: an MLP digit classifier on the offline 8x8 digits (v1 config).

Run: ``sculler train --config demo/mlp_digits.py`` (``--config_args hidden=256`` to widen it).
Settings are the PaddlePaddle book's recognize_digits ones: the gradient is the sum over the
batch, hence ``learning_rate = 0.1 / 128``.
"""

from sculler.config.helpers import *  # noqa: F403

hidden = get_config_arg("hidden", int, 128)  # noqa: F405

settings(  # noqa: F405
    batch_size=128,
    learning_rate=0.1 / 128,
    learning_method=MomentumOptimizer(0.9),  # noqa: F405
    regularization=L2Regularization(0.0005 * 128),  # noqa: F405
    num_passes=30,
)
data_sources(train="sculler.dataset.digits:train", test="sculler.dataset.digits:test")  # noqa: F405

pixel = data_layer(name="pixel", size=64)  # noqa: F405
label = data_layer(name="label", size=10)  # noqa: F405
h1 = fc_layer(input=pixel, size=hidden, act=ReluActivation())  # noqa: F405
h2 = fc_layer(input=h1, size=64, act=ReluActivation())  # noqa: F405
predict = fc_layer(input=h2, size=10, act=SoftmaxActivation())  # noqa: F405
outputs(classification_cost(input=predict, label=label))  # noqa: F405
