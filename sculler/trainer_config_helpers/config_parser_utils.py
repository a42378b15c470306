"""PaddlePaddle's ``trainer_config_helpers.config_parser_utils`` (implemented in sculler.config)."""

from sculler.config.parser_utils import *  # noqa: F403
