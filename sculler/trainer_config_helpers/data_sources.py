"""PaddlePaddle's ``trainer_config_helpers.data_sources`` (implemented in sculler.config)."""

from sculler.config.data_provider import *  # noqa: F403
