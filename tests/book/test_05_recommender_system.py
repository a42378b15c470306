"""Book chapter 05 (recommender system): a user tower (id, gender, age, job embeddings -> fc,
combined by a tanh fc) and a movie tower (id embedding -> fc, sparse category vector -> fc,
title words -> embedding -> sequence_conv_pool), scored by ``cos_sim(scale=5)`` against the
rating with ``square_error_cost``. Data: records in paddle.dataset.movielens' format
``[uid, gender, age, job, movie id, category ids, title word ids, [score]]``, synthetic, where
the score says whether the user's gender matches the movie's first category."""

import numpy as np

import sculler as paddle

MAX_UID, MAX_MOV, MAX_JOB, N_CATS, N_TITLE_WORDS = 30, 40, 20, 6, 50
AGES = len(paddle.dataset.movielens.age_table)


def movielens_like(n, seed):
    rng = np.random.RandomState(seed)
    users = {u: (int(rng.randint(2)), int(rng.randint(AGES)), int(rng.randint(MAX_JOB + 1)))
             for u in range(1, MAX_UID + 1)}
    movies = {m: (sorted(rng.choice(N_CATS, size=rng.randint(1, 3), replace=False).tolist()),
                  rng.randint(0, N_TITLE_WORDS, size=rng.randint(1, 5)).tolist())
              for m in range(1, MAX_MOV + 1)}
    rows = []
    for _ in range(n):
        uid, mid = int(rng.randint(1, MAX_UID + 1)), int(rng.randint(1, MAX_MOV + 1))
        gender, age, job = users[uid]
        cats, title = movies[mid]
        score = 5.0 if cats[0] % 2 == gender else 1.0
        rows.append([uid, gender, age, job, mid, cats, title, [score * 2 - 5.0]])
    return lambda: iter(rows)


def get_usr_combined_features():
    uid = paddle.layer.data(name="user_id", type=paddle.data_type.integer_value(MAX_UID + 1))
    usr_emb = paddle.layer.embedding(input=uid, size=32)
    usr_fc = paddle.layer.fc(input=usr_emb, size=32)
    usr_gender_id = paddle.layer.data(name="gender_id", type=paddle.data_type.integer_value(2))
    usr_gender_emb = paddle.layer.embedding(input=usr_gender_id, size=16)
    usr_gender_fc = paddle.layer.fc(input=usr_gender_emb, size=16)
    usr_age_id = paddle.layer.data(name="age_id", type=paddle.data_type.integer_value(AGES))
    usr_age_emb = paddle.layer.embedding(input=usr_age_id, size=16)
    usr_age_fc = paddle.layer.fc(input=usr_age_emb, size=16)
    usr_job_id = paddle.layer.data(name="job_id",
                                   type=paddle.data_type.integer_value(MAX_JOB + 1))
    usr_job_emb = paddle.layer.embedding(input=usr_job_id, size=16)
    usr_job_fc = paddle.layer.fc(input=usr_job_emb, size=16)
    return paddle.layer.fc(input=[usr_fc, usr_gender_fc, usr_age_fc, usr_job_fc], size=200,
                           act=paddle.activation.Tanh())


def get_mov_combined_features():
    mov_id = paddle.layer.data(name="movie_id", type=paddle.data_type.integer_value(MAX_MOV + 1))
    mov_emb = paddle.layer.embedding(input=mov_id, size=32)
    mov_fc = paddle.layer.fc(input=mov_emb, size=32)
    mov_categories = paddle.layer.data(name="category_id",
                                       type=paddle.data_type.sparse_binary_vector(N_CATS))
    mov_categories_hidden = paddle.layer.fc(input=mov_categories, size=32)
    mov_title_id = paddle.layer.data(
        name="movie_title", type=paddle.data_type.integer_value_sequence(N_TITLE_WORDS))
    mov_title_emb = paddle.layer.embedding(input=mov_title_id, size=32)
    mov_title_conv = paddle.networks.sequence_conv_pool(input=mov_title_emb, hidden_size=32,
                                                        context_len=3)
    return paddle.layer.fc(input=[mov_fc, mov_categories_hidden, mov_title_conv], size=200,
                           act=paddle.activation.Tanh())


def test_chapter05_towers_and_cos_sim_train_with_falling_cost(book):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    usr_combined_features = get_usr_combined_features()
    mov_combined_features = get_mov_combined_features()
    inference = paddle.layer.cos_sim(a=usr_combined_features, b=mov_combined_features,
                                     size=1, scale=5)
    cost = paddle.layer.square_error_cost(
        input=inference, label=paddle.layer.data(name="score",
                                                 type=paddle.data_type.dense_vector(1)))
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Adam(learning_rate=2e-3))
    feeding = {"user_id": 0, "gender_id": 1, "age_id": 2, "job_id": 3, "movie_id": 4,
               "category_id": 5, "movie_title": 6, "score": 7}
    costs = book.train_costs(trainer, movielens_like(400, 0), batch_size=40, num_passes=4,
                        feeding=feeding)
    book.assert_finite_and_falling(costs, factor=0.7)
    result = trainer.test(paddle.batch(movielens_like(80, 1), 40), feeding=feeding)
    assert np.isfinite(result.cost)
    record = list(movielens_like(1, 2)())[0]
    predicted = paddle.infer(output_layer=inference, parameters=parameters,
                             input=[record[:7]], feeding={k: v for k, v in feeding.items()
                                                          if k != "score"})
    assert predicted.shape == (1, 1) and abs(float(predicted[0, 0])) <= 5 + 1e-5
