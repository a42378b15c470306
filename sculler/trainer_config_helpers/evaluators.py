"""PaddlePaddle's ``trainer_config_helpers.evaluators``: see :mod:`sculler.config.evaluators`."""

from sculler.config.evaluators import *  # noqa: F403
