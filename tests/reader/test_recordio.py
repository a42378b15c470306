"""PaddlePaddle RecordIO files: the bytes PaddlePaddle wrote, round trips through every
compressor and several chunks, snappy blocks, damage detection, the safe unpickler and
``reader.creator.recordio``'s path forms."""

import pickle
import zlib

import numpy as np
import pytest

import sculler as paddle
from sculler.fileio import FileFormatError
from sculler.reader import recordio as rio

# Two pickled tuples (protocol 0, as Python 2 wrote them) in one snappy chunk: the layout of
# PaddlePaddle's own reader test file (header, snappy stream identifier, one uncompressed
# data chunk with its masked CRC-32C, two length-prefixed records).
PADDLE_FILE = bytes.fromhex(
    "040302019362159b010000003800000002000000ff060000734e61507059012a0000585d4c3c0f000000"
    "2849310a49320a49330a7470310a2e0f0000002849340a49350a49360a7470310a2e")
PADDLE_RECORDS = [b"(I1\nI2\nI3\ntp1\n.", b"(I4\nI5\nI6\ntp1\n."]


def test_reads_and_writes_paddles_bytes(tmp_path):
    path = tmp_path / "paddle.recordio"
    path.write_bytes(PADDLE_FILE)
    assert list(rio.read_records(path)) == PADDLE_RECORDS
    assert list(paddle.reader.creator.recordio(str(path))()) == [(1, 2, 3), (4, 5, 6)]
    out = tmp_path / "ours.recordio"
    assert rio.write_records(out, PADDLE_RECORDS) == 2
    assert out.read_bytes() == PADDLE_FILE


@pytest.mark.parametrize("compressor", ["snappy", "gzip", "none"])
def test_round_trip_over_chunks(tmp_path, compressor):
    samples = [(i, [float(i) / 3, -1.5], f"w{i}", b"\x00\xff" * i) for i in range(7)]
    samples.append(((), {"k": {1, 2}}, None, True, 1.5j, bytearray(b"xy")))
    path = tmp_path / "data.recordio"
    rio.write_records(path, [rio.dump_sample(s) for s in samples], compressor=compressor,
                      records_per_chunk=3)
    data = path.read_bytes()
    assert data.count((0x01020304).to_bytes(4, "little")) >= 3  # three chunks
    assert list(paddle.reader.creator.recordio([str(path)], buf_size=2)()) == samples
    assert list(rio.read_records(path))[2] == rio.dump_sample(samples[2])


def test_large_record_spans_snappy_chunks(tmp_path):
    big = bytes(range(256)) * 700  # over the 64 KiB a snappy frame holds
    path = tmp_path / "big.recordio"
    rio.write_records(path, [big, b""])
    assert list(rio.read_records(path)) == [big, b""]


def test_compressed_snappy_block_decodes(tmp_path):
    record = b"abc" * 4
    plain = len(record).to_bytes(4, "little") + record  # the chunk's one record
    # a raw snappy block: length 16 (varint), a literal of 7 bytes (the length prefix and
    # "abc"), then a copy of 9 bytes from 3 back, overlapping what it writes
    block = b"\x10" + b"\x18" + plain[:7] + b"\x15\x03"
    crc = rio._masked_crc32c(plain).to_bytes(4, "little")
    stream = rio._SNAPPY_ID + b"\x00" + (len(block) + 4).to_bytes(3, "little") + crc + block
    path = tmp_path / "snappy.recordio"
    path.write_bytes(rio.HEADER.pack(rio.MAGIC, zlib.crc32(stream), 1, len(stream), 1) + stream)
    assert list(rio.read_records(path)) == [record]
    bad = stream[:-1] + b"\x04"  # copy from 4 back: other bytes, so the CRC-32C fails
    path.write_bytes(rio.HEADER.pack(rio.MAGIC, zlib.crc32(bad), 1, len(bad), 1) + bad)
    with pytest.raises(FileFormatError, match="snappy chunk checksum"):
        list(rio.read_records(path))


def test_damage_is_reported_with_file_and_chunk(tmp_path):
    path = tmp_path / "bad.recordio"
    flipped = bytearray(PADDLE_FILE)
    flipped[40] ^= 1
    path.write_bytes(bytes(flipped))
    with pytest.raises(FileFormatError, match=r"bad\.recordio.*chunk 0.*CRC-32"):
        list(rio.read_records(path))
    path.write_bytes(PADDLE_FILE[:-3])
    with pytest.raises(FileFormatError, match="body cut short"):
        list(rio.read_records(path))
    path.write_bytes(b"PK\x03\x04" + PADDLE_FILE[4:])
    with pytest.raises(FileFormatError, match="not a RecordIO file"):
        list(rio.read_records(path))
    path.write_bytes(PADDLE_FILE + PADDLE_FILE[:7])
    with pytest.raises(FileFormatError, match="chunk 1: header cut short"):
        list(rio.read_records(path))


def test_only_builtin_data_is_unpickled(tmp_path):
    path = tmp_path / "arrays.recordio"
    rio.write_records(path, [pickle.dumps((np.arange(3), 1), protocol=2)])
    with pytest.raises(FileFormatError, match=r"record 0: the record pickles numpy.*could run "
                                              "code"):
        list(paddle.reader.creator.recordio(str(path))())
    with pytest.raises(FileFormatError, match="pickles numpy"):
        rio.dump_sample(np.arange(2))


def test_paths_are_lists_commas_or_globs(tmp_path):
    for i in range(3):
        rio.write_records(tmp_path / f"part-{i}.recordio", [rio.dump_sample((i,))])
    both = f"{tmp_path / 'part-0.recordio'},{tmp_path / 'part-2.recordio'}"
    assert list(paddle.reader.creator.recordio(both)()) == [(0,), (2,)]
    assert list(paddle.reader.creator.recordio(str(tmp_path / "part-*.recordio"))()) == [
        (0,), (1,), (2,)]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        paddle.reader.creator.recordio(str(tmp_path / "missing-*.recordio"))
    with pytest.raises(TypeError, match="recordio: paths must be"):
        paddle.reader.creator.recordio(3)
    with pytest.raises(ValueError, match="compressor must be one of"):
        rio.write_records(tmp_path / "x.recordio", [], compressor="lz4")
