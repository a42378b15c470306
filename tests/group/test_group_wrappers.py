"""v2 wrappers of groups and step layers: PaddlePaddle v0.11 signatures and automatic
names."""

import inspect

import pytest

import sculler as paddle

L = paddle.layer

# from reference/v2_layer_signatures.txt
SIGNATURES = {
    "lstm_step": "input, state, size=None, act=None, name=None, gate_act=None, state_act=None, "
                 "bias_attr=None, layer_attr=None",
    "recurrent_group": "step, input, reverse=False, name=None, targetInlink=None",
    "memory": "name, size, memory_name=None, is_seq=False, boot_layer=None, boot_bias=None, "
              "boot_bias_active_type=None, boot_with_const_id=None",
    "get_output": "input, arg_name, name=None, layer_attr=None",
    "beam_search": "step, input, bos_id, eos_id, beam_size, max_length=500, name=None, "
                   "num_results_per_sample=None",
    "SubsequenceInput": "input",
    "gru_step": "input, output_mem, size=None, act=None, name=None, gate_act=None, "
                "bias_attr=None, param_attr=None, layer_attr=None",
    "gru_step_naive": "input, output_mem, size=None, name=None, act=None, gate_act=None, "
                      "bias_attr=None, param_attr=None, layer_attr=None",
}


def describe(fn):
    return ", ".join(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default}"
                     for p in inspect.signature(fn).parameters.values())


@pytest.fixture(autouse=True)
def fresh_names():
    L.reset_names()


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_signatures_match_paddle(name):
    assert describe(getattr(L, name)) == SIGNATURES[name]


def test_automatic_names_and_sizes():
    x = L.data(name="x", type=paddle.data_type.dense_vector_sequence(12))
    g = paddle.networks.gru_group(input=x)
    assert g.name == "__gru_group_0__" and g.size == 4
    step = g.parents[0]
    assert (step.name, step.layer_type) == ("__gru_group_0___recurrent_group",
                                            "recurrent_layer_group")
    layers = [lc["name"] for lc in step.config.attrs["step_model"]["layers"]]
    assert "__gru_group_0__@__gru_group_0___recurrent_group" in layers
    lstm = paddle.networks.lstmemory_group(input=L.data(
        name="y", type=paddle.data_type.dense_vector_sequence(8)), name="l")
    assert lstm.name == "l" and lstm.size == 2
    s = L.lstm_step(input=L.data(name="a", type=paddle.data_type.dense_vector(8)),
                    state=L.data(name="c", type=paddle.data_type.dense_vector(2)))
    assert s.name == "__lstm_step_0__"
    assert L.get_output(input=s, arg_name="state").name == "__get_output_layer_0__"
