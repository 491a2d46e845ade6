"""`rlvr.__all__` is the public surface: every name resolves to the object its module defines, and
`import rlvr` stays cheap (no submodule, no torch, until a name is used)."""

import importlib
import subprocess
import sys

import pytest

import rlvr


@pytest.mark.parametrize("name", sorted(rlvr._SURFACE))
def test_each_public_name_is_the_object_its_module_defines(name):
    assert name in rlvr.__all__ and name in dir(rlvr)
    assert getattr(rlvr, name) is getattr(importlib.import_module(rlvr._SURFACE[name]), name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        rlvr.nothing_here   # noqa: B018


def test_import_rlvr_loads_nothing_else():
    code = ("import sys, rlvr; print(sorted(m for m in sys.modules if m.startswith('rlvr')), "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['rlvr']", "False"]


def test_the_training_entry_point_is_the_submodule_function():
    from rlvr.train import train

    assert rlvr.train.train is train
