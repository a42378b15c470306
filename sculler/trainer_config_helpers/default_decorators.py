"""PaddlePaddle's ``trainer_config_helpers.default_decorators`` (implemented in sculler.config)."""

from sculler.config.parser_utils import *  # noqa: F403
