"""PaddlePaddle's ``paddle.trainer_config_helpers`` under Sculler: a v1 config written for
PaddlePaddle runs with only its import changed::

    from sculler.trainer_config_helpers import *   # was: from paddle.trainer_config_helpers ...

Everything lives in :mod:`sculler.config` (layers declared in their own files, networks,
evaluators, activations, poolings, attrs, optimizers, data sources, ``layer_math``,
``config_parser_utils``); this package gives it PaddlePaddle's module names.
"""

from sculler.config.helpers import *  # noqa: F403
from sculler.config.helpers import __all__ as _helpers_all
from sculler.config.parser_utils import *  # noqa: F403
from sculler.config.parser_utils import __all__ as _utils_all

__all__ = [*_helpers_all, *_utils_all]
