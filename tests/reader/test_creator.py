import numpy as np

from sculler.reader import creator


def test_np_array_rows_and_scalar():
    x = np.arange(6).reshape(3, 2)
    rows = list(creator.np_array(x)())
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[2], [4, 5])
    assert [int(v) for v in creator.np_array(np.array([7, 8]))()] == [7, 8]
    assert [int(v) for v in creator.np_array(np.array(5))()] == [5]


def test_text_file_strips_newlines(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("one\ntwo words\n\nlast")
    r = creator.text_file(p)
    assert list(r()) == ["one", "two words", "", "last"]
    assert list(r()) == ["one", "two words", "", "last"]
