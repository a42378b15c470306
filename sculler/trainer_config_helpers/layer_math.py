"""PaddlePaddle's ``trainer_config_helpers.layer_math``: see :mod:`sculler.op`."""

from sculler.op import *  # noqa: F403
