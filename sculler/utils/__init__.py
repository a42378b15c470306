"""PaddlePaddle's ``paddle.utils`` helpers that v2 programs call (``merge_model``)."""
