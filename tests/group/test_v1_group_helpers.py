"""v1 config helpers for recurrent groups: a config file with recurrent_group, memory,
StaticInput, simple_gru and gru_step_layer parses into PaddlePaddle's layout (the step's
layers named ``<name>@<group>`` in the flat list and listed by the group's sub-model) and
runs."""

import numpy as np

from sculler.config.config_parser import parse_config
from sculler.core.argument import Argument
from sculler.core.network import Network

CONFIG = """
from sculler.config.helpers import *
settings(batch_size=4, learning_rate=0.01)
x = data_layer(name="x", size=3)
ctx = data_layer(name="ctx", size=2)
enc = simple_gru(input=x, size=4, name="enc")

def step(x_t, c):
    h_prev = memory(name="h", size=4)
    proj = fc_layer(input=[x_t, c, h_prev], size=12, act=LinearActivation(), bias_attr=False)
    return gru_step_layer(name="h", input=proj, output_mem=h_prev, size=4)

h = recurrent_group(step=step, input=[enc, StaticInput(ctx)], name="dec")
outputs(fc_layer(input=h, size=1))
"""


def test_v1_recurrent_group_config(tmp_path):
    path = tmp_path / "conf.py"
    path.write_text(CONFIG)
    model = parse_config(str(path)).model_config
    names = [lc.name for lc in model.layers]
    assert "dec" in names and "h" in names and "enc_transform" in names
    dec = {sm.name: sm for sm in model.sub_models}["dec"]
    assert [n for n in names if n.endswith("@dec")] == dec.layer_names
    assert model.layer("h").type == "gather_agent"
    assert model.layer("dec").type == "recurrent_layer_group"
    assert "_h@dec.w0" in [p.name for p in model.parameters]
    net = Network(model)
    out = net.forward({"x": Argument(value=np.ones((5, 3), np.float32),
                                     seq_starts=np.array([0, 2, 5])),
                       "ctx": Argument(value=np.ones((2, 2), np.float32))})[0]
    assert out.value.shape == (5, 1) and np.all(np.isfinite(out.value))
