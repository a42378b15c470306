"""Eager mode: ``Tensor`` with tape autograd, creation and math ops (see ``docs/eager.md``)."""

from sculler.eager import ops as _ops  # noqa: F401 - binds the operators onto Tensor
