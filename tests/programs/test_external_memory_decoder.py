"""Neural machine translation with external memory, in the shape of PaddlePaddle's
models/mt_with_external_memory program: the decoder step keeps a bounded memory (a sequence of
slots per sample, booted from the pooled encoder states plus noise) that it writes with
erase/add vectors and reads by content addressing with interpolation, and reads the encoder
states as a read-only unbounded memory (attention). Both memories are sequence-valued
``memory`` layers booted from outer sequences. Trained a few passes on reversing digit
strings, then generating with ``beam_search``: most held-out strings come out right, and as
each path carries its own copy of the memory, a path's score must equal the teacher-forced
log-probability of its words."""

import numpy as np

import sculler as paddle

BOS, EOS = 0, 1  # <s>, <e>; digit d is token d + 2
DICT = 6
WORD_DIM, SIZE, SLOTS = 8, 8, 4
BEAM_SIZE, MAX_LENGTH = 3, 5


class ExternalMemory:
    """A memory M of slots (a sequence per sample), addressed by content:
    w = softmax_over_slots(v . tanh(W M + U key)), interpolated with the previous step's
    weights w_t = g w + (1 - g) w_{t-1}; read r = sum_i w_i M_i; write
    M_t = M_{t-1} * (1 - w e) + w a with erase e and add a computed from the key."""

    def __init__(self, name, mem_slot_size, boot_layer, initial_weight, readonly=False):
        self.name = name
        self.mem_slot_size = mem_slot_size
        self.external_memory = paddle.layer.memory(name=name, size=mem_slot_size,
                                                   boot_layer=boot_layer)
        self.initial_weight = initial_weight
        self.readonly = readonly
        if readonly:
            self.updated_external_memory = paddle.layer.mixed(
                name=name, size=mem_slot_size,
                input=[paddle.layer.identity_projection(input=self.external_memory)])

    def _content_addressing(self, key_vector):
        key_projection = paddle.layer.fc(input=key_vector, size=self.mem_slot_size,
                                         act=paddle.activation.Linear(), bias_attr=False)
        key_proj_expanded = paddle.layer.expand(input=key_projection,
                                                expand_as=self.external_memory)
        memory_projection = paddle.layer.fc(input=self.external_memory,
                                            size=self.mem_slot_size,
                                            act=paddle.activation.Linear(), bias_attr=False)
        merged_projection = paddle.layer.addto(input=[key_proj_expanded, memory_projection],
                                               act=paddle.activation.Tanh())
        return paddle.layer.fc(input=merged_projection, size=1,
                               act=paddle.activation.SequenceSoftmax(), bias_attr=False)

    def _get_addressing_weight(self, head_name, key_vector):
        addressing_weight = self._content_addressing(key_vector)
        gate = paddle.layer.fc(input=key_vector, size=1, act=paddle.activation.Sigmoid(),
                               bias_attr=False)
        weight_name = self.name + "_addressing_weight_" + head_name
        last_addressing_weight = paddle.layer.memory(name=weight_name, size=1,
                                                     boot_layer=self.initial_weight)
        return paddle.layer.interpolation(
            name=weight_name, input=[addressing_weight, last_addressing_weight],
            weight=paddle.layer.expand(input=gate, expand_as=addressing_weight))

    def write(self, write_key):
        if self.readonly:
            raise ValueError("ExternalMemory with readonly=True cannot write.")
        write_weight = self._get_addressing_weight("write_head", write_key)
        erase_vector = paddle.layer.fc(input=write_key, size=self.mem_slot_size,
                                       act=paddle.activation.Sigmoid(), bias_attr=False)
        add_vector = paddle.layer.fc(input=write_key, size=self.mem_slot_size,
                                     act=paddle.activation.Sigmoid(), bias_attr=False)
        erase_vector_expand = paddle.layer.expand(input=erase_vector,
                                                  expand_as=self.external_memory)
        add_vector_expand = paddle.layer.expand(input=add_vector,
                                                expand_as=self.external_memory)
        scaled_erase_vector_expand = paddle.layer.scaling(weight=write_weight,
                                                          input=erase_vector_expand)
        scaled_add_vector_expand = paddle.layer.scaling(weight=write_weight,
                                                        input=add_vector_expand)
        erase_memory_part = paddle.layer.mixed(
            size=self.mem_slot_size,
            input=paddle.layer.dotmul_operator(a=self.external_memory,
                                               b=scaled_erase_vector_expand, scale=-1.0))
        add_memory_part = paddle.layer.mixed(
            size=self.mem_slot_size,
            input=paddle.layer.identity_projection(input=scaled_add_vector_expand))
        self.updated_external_memory = paddle.layer.addto(
            input=[self.external_memory, erase_memory_part, add_memory_part], name=self.name)

    def read(self, read_key):
        read_weight = self._get_addressing_weight("read_head", read_key)
        scaled = paddle.layer.scaling(weight=read_weight, input=self.updated_external_memory)
        return paddle.layer.pooling(input=scaled, pooling_type=paddle.pooling.Sum())


