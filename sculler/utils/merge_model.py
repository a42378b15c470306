"""``paddle.utils.merge_model``: one file holding a network's config and its parameters, for
deployment (read back with ``sculler.inference.load_inference_model``)."""

from __future__ import annotations

from typing import Any

from sculler.fileio import check_input_path
from sculler.parameters import Parameters
from sculler.proto.files import write_merged_model

__all__ = ["merge_v2_model"]


def merge_v2_model(net: Any, param_file: str, output_file: str) -> None:
    """Merge the network ending in ``net`` (the inference output layer) with the parameters
    in ``param_file`` (a v2 parameter tar, gzip-compressed as PaddlePaddle's trainers save it,
    or plain) into ``output_file``, in PaddlePaddle's merged-model layout."""
    import gzip

    path = check_input_path(param_file, "merge_v2_model")
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gzipped else open
    with opener(path, "rb") as fh:
        params = Parameters.from_tar(fh)
    write_merged_model(net, params, output_file)
