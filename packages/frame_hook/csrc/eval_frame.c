/* The PEP 523 eval function: per frame, find cached code whose guard passes
 * and run it in place of the frame's own code; on a miss, ask the callback.
 *
 * The frame handed to us has not started: its argument slots are filled, its
 * other locals are NULL, cells are not made and free variables not copied yet
 * (MAKE_CELL and COPY_FREE_VARS are its first instructions). So substituting
 * code means swapping the code object of this very frame, which keeps the
 * arguments, the function (closure, globals, builtins) and the frame's place
 * on the thread's frame stack, and needs no private CPython function.
 *
 * Every path ends in _PyEval_EvalFrameDefault on this frame, errors too (the
 * pending exception is thrown into the unstarted frame), because on 3.12 the
 * interpreter is what pops the frame from the thread's frame stack.
 */
#include "ember.h"

EmberStats ember_stats;
extern PyObject *ember_GuardError;

/* Arguments and closure variables by name, as the frame starts. */
static PyObject *frame_locals(EmberFrame *frame) {
    PyCodeObject *code = frame->f_code;
    PyObject *names = code->co_localsplusnames;
    PyObject *locals = PyDict_New();
    if (locals == NULL) {
        return NULL;
    }
    int nargs = ember_argument_slots(code);
    for (int i = 0; i < nargs; i++) {
        PyObject *value = frame->localsplus[i];
        if (value != NULL && PyDict_SetItem(locals, PyTuple_GET_ITEM(names, i), value) < 0) {
            goto fail;
        }
    }
    int nfree = code->co_nfreevars;
    if (nfree > 0) {
        PyObject *closure = PyFunction_GET_CLOSURE(ember_frame_function(frame));
        int offset = code->co_nlocalsplus - nfree;
        for (int j = 0; closure != NULL && j < nfree; j++) {
            PyObject *value = PyCell_GET(PyTuple_GET_ITEM(closure, j));
            if (value != NULL &&
                PyDict_SetItem(locals, PyTuple_GET_ITEM(names, offset + j), value) < 0) {
                goto fail;
            }
        }
    }
    return locals;
fail:
    Py_DECREF(locals);
    return NULL;
}

static int same_names(PyObject *a, PyObject *b, int start_a, int start_b, int count) {
    for (int i = 0; i < count; i++) {
        int eq = PyUnicode_Compare(PyTuple_GET_ITEM(a, start_a + i), PyTuple_GET_ITEM(b, start_b + i));
        if (eq != 0) {
            return 0;
        }
    }
    return 1;
}

int ember_check_substitute(PyCodeObject *original, PyCodeObject *code) {
    const char *what = NULL;
    int arg_flags = CO_VARARGS | CO_VARKEYWORDS;
    int nargs = ember_argument_slots(original);
    if (code->co_argcount != original->co_argcount ||
        code->co_posonlyargcount != original->co_posonlyargcount ||
        code->co_kwonlyargcount != original->co_kwonlyargcount ||
        (code->co_flags & arg_flags) != (original->co_flags & arg_flags)) {
        what = "a different signature (argument counts or *args/**kwargs)";
    }
    else if (!same_names(code->co_localsplusnames, original->co_localsplusnames, 0, 0, nargs)) {
        what = "different argument names";
    }
    else if (code->co_nfreevars != original->co_nfreevars ||
             !same_names(code->co_localsplusnames, original->co_localsplusnames,
                         code->co_nlocalsplus - code->co_nfreevars,
                         original->co_nlocalsplus - original->co_nfreevars,
                         code->co_nfreevars)) {
        what = "different free variables (they must match the closure one to one)";
    }
    if (what == NULL) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "GuardedCode for %U (%U:%d) cannot run in its frame: the substitute code %R "
                 "has %s",
                 original->co_name, original->co_filename, original->co_firstlineno, code, what);
    return -1;
}

/* Swaps `code` into the unstarted frame. Returns 0 when the frame cannot grow
 * to the substitute's size (it is not the top of its frame-stack chunk or the
 * chunk is full); relocate.c handles that case. */
static int substitute(PyThreadState *tstate, EmberFrame *frame, PyCodeObject *code) {
    PyCodeObject *original = frame->f_code;
    PyObject **base = (PyObject **)frame;
    Py_ssize_t old_size = ember_frame_size(original), new_size = ember_frame_size(code);
    if (new_size > old_size) {
        if (tstate->datastack_top != base + old_size || base + new_size > tstate->datastack_limit) {
            return 0;
        }
        tstate->datastack_top = base + new_size;
    }
    int nargs = ember_argument_slots(original);
    for (int i = nargs; i < frame->stacktop; i++) {
        Py_CLEAR(frame->localsplus[i]);
    }
    for (int i = frame->stacktop; i < code->co_nlocalsplus; i++) {
        frame->localsplus[i] = NULL;
    }
    frame->f_code = (PyCodeObject *)Py_NewRef(code);
    Py_DECREF(original); /* the function object still owns it */
    frame->prev_instr = _PyCode_CODE(code) - 1;
    frame->stacktop = code->co_nlocalsplus;
    return 1;
}