def reverse_pairs(n, seed):
    """(src, trg, trg_next, bounded_memory_perturbation): the wmt14 fields for reversing a
    digit string, and the noise that separates the bounded memory's slots."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        x = [int(t) for t in rng.randint(2, DICT, size=rng.randint(2, 4))]
        y = x[::-1]
        noise = rng.uniform(-0.1, 0.1, (SLOTS, SIZE)).astype("float32")
        data.append(([BOS] + x + [EOS], [BOS] + y, y + [EOS], noise))
    return lambda: iter(data)


def memory_enhanced_seq2seq(is_generating):
    src = paddle.layer.data(name="source_words",
                            type=paddle.data_type.integer_value_sequence(DICT))
    src_embedding = paddle.layer.embedding(input=src, size=WORD_DIM)
    src_forward = paddle.networks.simple_gru(input=src_embedding, size=SIZE)
    src_backward = paddle.networks.simple_gru(input=src_embedding, size=SIZE, reverse=True)
    source_context = paddle.layer.concat(input=[src_forward, src_backward])
    initial_state = paddle.layer.fc(input=paddle.layer.first_seq(input=src_backward),
                                    size=SIZE, act=paddle.activation.Tanh())

    bounded_memory_slot_init = paddle.layer.fc(
        input=paddle.layer.pooling(input=source_context, pooling_type=paddle.pooling.Avg()),
        size=SIZE, act=paddle.activation.Sigmoid())
    bounded_memory_perturbation = paddle.layer.data(
        name="bounded_memory_perturbation",
        type=paddle.data_type.dense_vector_sequence(SIZE))
    bounded_memory_init = paddle.layer.addto(
        input=[paddle.layer.expand(input=bounded_memory_slot_init,
                                   expand_as=bounded_memory_perturbation),
               bounded_memory_perturbation],
        act=paddle.activation.Linear())
    bounded_memory_weight_init = paddle.layer.slope_intercept(
        input=paddle.layer.fc(input=bounded_memory_init, size=1), slope=0.0, intercept=0.0)
    unbounded_memory_weight_init = paddle.layer.slope_intercept(
        input=paddle.layer.fc(input=source_context, size=1), slope=0.0, intercept=0.0)

    def recurrent_decoder_step(cur_embedding):
        state = paddle.layer.memory(name="gru_decoder", size=SIZE, boot_layer=initial_state)
        bounded_memory = ExternalMemory(name="bounded_memory", mem_slot_size=SIZE,
                                        boot_layer=bounded_memory_init,
                                        initial_weight=bounded_memory_weight_init)
        unbounded_memory = ExternalMemory(name="unbounded_memory", mem_slot_size=SIZE * 2,
                                          boot_layer=source_context,
                                          initial_weight=unbounded_memory_weight_init,
                                          readonly=True)
        bounded_memory.write(state)
        bounded_memory_read = bounded_memory.read(state)
        key_for_unbounded_memory = paddle.layer.fc(
            input=[bounded_memory_read, cur_embedding], size=SIZE,
            act=paddle.activation.Tanh(), bias_attr=False)
        context = unbounded_memory.read(key_for_unbounded_memory)
        gru_inputs = paddle.layer.fc(input=[context, cur_embedding, bounded_memory_read],
                                     size=SIZE * 3, act=paddle.activation.Linear(),
                                     bias_attr=False)
        gru_output = paddle.layer.gru_step(name="gru_decoder", input=gru_inputs,
                                           output_mem=state, size=SIZE)
        return paddle.layer.fc(input=[gru_output, context, cur_embedding], size=DICT,
                               act=paddle.activation.Softmax(), bias_attr=True)

    if not is_generating:
        target = paddle.layer.data(name="target_words",
                                   type=paddle.data_type.integer_value_sequence(DICT))
        target_embeddings = paddle.layer.embedding(
            input=target, size=WORD_DIM,
            param_attr=paddle.attr.ParamAttr(name="_decoder_word_embedding"))
        decoder_result = paddle.layer.recurrent_group(
            name="decoder_group", step=recurrent_decoder_step, input=[target_embeddings])
        target_next = paddle.layer.data(name="target_next_words",
                                        type=paddle.data_type.integer_value_sequence(DICT))
        return paddle.layer.classification_cost(input=decoder_result, label=target_next), \
            decoder_result

    target_embeddings = paddle.layer.GeneratedInput(
        size=DICT, embedding_name="_decoder_word_embedding", embedding_size=WORD_DIM)
    return paddle.layer.beam_search(name="decoder_group", step=recurrent_decoder_step,
                                    input=[target_embeddings], bos_id=BOS, eos_id=EOS,
                                    beam_size=BEAM_SIZE, max_length=MAX_LENGTH)


def decode(ids):
    """infer's "id" field: for each sample and result, [length, word ids..., -1]."""
    paths, start = [], 0
    while start < ids.size:
        length = int(ids[start])
        assert 1 <= length <= MAX_LENGTH and ids[start + 1 + length] == -1
        paths.append([int(w) for w in ids[start + 1:start + 1 + length]])
        start += length + 2
    return paths


