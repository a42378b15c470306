"""Mistakes in v1 configs are refused with one clear error, never stored or ignored: unknown
keywords to Layer / Settings / settings / any helper (with the closest name), config_args the
config never reads, --num_passes 0, and non-integral batch sizes, pass counts and sizes.
Every keyword a valid PaddlePaddle config passes is still accepted."""

import pytest

import sculler as paddle
from sculler import cli
from sculler.config.config_parser import (
    Input,
    Layer,
    Settings,
    config_scope,
    finish_config,
    get_config_arg,
    parse_config,
)
from sculler.core.layer import register_layer
from sculler.layers.fc import FCLayer
from sculler.trainer_config_helpers import (
    data_layer,
    fc_layer,
    settings,
    simple_img_conv_pool,
)


def test_layer_refuses_a_misspelt_keyword():
    with config_scope():
        Layer(name="x", type="data", size=4)
        with pytest.raises(TypeError, match=r"Layer 'h' \(type 'fc'\): unknown keyword "
                                            r"argument 'activ_type'; did you mean 'active_type'"):
            Layer(name="h", type="fc", size=3, inputs=["x"], activ_type="softmax")


def test_input_refuses_a_misspelt_weight_setting():
    with pytest.raises(TypeError, match=r"Input\('x'\): unknown keyword argument "
                                        r"'inital_std'; did you mean 'initial_std'"):
        Input("x", inital_std=0.1)
    assert Input("x", parameter_name="w", initial_std=0.1, learning_rate=2.0).param_attrs == {
        "initial_std": 0.1, "learning_rate": 2.0}


def test_layer_accepts_paddles_keywords_and_a_custom_layers_declared_ones():
    @register_layer("mistakes_test_scaled_fc")
    class _Scaled(FCLayer):
        config_attrs = ("k",)

    with config_scope() as ctx:
        Layer(name="x", type="data", size=4)
        Layer(name="h", type="fc", size=3, inputs=[Input("x")], device=-1,
              error_clipping_threshold=10.0, drop_rate=0.5)
        Layer(name="s", type="mistakes_test_scaled_fc", size=2, inputs=["h"], k=0.3)
        with pytest.raises(TypeError, match="'kk'; did you mean 'k'"):
            Layer(name="t", type="mistakes_test_scaled_fc", size=2, inputs=["h"], kk=0.3)
        model = finish_config(ctx)
    assert model.layers[-1].attrs["k"] == 0.3


@pytest.mark.parametrize("call, message", [
    (lambda x: fc_layer(input=x, sise=3), "fc_layer/fc: unknown keyword argument 'sise'; "
                                          "did you mean 'size'"),
    (lambda x: simple_img_conv_pool(input=x, filter_size=3, num_filters=2, pool_size=2,
                                    num_channel=1, pool_strid=1),
     "simple_img_conv_pool: unknown keyword argument 'pool_strid'; did you mean 'pool_stride'"),
])
def test_helpers_refuse_a_misspelt_keyword(call, message):
    with config_scope():
        x = data_layer(name="x", size=16, height=4, width=4)
        with pytest.raises(TypeError, match=message):
            call(x)


def test_v2_layer_function_refuses_a_misspelt_keyword():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(4))
    with pytest.raises(TypeError, match="'acts'; did you mean 'act'"):
        paddle.layer.fc(input=x, size=2, acts=paddle.activation.Tanh())


def test_settings_refuses_misspelt_keywords_and_non_integral_ints():
    with config_scope() as ctx:
        with pytest.raises(TypeError, match="'num_pases'; did you mean 'num_passes'"):
            settings(batch_size=12, num_pases=5)
        with pytest.raises(ValueError, match="settings: batch_size must be an int, got 12.7"):
            settings(batch_size=12.7)
        with pytest.raises(ValueError, match="settings: num_passes must be a positive int"):
            settings(batch_size=12, num_passes=0)
        with pytest.raises(ValueError, match="num_passes must be an int, got 2.5"):
            settings(batch_size=12, num_passes=2.5)
        with pytest.raises(TypeError, match="'learning_rat'; did you mean "
                                            "'learning_rate'"):
            Settings(learning_rat=0.1)
        settings(batch_size=128.0, learning_rate=0.1, learning_rate_decay_a=0.5,
                 learning_rate_decay_b=0.75, learning_rate_schedule="poly",
                 model_average=None, num_passes=3)
        Settings(mini_batch_size=4, save_dir="out")  # PaddlePaddle's own raw settings keys
    assert ctx.settings["batch_size"] == 128 and type(ctx.settings["batch_size"]) is int
    assert ctx.settings["num_passes"] == 3
    assert ctx.settings["learning_rate_schedule"] == "poly"


@pytest.mark.parametrize("make", [
    lambda: Layer(name="h", type="fc", size=3.5, inputs=["x"]),
    lambda: fc_layer(input="x" and data_layer(name="y", size=2), size=3.5),
])
def test_layer_sizes_are_not_truncated(make):
    with config_scope():
        Layer(name="x", type="data", size=4)
        with pytest.raises(ValueError, match="size must be an int, got 3.5"):
            make()


def _config_file(tmp_path):
    path = tmp_path / "config.py"
    path.write_text(
        "from sculler.trainer_config_helpers import *\n"
        "hidden = get_config_arg('hidden', int, 8)\n"
        "outputs(fc_layer(input=data_layer(name='x', size=4), size=hidden))\n")
    return path


def test_config_args_the_config_never_reads_are_refused(tmp_path):
    path = _config_file(tmp_path)
    assert parse_config(path, "hidden=16").model_config.layers[-1].size == 16
    with pytest.raises(ValueError, match="never reads 'hiden' .*did you mean 'hidden'"):
        parse_config(path, "hiden=256")
    with pytest.raises(ValueError,
                       match="never reads 'depth' \\(get_config_arg\\); it reads \\['hidden'\\]"):
        parse_config(path, {"hidden": 16, "depth": 3})


def test_get_config_arg_still_reads_with_defaults():
    with config_scope({"n": "3"}):
        assert get_config_arg("n", int) == 3
        assert get_config_arg("missing", int, 7) == 7


def test_cli_refuses_num_passes_0(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--config", str(_config_file(tmp_path)), "--num_passes", "0"])
    assert exc.value.code == 2
    assert "must be at least 1 (0 passes would train nothing), got 0" in capsys.readouterr().err


def test_every_setting_a_builtin_layer_reads_is_a_known_layer_keyword():
    """Guard for keywords.SCULLER_LAYER_ATTRS: a layer file reading a new config attr
    (``self.attr("x")``, ``config.attrs.get("x")``) must list it, or Layer(x=...) is refused."""
    import pathlib
    import re

    import sculler.layers
    from sculler.config.keywords import PADDLE_LAYER_KEYWORDS, SCULLER_LAYER_ATTRS

    pattern = re.compile(r"""(?:\.attr\(|\.attrs\.get\(|\.attrs\[)["'](\w+)["']""")
    read = set()
    for path in pathlib.Path(sculler.layers.__file__).parent.glob("*.py"):
        read |= set(pattern.findall(path.read_text()))
    assert "num_classes" in read and "k" not in read
    assert read <= PADDLE_LAYER_KEYWORDS | SCULLER_LAYER_ATTRS, sorted(
        read - PADDLE_LAYER_KEYWORDS - SCULLER_LAYER_ATTRS)
