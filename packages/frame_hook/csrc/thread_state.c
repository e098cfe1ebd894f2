/* The per-thread setting and the interpreter-wide installation of the hook.
 *
 * PEP 523 installs an eval function per interpreter; Ember wants a setting per
 * thread. The eval function is installed while at least one thread has a
 * setting other than None, and it consults a C thread-local first, so threads
 * that never enabled the hook pay one load and a compare per frame.
 *
 * The owning reference to a thread's setting is kept by a small holder object
 * in the thread-state dict: when the thread ends, CPython clears that dict,
 * the holder dies, and the count of enabled threads goes down with it.
 */
#include "ember.h"

_Thread_local EmberThreadState ember_tls = {NULL, 0, NULL};

static Py_ssize_t enabled_threads = 0;
static PyObject *holder_key = NULL;

typedef struct {
    PyObject_HEAD
    PyObject *setting;           /* None, False or a callable (strong) */
    EmberThreadState *owner;     /* the owning thread's ember_tls */
} HolderObject;

static int is_on(PyObject *setting) {
    return setting != NULL && setting != Py_None;
}

static void sync_installation(void) {
    PyThreadState *tstate = _PyThreadState_UncheckedGet();
    if (tstate == NULL) {
        return; /* interpreter teardown: nothing left to install into */
    }
    PyInterpreterState *interp = tstate->interp;
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (enabled_threads > 0) {
        if (current != (_PyFrameEvalFunction)ember_eval_frame) {
            _PyInterpreterState_SetEvalFrameFunc(interp, (_PyFrameEvalFunction)ember_eval_frame);
        }
    }
    else if (current == (_PyFrameEvalFunction)ember_eval_frame) {
        /* Give Python-to-Python call inlining back to threads that don't trace. */
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
}

static void holder_dealloc(HolderObject *self) {
    if (is_on(self->setting)) {
        enabled_threads--;
        sync_installation();
    }
    if (self->owner == &ember_tls) {
        ember_tls.setting = NULL;
    }
    Py_CLEAR(self->setting);
    PyObject_Free(self);
}

static PyTypeObject Holder_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember_frame_hook._ThreadSetting",
    .tp_basicsize = sizeof(HolderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)holder_dealloc,
};

static HolderObject *thread_holder(int create) {
    if (holder_key == NULL) {
        if (PyType_Ready(&Holder_Type) < 0) {
            return NULL;
        }
        holder_key = PyUnicode_InternFromString("ember_frame_hook.setting");
        if (holder_key == NULL) {
            return NULL;
        }
    }
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ember_frame_hook: no thread state dict");
        return NULL;
    }
    PyObject *holder = PyDict_GetItemWithError(dict, holder_key);
    if (holder != NULL || PyErr_Occurred() || !create) {
        return (HolderObject *)holder;
    }
    HolderObject *fresh = PyObject_New(HolderObject, &Holder_Type);
    if (fresh == NULL) {
        return NULL;
    }
    fresh->setting = Py_NewRef(Py_None);
    fresh->owner = &ember_tls;
    int rc = PyDict_SetItem(dict, holder_key, (PyObject *)fresh);
    Py_DECREF(fresh); /* the dict owns it */
    return rc < 0 ? NULL : fresh;
}

PyObject *ember_set_thread_setting(PyObject *setting) {
    if (setting != Py_None && setting != Py_False && !PyCallable_Check(setting)) {
        PyErr_Format(PyExc_TypeError,
                     "set_eval_frame(callback): expected a callable callback(frame, cache), "
                     "None (hook off) or False (run-only: cached code only), got %.200s",
                     Py_TYPE(setting)->tp_name);
        return NULL;
    }
    HolderObject *holder = thread_holder(1);
    if (holder == NULL) {
        return NULL;
    }
    PyObject *previous = holder->setting; /* the reference moves to the caller */
    holder->setting = Py_NewRef(setting);
    ember_tls.setting = setting;
    enabled_threads += is_on(setting) - is_on(previous);
    sync_installation();
    return previous;
}

PyObject *ember_get_thread_setting(void) {
    HolderObject *holder = thread_holder(0);
    if (holder == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    return Py_NewRef(holder->setting);
}
