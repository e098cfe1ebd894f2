"""The CHECK_NATIVE plug-in ABI: the public header, get_include(), and a C plug-in built
against the header that a GuardProgram calls."""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

import ember_frame_hook as fh

PLUGIN = r"""
#include <ember_frame_hook.h>

/* passes when value is data; raises on the string "raise" */
static int same(PyObject *value, PyObject *data) {
    if (PyUnicode_Check(value) && PyUnicode_CompareWithASCIIString(value, "raise") == 0) {
        PyErr_SetString(PyExc_ValueError, "asked to raise");
        return -1;
    }
    return value == data;
}

PyObject *plugin_capsule(void) { return ember_native_check_capsule(&same); }
"""


def test_get_include_holds_the_header():
    header = Path(fh.get_include(), "ember_frame_hook.h")
    assert header.is_file()
    text = header.read_text()
    assert f'#define EMBER_NATIVE_CHECK_CAPSULE "{fh.NATIVE_CHECK_CAPSULE}"' in text
    assert f"#define EMBER_FRAME_HOOK_NATIVE_ABI_VERSION {fh.NATIVE_ABI_VERSION}" in text


def test_abi_is_unchanged():
    # plug-ins built against version 1 pass this capsule name: changing it is a new ABI
    assert fh.NATIVE_CHECK_CAPSULE == "ember_frame_hook.native_check"
    assert fh.NATIVE_ABI_VERSION == 1


def _compiler() -> list[str] | None:
    cc = sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(cc)
    return argv if shutil.which(argv[0]) else None


@pytest.mark.skipif(_compiler() is None, reason="no C compiler")
@pytest.mark.skipif(os.name != "posix", reason="builds a POSIX shared library")
def test_plugin_built_against_the_header(tmp_path):
    source = tmp_path / "plugin.c"
    source.write_text(PLUGIN)
    library = tmp_path / "plugin.so"
    subprocess.run(
        [
            *_compiler(),
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            f"-I{fh.get_include()}",
            f"-I{sysconfig.get_paths()['include']}",
            str(source),
            "-o",
            str(library),
        ],
        check=True,
    )
    plugin = ctypes.PyDLL(str(library))
    plugin.plugin_capsule.restype = ctypes.py_object
    capsule = plugin.plugin_capsule()
    marker = object()
    p = fh.GuardProgram(
        (("LOAD_ITEM", 3, 0, "x"), ("CHECK_NATIVE", 0, 3, (capsule, marker))), 4, {}, {}
    )
    assert p({"x": marker})
    assert not p({"x": object()})
    assert not p({"x": "raise"})  # an Exception fails the guard, as in a Python check
