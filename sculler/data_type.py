"""Input types of data layers (``paddle.v2.data_type``): what a reader's field holds.

An :class:`InputType` is ``(dim, seq_type, type)``: the width (or dictionary size for ids), the
nesting (0 plain, 1 sequence, 2 sub-sequence) and the storage kind (dense, sparse with or
without values, integer index). The feeder converts each field by its type.
"""

from __future__ import annotations

__all__ = [
    "DataType", "SequenceType", "InputType", "dense_vector", "dense_array",
    "dense_vector_sequence", "dense_vector_sub_sequence", "integer_value",
    "integer_value_sequence", "integer_value_sub_sequence", "sparse_binary_vector",
    "sparse_binary_vector_sequence", "sparse_binary_vector_sub_sequence",
    "sparse_float_vector", "sparse_float_vector_sequence", "sparse_float_vector_sub_sequence",
    "sparse_vector", "sparse_vector_sequence", "sparse_vector_sub_sequence", "dense_slot",
    "sparse_non_value_slot", "sparse_value_slot", "index_slot", "integer_sequence",
]


class DataType:
    Dense = 0
    SparseNonValue = 1
    SparseValue = 2
    Index = 3


class SequenceType:
    NO_SEQUENCE = 0
    SEQUENCE = 1
    SUB_SEQUENCE = 2


# engine data-layer "kind" of each storage type (LayerConfig.attrs["kind"])
KIND_OF_TYPE = {
    DataType.Dense: "dense", DataType.SparseNonValue: "sparse_binary",
    DataType.SparseValue: "sparse_float", DataType.Index: "ids",
}
TYPE_OF_KIND = {v: k for k, v in KIND_OF_TYPE.items()}


class InputType:
    """Type of one data layer's field: ``dim``, ``seq_type`` (0/1/2) and ``type``."""

    __slots__ = ("dim", "seq_type", "type")

    def __init__(self, dim: int, seq_type: int, tp: int):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"an input type needs a positive int dim, got {dim!r}")
        if seq_type not in (0, 1, 2):
            raise ValueError(f"seq_type must be 0, 1 or 2, got {seq_type!r}")
        if tp not in KIND_OF_TYPE:
            raise ValueError(f"unknown data type {tp!r}; expected a DataType constant")
        self.dim = dim
        self.seq_type = seq_type
        self.type = tp

    @property
    def kind(self) -> str:
        return KIND_OF_TYPE[self.type]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InputType) and (self.dim, self.seq_type, self.type) == (
            other.dim, other.seq_type, other.type)

    def __hash__(self) -> int:
        return hash((self.dim, self.seq_type, self.type))

    def __repr__(self) -> str:
        return f"InputType(dim={self.dim}, seq_type={self.seq_type}, type={self.kind})"


def _maker(tp: int, seq: int, doc: str):
    def make(dim: int, seq_type: int = seq) -> InputType:
        return InputType(dim, seq_type, tp)

    make.__doc__ = doc
    return make


dense_vector = _maker(DataType.Dense, 0, "A dense float vector of width ``dim`` per sample.")
dense_array = dense_vector
dense_vector_sequence = _maker(DataType.Dense, 1, "A sequence of dense vectors.")
dense_vector_sub_sequence = _maker(DataType.Dense, 2, "A nested sequence of dense vectors.")


def integer_value(value_range: int, seq_type: int = 0) -> InputType:
    """One integer id in ``[0, value_range)`` per sample (PaddlePaddle's argument name)."""
    return InputType(value_range, seq_type, DataType.Index)


def integer_value_sequence(value_range: int, seq_type: int = 1) -> InputType:
    """A sequence of ids in ``[0, value_range)``."""
    return InputType(value_range, seq_type, DataType.Index)


integer_value_sub_sequence = _maker(DataType.Index, 2, "A nested sequence of ids.")
sparse_binary_vector = _maker(
    DataType.SparseNonValue, 0, "Column ids whose value is 1 (a 0/1 vector of width ``dim``).")
sparse_binary_vector_sequence = _maker(DataType.SparseNonValue, 1, "A sequence of them.")
sparse_binary_vector_sub_sequence = _maker(DataType.SparseNonValue, 2, "A nested sequence.")
sparse_float_vector = _maker(
    DataType.SparseValue, 0, "``(column id, value)`` pairs of a vector of width ``dim``.")
sparse_float_vector_sequence = _maker(DataType.SparseValue, 1, "A sequence of them.")
sparse_float_vector_sub_sequence = _maker(DataType.SparseValue, 2, "A nested sequence.")
sparse_vector = sparse_float_vector
sparse_vector_sequence = sparse_float_vector_sequence
sparse_vector_sub_sequence = sparse_float_vector_sub_sequence
# PyDataProvider2's names for the same types
dense_slot = dense_vector
sparse_non_value_slot = sparse_binary_vector
sparse_value_slot = sparse_float_vector
index_slot = integer_value
integer_sequence = integer_value_sequence
