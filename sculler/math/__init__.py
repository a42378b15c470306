"""Pure array kernels (numpy or cupy via ``get_array_module``); no framework objects here."""
