"""Files from outside read with bounds: a GGUF whose middle differs gets its own conversion, and a
LiveCodeBench field that inflates without bound is refused before it fills memory."""

from __future__ import annotations

import base64
import pickle
import zlib

import pytest

from rlvr.models.resolve import _fingerprint
from rlvr.verifiers.sandbox import shipped


def test_gguf_fingerprint_sees_a_middle_tensor(tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    body = bytearray(b"\x01" * (5 << 20))
    a.write_bytes(bytes(body))
    body[len(body) // 2] = 2
    b.write_bytes(bytes(body))
    assert _fingerprint(a) != _fingerprint(b)
    (tmp_path / "c.gguf").write_bytes(a.read_bytes())
    assert _fingerprint(a) == _fingerprint(tmp_path / "c.gguf")


def test_livecodebench_decompression_bomb_is_refused(monkeypatch):
    monkeypatch.setattr(shipped, "MAX_INFLATED", 1 << 20)
    ok = base64.b64encode(zlib.compress(pickle.dumps('[{"input": "1"}]'))).decode()
    assert shipped._unpack_compressed(ok, "private_test_cases") == '[{"input": "1"}]'
    bomb = base64.b64encode(zlib.compress(pickle.dumps("x" * (4 << 20)), 9)).decode()
    with pytest.raises(ValueError, match="inflates past"):
        shipped._unpack_compressed(bomb, "private_test_cases")
