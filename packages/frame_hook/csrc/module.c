/* The Python-facing functions of ember_frame_hook._C. */
#include "ember.h"
#include "ember_frame_hook.h"

PyObject *ember_GuardError = NULL;

static int require_code(PyObject *code, const char *func) {
    if (PyCode_Check(code)) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s(code): expected a code object (e.g. fn.__code__), got %.200s",
                 func, Py_TYPE(code)->tp_name);
    return -1;
}

static PyObject *set_eval_frame(PyObject *module, PyObject *setting) {
    return ember_set_thread_setting(setting);
}

static PyObject *get_eval_frame(PyObject *module, PyObject *unused) {
    return ember_get_thread_setting();
}

static PyObject *skip_code(PyObject *module, PyObject *code) {
    if (require_code(code, "skip_code") < 0) {
        return NULL;
    }
    CodeCache *cache = ember_code_cache_ensure(code);
    if (cache == NULL) {
        return NULL;
    }
    cache->skip = 1;
    Py_RETURN_NONE;
}

static PyObject *is_skipped(PyObject *module, PyObject *code) {
    if (require_code(code, "is_skipped") < 0) {
        return NULL;
    }
    CodeCache *cache = ember_code_cache_get(code);
    return PyBool_FromLong(cache != NULL && cache->skip);
}

static PyObject *cache_entries(PyObject *module, PyObject *code) {
    if (require_code(code, "cache_entries") < 0) {
        return NULL;
    }
    CodeCache *cache = ember_code_cache_get(code);
    if (cache == NULL || cache->entries == NULL) {
        return PyList_New(0);
    }
    return PyList_GetSlice(cache->entries, 0, PyList_GET_SIZE(cache->entries));
}

static PyObject *cache_insert(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "cache_insert(code, entry) takes 2 arguments, got %zd",
                     nargs);
        return NULL;
    }
    PyObject *code = args[0], *entry = args[1];
    if (require_code(code, "cache_insert") < 0) {
        return NULL;
    }
    if (!GuardedCode_Check(entry)) {
        PyErr_Format(PyExc_TypeError,
                     "cache_insert(code, entry): expected a GuardedCode, got %.200s",
                     Py_TYPE(entry)->tp_name);
        return NULL;
    }
    if (ember_check_substitute((PyCodeObject *)code, ((GuardedCodeObject *)entry)->code) < 0) {
        return NULL;
    }
    CodeCache *cache = ember_code_cache_ensure(code);
    if (cache == NULL || ember_code_cache_insert(cache, entry) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *reset(PyObject *module, PyObject *unused) {
    ember_code_cache_reset_all();
    Py_RETURN_NONE;
}

static PyObject *set_cache_limit(PyObject *module, PyObject *arg) {
    if (!PyLong_Check(arg) || PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "set_cache_limit(limit): expected an int, got %.200s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    long limit = PyLong_AsLong(arg);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (limit < 1 || limit > 1000000) {
        PyErr_Format(PyExc_ValueError,
                     "set_cache_limit(limit): limit must be between 1 and 1000000, got %ld", limit);
        return NULL;
    }
    long previous = ember_cache_limit();
    ember_set_cache_limit((int)limit);
    return PyLong_FromLong(previous);
}

static PyObject *get_cache_limit(PyObject *module, PyObject *unused) {
    return PyLong_FromLong(ember_cache_limit());
}

static PyObject *stats(PyObject *module, PyObject *unused) {
    return Py_BuildValue("{sKsKsKsKsK}", "hits", ember_stats.hits, "misses", ember_stats.misses,
                         "callbacks", ember_stats.callbacks, "relocated", ember_stats.relocated,
                         "passthrough", ember_stats.passthrough);
}

static PyObject *reset_stats(PyObject *module, PyObject *unused) {
    memset(&ember_stats, 0, sizeof(ember_stats));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_eval_frame", set_eval_frame, METH_O,
     "set_eval_frame(callback | None | False) -> previous setting, for this thread."},
    {"get_eval_frame", get_eval_frame, METH_NOARGS, "This thread's current setting."},
    {"skip_code", skip_code, METH_O, "Never call the callback for this code object again."},
    {"is_skipped", is_skipped, METH_O, "Whether skip_code() was called for this code object."},
    {"cache_entries", cache_entries, METH_O,
     "The GuardedCode entries cached for a code object, most recently used first."},
    {"cache_insert", (PyCFunction)(void (*)(void))cache_insert, METH_FASTCALL,
     "cache_insert(code, entry): cache a GuardedCode for a code object now, most recently "
     "used first (a callback that holds a lock caches its entry before releasing it; the "
     "hook's own insert of the returned entry then only moves it to the front)."},
    {"reset", reset, METH_NOARGS, "Drop every cache entry and skip mark."},
    {"set_cache_limit", set_cache_limit, METH_O,
     "Set the number of entries kept per code object; returns the previous limit."},
    {"get_cache_limit", get_cache_limit, METH_NOARGS, "The number of entries kept per code."},
    {"stats", stats, METH_NOARGS, "Counters of the hook's decisions since the last reset_stats()."},
    {"reset_stats", reset_stats, METH_NOARGS, "Zero the counters of stats()."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ember_frame_hook._C",
    .m_doc = "PEP 523 frame hook with a per-code cache of guarded substitute code.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__C(void) {
    if (PyType_Ready(&GuardedCode_Type) < 0 || PyType_Ready(&Frame_Type) < 0 ||
        PyType_Ready(&CacheView_Type) < 0 || ember_guard_program_init() < 0 ||
        ember_stamps_init() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (ember_code_cache_init() < 0) {
        goto fail;
    }
    ember_GuardError = PyErr_NewExceptionWithDoc(
        "ember_frame_hook.GuardError",
        "A guard raised instead of answering; the original exception is the __cause__.",
        PyExc_RuntimeError, NULL);
    if (ember_GuardError == NULL ||
        PyModule_AddObjectRef(module, "GuardError", ember_GuardError) < 0 ||
        PyModule_AddObjectRef(module, "GuardedCode", (PyObject *)&GuardedCode_Type) < 0 ||
        PyModule_AddObjectRef(module, "Frame", (PyObject *)&Frame_Type) < 0 ||
        PyModule_AddObjectRef(module, "CacheView", (PyObject *)&CacheView_Type) < 0 ||
        PyModule_AddObjectRef(module, "GuardProgram", (PyObject *)&GuardProgram_Type) < 0 ||
        PyModule_AddStringConstant(module, "NATIVE_CHECK_CAPSULE",
                                   EMBER_NATIVE_CHECK_CAPSULE) < 0 ||
        PyModule_AddIntConstant(module, "NATIVE_ABI_VERSION",
                                EMBER_FRAME_HOOK_NATIVE_ABI_VERSION) < 0) {
        goto fail;
    }
    return module;
fail:
    Py_DECREF(module);
    return NULL;
}