def test_external_memory_decoder_trains_and_generates():
    cost, decoder_result = memory_enhanced_seq2seq(is_generating=False)
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=1e-2))
    feeding = {"source_words": 0, "target_words": 1, "target_next_words": 2,
               "bounded_memory_perturbation": 3}
    costs = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(reverse_pairs(160, 1), 160), 20),
                  num_passes=8, event_handler=event_handler, feeding=feeding)
    assert np.mean(costs[-3:]) < 0.4 * np.mean(costs[:3])

    paddle.layer.reset_names()
    beam_gen = memory_enhanced_seq2seq(is_generating=True)
    test = list(reverse_pairs(12, 2)())
    prob, ids = paddle.infer(output_layer=beam_gen, parameters=parameters,
                             input=[(src, noise) for src, _, _, noise in test],
                             feeding={"source_words": 0, "bounded_memory_perturbation": 1},
                             field=["prob", "id"])
    assert prob.shape == (len(test), BEAM_SIZE) and np.all(np.diff(prob, axis=1) <= 0)
    paths = decode(ids)
    assert len(paths) == len(test) * BEAM_SIZE
    assert all(0 <= w < DICT for path in paths for w in path)
    best = paths[::BEAM_SIZE]
    assert np.mean([path == trg_next for path, (_, _, trg_next, _) in zip(best, test)]) >= 0.5

    # a path's score is the log-probability of its words under the trained decoder, with the
    # memory written along that path only
    forced = [(src, [BOS] + path[:-1], path, noise)
              for s, (src, _, _, noise) in enumerate(test)
              for path in paths[s * BEAM_SIZE:(s + 1) * BEAM_SIZE]]
    step_probs = paddle.infer(output_layer=decoder_result, parameters=parameters, input=forced,
                              feeding=feeding)
    words = np.concatenate(paths)
    word_log_probs = np.log(step_probs[np.arange(words.size), words])
    starts = np.cumsum([0] + [len(path) for path in paths[:-1]])
    scores = np.add.reduceat(word_log_probs, starts)
    np.testing.assert_allclose(prob.reshape(-1), scores, rtol=1e-4)
