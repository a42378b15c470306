"""A generator with parameters in a tar written as PaddlePaddle writes one, against the output
PaddlePaddle recorded for the same network and values (paddle/trainer/tests,
rnn_gen_test_model_dir/r1.test.nobeam and r1.test.beam at release 0.11.0): the previous word's
one-hot embedding times a transition table, exponentiated, decoded greedily and with a beam of
two. Parameter names are PaddlePaddle's, so the tar's entries land on the group's weights."""

import io
import tarfile

import numpy as np
import pytest

import sculler as paddle
from sculler.v2.protobuf import encode_parameter_config

WORDS, EOS = 5, 4
TABLE = np.array([[-0.2, 0, -100, -100, -100],
                  [-100, -0.25, 0, -100, -100],
                  [-100, -100, -1 / 3, 0, -100],
                  [-100, -100, -100, -0.5, 0],
                  [0, -100, -100, -100, -1]], dtype=np.float32)


@pytest.fixture(autouse=True)
def fresh_names():
    paddle.layer.reset_names()


def paddle_tar(values: dict[str, np.ndarray]) -> bytes:
    """Entries as PaddlePaddle's Parameters.to_tar writes them: a 16-byte header (version 0,
    value size 4, count) then the float32 values, and the ParameterConfig protobuf."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, v in values.items():
            header = np.array([0, 4, v.size], dtype=np.int32).tobytes() + b"\0" * 4
            for entry, data in ((name, header + v.astype(np.float32).tobytes()),
                                (name + ".protobuf",
                                 encode_parameter_config(name, v.size, list(v.shape)))):
                info = tarfile.TarInfo(entry)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def step(dummy_memory, word):
    """The previous word's one-hot row times the transition table, exponentiated."""
    moved = paddle.layer.mixed(size=WORDS, input=paddle.layer.full_matrix_projection(
        word, param_attr=paddle.attr.Param(name="transtable")))
    return paddle.layer.mixed(
        size=WORDS, act=paddle.activation.Exp(),
        input=paddle.layer.trans_full_matrix_projection(
            moved, param_attr=paddle.attr.Param(name="wordvec")))


def generator(beam: int):
    dummy = paddle.layer.data(name="dummy", type=paddle.data_type.dense_vector(2))
    return paddle.layer.beam_search(
        name="rnn_gen", step=step, bos_id=0, eos_id=EOS, beam_size=beam,
        num_results_per_sample=beam, max_length=10,
        input=[paddle.layer.StaticInput(dummy), paddle.layer.GeneratedInput(
            size=WORDS, embedding_name="wordvec", embedding_size=WORDS)])


@pytest.mark.parametrize("beam", [1, 2])
def test_generation_with_paddle_parameters_matches_paddle(beam):
    gen = generator(beam)
    params = paddle.parameters.create(gen)
    assert sorted(params.names()) == ["transtable", "wordvec"]
    params.init_from_tar(io.BytesIO(paddle_tar({"wordvec": np.eye(WORDS),
                                                "transtable": TABLE})))
    dummy = np.random.RandomState(0).uniform(0, 1, (15, 2))
    prob, ids = paddle.infer(output_layer=gen, parameters=params,
                             input=[(row,) for row in dummy], field=["prob", "id"])
    if beam == 1:  # PaddlePaddle: "1 2 3 4" for each of the 15 samples
        assert ids.tolist() == [1, 2, 3, 4] * 15
        np.testing.assert_allclose(prob, 0, atol=1e-6)
    else:  # PaddlePaddle: score 0 for "1 2 3 4", -0.2 for "0 1 2 3 4"
        assert ids.tolist() == [4, 1, 2, 3, 4, -1, 5, 0, 1, 2, 3, 4, -1] * 15
        np.testing.assert_allclose(prob, [[0, -0.2]] * 15, atol=1e-6)


@pytest.mark.parametrize("beam", [1, 2])
def test_generation_inside_a_group_matches_paddle(beam):
    """A beam search in each step of a group over sub-sequences (PaddlePaddle's nested
    generation test, r1.test.nest): one generated path per sub-sequence, gathered as a nested
    sequence of ids; the layout names the inner group ``rnn_gen@rnn_gen_concat``."""
    dummy = paddle.layer.data(name="dummy",
                              type=paddle.data_type.dense_vector_sub_sequence(2))

    def outer_step(sentence):
        return paddle.layer.beam_search(
            name="rnn_gen", step=step, bos_id=0, eos_id=EOS, beam_size=beam,
            num_results_per_sample=1, max_length=10,
            input=[paddle.layer.StaticInput(sentence), paddle.layer.GeneratedInput(
                size=WORDS, embedding_name="wordvec", embedding_size=WORDS)])

    out = paddle.layer.recurrent_group(name="rnn_gen_concat", step=outer_step,
                                       input=paddle.layer.SubsequenceInput(dummy))
    model = paddle.topology.Topology(out).proto()
    inner = {sm.name: sm for sm in model.sub_models}["rnn_gen@rnn_gen_concat"]
    assert inner.generator.eos_layer_name == "__rnn_gen_eos_layer__@rnn_gen@rnn_gen_concat"
    assert model.layer("__beam_search_predict__@rnn_gen_concat").type == "data"
    assert (model.layer("__beam_search_predict__").type,
            model.layer("__beam_search_predict__").size) == ("gather_agent", WORDS)
    params = paddle.parameters.create(out)
    params.init_from_tar(io.BytesIO(paddle_tar({"wordvec": np.eye(WORDS),
                                                "transtable": TABLE})))
    rows = np.random.RandomState(0).uniform(0, 1, (15, 1, 2))
    ids = paddle.infer(output_layer=out, parameters=params, input=[(rows,)], field="id")
    assert ids.tolist() == [1, 2, 3, 4] * 15  # PaddlePaddle: " 1 2 3 4" per sub-sequence