/* Replaces the pending exception by GuardError, chained to it. */
static void raise_guard_error(PyCodeObject *code) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    PyErr_Format(ember_GuardError,
                 "a guard of the cached code for %U (%U:%d) raised %S; fix the guard or reset() "
                 "the cache",
                 code->co_name, code->co_filename, code->co_firstlineno,
                 value != NULL ? value : Py_None);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (value != NULL) {
        PyException_SetCause(v2, Py_NewRef(value));
        PyException_SetContext(v2, value); /* steals */
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyErr_Restore(t2, v2, tb2);
}

/* Asks the callback for code to run; returns a new reference to a GuardedCode
 * (already in the cache), to None, or NULL with an exception set. */
static PyObject *consult_callback(PyObject *callback, EmberFrame *frame, PyObject *locals) {
    PyObject *code = (PyObject *)frame->f_code;
    CodeCache *cache = ember_code_cache_get(code);
    PyObject *view_frame = ember_frame_view_new(frame, locals);
    if (view_frame == NULL) {
        return NULL;
    }
    PyObject *view_cache =
        ember_cache_view_new(code, cache != NULL ? cache->entries : NULL, ember_cache_limit());
    if (view_cache == NULL) {
        Py_DECREF(view_frame);
        return NULL;
    }
    ember_stats.callbacks++;
    Py_INCREF(callback); /* it may turn itself off while it runs */
    PyObject *result = PyObject_CallFunctionObjArgs(callback, view_frame, view_cache, NULL);
    Py_DECREF(callback);
    Py_DECREF(view_frame);
    Py_DECREF(view_cache);
    if (result == NULL || result == Py_None) {
        return result;
    }
    if (!GuardedCode_Check(result)) {
        PyErr_Format(PyExc_TypeError,
                     "the ember_frame_hook callback must return a GuardedCode or None, got "
                     "%.200s (while starting %U at %U:%d)",
                     Py_TYPE(result)->tp_name, frame->f_code->co_name,
                     frame->f_code->co_filename, frame->f_code->co_firstlineno);
        Py_DECREF(result);
        return NULL;
    }
    GuardedCodeObject *entry = (GuardedCodeObject *)result;
    if (ember_check_substitute(frame->f_code, entry->code) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    cache = ember_code_cache_ensure(code);
    if (cache == NULL || ember_code_cache_insert(cache, result) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* Runs the chosen entry's code in place of the frame's own. */
static PyObject *run_substitute(PyThreadState *tstate, EmberFrame *frame, PyCodeObject *code) {
    if (substitute(tstate, frame, code)) {
        return _PyEval_EvalFrameDefault(tstate, frame, 0);
    }
    ember_stats.relocated++;
#if PY_VERSION_HEX >= 0x030C0000
    EmberFrame *moved = (EmberFrame *)ember_run_relocated(tstate, frame, code);
    if (moved == NULL) {
        return _PyEval_EvalFrameDefault(tstate, frame, 0); /* out of memory: the original */
    }
    return _PyEval_EvalFrameDefault(tstate, moved, 0);
#else
    return ember_call_relocated(frame, code);
#endif
}

PyObject *ember_eval_frame(PyThreadState *tstate, EmberFrame *frame, int throw_flag) {
    if (ember_tls.bypass != NULL && (PyObject *)frame->f_code == ember_tls.bypass) {
        ember_tls.bypass = NULL;
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    PyObject *setting = ember_tls.setting;
    if (setting == NULL || setting == Py_None || ember_tls.busy || throw_flag) {
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    PyCodeObject *code = frame->f_code;
    if ((code->co_flags & EMBER_SKIPPED_FLAGS) || !(code->co_flags & CO_OPTIMIZED) ||
        frame->frame_obj != NULL || ember_tracing_active(tstate)) {
        ember_stats.passthrough++;
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    CodeCache *cache = ember_code_cache_get((PyObject *)code);
    if (cache != NULL && cache->skip) {
        ember_stats.passthrough++;
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    int run_only = setting == Py_False;
    int has_entries = cache != NULL && cache->entries != NULL && PyList_GET_SIZE(cache->entries) > 0;
    if (run_only && !has_entries) {
        ember_stats.misses++;
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }

    /* From here on Python code runs (guards, callback): the hook is off for it. */
    ember_tls.busy = 1;
    PyObject *chosen = NULL; /* new reference: GuardedCode or None */
    PyObject *locals = frame_locals(frame);
    if (locals != NULL) {
        chosen = has_entries ? ember_code_cache_lookup(cache, locals) : Py_None;
        if (chosen == NULL) {
            raise_guard_error(code);
        }
        else if (chosen != Py_None) {
            ember_stats.hits++;
        }
        else {
            ember_stats.misses++;
            chosen = run_only ? Py_NewRef(Py_None) : consult_callback(setting, frame, locals);
        }
        Py_DECREF(locals);
    }
    ember_tls.busy = 0;

    if (chosen == NULL) {
        /* Throw into the unstarted frame: the interpreter unwinds and frees it. */
        return _PyEval_EvalFrameDefault(tstate, frame, 1);
    }
    if (chosen == Py_None) {
        Py_DECREF(chosen);
        return _PyEval_EvalFrameDefault(tstate, frame, 0);
    }
    /* The frame keeps its own reference to the code; the entry may go. */
    PyCodeObject *code_to_run = (PyCodeObject *)Py_NewRef(((GuardedCodeObject *)chosen)->code);
    Py_DECREF(chosen);
    PyObject *result = run_substitute(tstate, frame, code_to_run);
    Py_DECREF(code_to_run);
    return result;
}
