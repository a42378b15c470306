"""Model programs in PaddlePaddle v2 style (issue 22): each trains a few batches on synthetic
data and runs inference, as a 2017 user's script would, with only the import changed."""

import pytest

import sculler as paddle


@pytest.fixture(autouse=True)
def fresh_program():
    """Each program starts as a new process would: layer numbering from 0, seed fixed."""
    paddle.layer.reset_names()
    paddle.init(use_gpu=False, trainer_count=1, seed=7)
    yield
