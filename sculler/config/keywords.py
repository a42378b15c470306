"""The keyword names ``Layer(...)`` and ``Settings(...)`` accept, so a misspelt one
(``activ_type``, ``num_pases``) is refused with the closest name instead of being stored.

The lists are facts read from PaddlePaddle 0.11's ``config_parser.py`` (every keyword of its
layer classes and of its ``settings`` / ``trainer_settings`` tables), so every keyword a valid
PaddlePaddle config passes is accepted, plus the settings Sculler's own layer classes read from
``LayerConfig.attrs``. A layer class of a user's own may name further settings it reads in a
``config_attrs`` tuple (``config_attrs = ("k",)``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sculler.core.suggest import refuse_unknown_keywords

# the keywords of PaddlePaddle's LayerBase and of every layer class of its config_parser
PADDLE_LAYER_KEYWORDS = frozenset("""
    active_type drop_rate device coeff error_clipping_threshold bias inputs size name type
    NDCG_num active_gate_type active_state_type as_row_vector aspect_ratio average_strategy
    axis background_id batch_norm_type beam_size blank ceil_mode confidence_threshold
    context_length cos_scale data_norm_strategy delta depth directions ends eos_id epsilon
    exclude_mode factor_size format has_selected_colums height img3D input_num intercept
    keep_top_k max max_size max_sort_size mean_var_names min min_size moving_average_fraction
    neg_overlap neg_pos_ratio neg_sampling_dist nms_threshold nms_top_k norm_by_times
    num_channels num_classes num_filters num_neg_samples offset output_max_index
    overlap_threshold partial_sum pooled_height pooled_width reshape reversed selected_indices
    selective_fc_full_mul_ratio selective_fc_parallel_plain_mul_thread_num
    selective_fc_pass_generation shape shared_biases slope softmax_selfnorm_alpha
    spatial_scale starts stride trans_type use_global_stats value variance width
""".split())

# settings Sculler's layer classes read from their config attrs (Layer(...) may set them)
SCULLER_LAYER_ATTRS = frozenset("""
    arg_name block_num_x block_num_y context_len context_start generator groups has_select
    norm_size norm_type out_channels out_height out_links out_size_x out_size_y out_width
    pool_type power proj pyramid_height scale select_first seq_pool_stride step_model
    trainable_padding with_weight kind seq_type neg_distribution out_depth slices
""".split())

# PaddlePaddle's Input(...) keywords beyond the parameter settings (ParameterConfig fields)
PADDLE_INPUT_KEYWORDS = frozenset("""
    initial_smart is_shared update_hooks input_layer_argument make_layer_name_in_submodel
    format nnz
""".split())

# PaddlePaddle's Settings(...) keys (config_parser's settings and trainer_settings tables)
PADDLE_SETTINGS = frozenset("""
    batch_size mini_batch_size algorithm async_lagged_grad_discard_ratio learning_method
    gradient_clipping_threshold num_batches_per_send_parameter num_batches_per_get_parameter
    center_parameter_update_method learning_rate learning_rate_decay_a learning_rate_decay_b
    learning_rate_schedule learning_rate_args l1weight l2weight l2weight_zero_iter c1 backoff
    owlqn_steps max_backoff average_window do_average_in_cpu max_average_window ada_epsilon
    ada_rou delta_add_rate shrink_parameter_value adam_beta1 adam_beta2 adam_epsilon save_dir
    init_model_path start_pass usage_ratio
""".split())

# what Sculler's settings(...), data_sources(...) and define_py_data_sources2 record
SCULLER_SETTINGS = frozenset("""
    regularization model_average num_passes train_source test_source input_types
""".split())


def check_layer_keywords(name: str, type_name: str, given: Iterable[str],
                         layer_class: type) -> None:
    """Refuse a ``Layer(...)`` keyword no layer reads, naming the closest known one."""
    known = (PADDLE_LAYER_KEYWORDS | SCULLER_LAYER_ATTRS
             | frozenset(getattr(layer_class, "config_attrs", ())))
    refuse_unknown_keywords(f"Layer {name!r} (type {type_name!r})", given, known)


def check_settings_keywords(given: Iterable[str]) -> None:
    """Refuse a ``Settings(...)`` key PaddlePaddle and Sculler do not know."""
    refuse_unknown_keywords("Settings", given, PADDLE_SETTINGS | SCULLER_SETTINGS)


def check_input_keywords(layer_name: str, given: Iterable[str],
                         parameter_keys: Iterable[str]) -> None:
    """Refuse an ``Input(...)`` keyword that is neither a weight setting nor an input setting
    a layer reads (``Input("x", inital_std=0.1)`` names ``initial_std``)."""
    known = (PADDLE_INPUT_KEYWORDS | PADDLE_LAYER_KEYWORDS | SCULLER_LAYER_ATTRS
             | frozenset(parameter_keys))
    refuse_unknown_keywords(f"Input({layer_name!r})", given, known)
