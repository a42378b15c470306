"""Built-in layers, one family per module; importing this package registers them all.

Every module of this package is imported here, found by listing the package (no hand-kept
list): a new layer file is registered, and its declared v2/v1 functions exported, by existing.
``sculler/__init__.py`` imports this package first, so every built-in type is registered before
any lookup (``sculler.core.layer.get_layer_class``). Imports run one way: this package ->
families -> core; core never imports it."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
