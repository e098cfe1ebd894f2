"""Other users of co_extra slots (TorchDynamo, debuggers) and us on the same code objects."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import ember_frame_hook as fh

# A second extension that stores code extras, built on the fly with the Python headers,
# stands in for TorchDynamo (which does the same) without needing torch here.
OTHER_USER = textwrap.dedent(
    """
    #include <Python.h>
    static Py_ssize_t slot = -1;
    static void release(void *p) { if (p) Py_DECREF((PyObject *)p); }
    static PyObject *tag(PyObject *m, PyObject *code) {
        Py_INCREF(Py_None);
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Code_SetExtra(code, slot, Py_None) < 0) return NULL;
    #else
        if (_PyCode_SetExtra(code, slot, Py_None) < 0) return NULL;
    #endif
        Py_RETURN_NONE;
    }
    static PyMethodDef methods[] = {{"tag", tag, METH_O, ""}, {NULL}};
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "other_extra_user", 0, -1, methods};
    PyMODINIT_FUNC PyInit_other_extra_user(void) {
    #if PY_VERSION_HEX >= 0x030C0000
        slot = PyUnstable_Eval_RequestCodeExtraIndex(release);
    #else
        slot = _PyEval_RequestCodeExtraIndex(release);
    #endif
        return PyModule_Create(&def);
    }
    """
)

SCRIPT = textwrap.dedent(
    """
    import gc, sys
    sys.path.insert(0, sys.argv[1])
    import ember_frame_hook as fh   # our slot first
    import other_extra_user         # then another user's slot
    for _ in range(200):
        ns = {}
        exec("def f(x):\\n    return x\\n", ns)
        other_extra_user.tag(ns["f"].__code__)  # only the other user's slot is set
        del ns
    gc.collect()
    print("survived")
    """
)


def build_other_user(tmp_path):
    import sysconfig

    source = tmp_path / "other.c"
    source.write_text(OTHER_USER)
    target = tmp_path / f"other_extra_user{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["cc", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(target)], check=True
    )
    return tmp_path


def test_code_objects_annotated_only_by_another_extension_die_cleanly(tmp_path):
    folder = build_other_user(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "survived" in result.stdout


def test_cache_survives_alongside_other_slots():
    ns = {}
    exec("def f(x):\n    return x\n", ns)
    code = ns["f"].__code__
    entry = fh.GuardedCode(code.replace(co_name="f"), lambda loc: True)
    with fh.eval_frame(lambda frame, cache: entry if frame.f_code is code else None):
        assert ns["f"](3) == 3
    assert fh.cache_entries(code) == [entry]
    ns.clear()
    gc.collect()
