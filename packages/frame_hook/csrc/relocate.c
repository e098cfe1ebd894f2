/* Running a substitute whose frame does not fit where the original frame is.
 *
 * The common case grows the frame in place (eval_frame.c). That fails only
 * when the frame sits at the end of a chunk of the thread's frame stack. Then
 * the substitute still runs, by a route that depends on who pops the frame:
 *
 *  - 3.12: the interpreter pops the frame it evaluates. We start a new chunk
 *    (allocated like CPython's own, with the arena allocator, so CPython can
 *    free it), move the frame's contents there with the substitute code, and
 *    record the old chunk's top as the original frame's base: when the
 *    interpreter pops the new chunk, the original frame's space goes too.
 *  - 3.11: the caller pops the original frame after we return, so we leave it
 *    untouched and call a fresh function made of the substitute code, with the
 *    frame's function's globals and closure, passing the bound arguments on.
 */
#include "ember.h"

#if PY_VERSION_HEX >= 0x030C0000

#define MIN_CHUNK_BYTES (16 * 1024)

PyObject *ember_run_relocated(PyThreadState *tstate, EmberFrame *frame, PyCodeObject *code) {
    Py_ssize_t words = ember_frame_size(code);
    size_t bytes = sizeof(_PyStackChunk) + (size_t)words * sizeof(PyObject *);
    if (bytes < MIN_CHUNK_BYTES) {
        bytes = MIN_CHUNK_BYTES;
    }
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    _PyStackChunk *chunk = arena.alloc(arena.ctx, bytes);
    if (chunk == NULL) {
        return NULL; /* caller runs the original */
    }
    _PyStackChunk *old = tstate->datastack_chunk;
    chunk->previous = old;
    chunk->size = bytes;
    chunk->top = 0;
    old->top = (size_t)((PyObject **)frame - &old->data[0]);
    tstate->datastack_chunk = chunk;
    tstate->datastack_limit = (PyObject **)((char *)chunk + bytes);
    tstate->datastack_top = &chunk->data[0] + words;

    EmberFrame *moved = (EmberFrame *)&chunk->data[0];
    PyCodeObject *original = frame->f_code;
    int nargs = ember_argument_slots(original);
    moved->f_code = (PyCodeObject *)Py_NewRef(code);
    moved->previous = NULL;
    moved->f_funcobj = frame->f_funcobj; /* references move */
    moved->f_globals = frame->f_globals;
    moved->f_builtins = frame->f_builtins;
    moved->f_locals = frame->f_locals;
    moved->frame_obj = NULL;
    moved->prev_instr = _PyCode_CODE(code) - 1;
    moved->stacktop = code->co_nlocalsplus;
    moved->return_offset = 0;
    moved->owner = FRAME_OWNED_BY_THREAD;
    for (int i = 0; i < nargs; i++) {
        moved->localsplus[i] = frame->localsplus[i];
    }
    for (int i = nargs; i < code->co_nlocalsplus; i++) {
        moved->localsplus[i] = NULL;
    }
    for (int i = nargs; i < frame->stacktop; i++) {
        Py_CLEAR(frame->localsplus[i]); /* NULL before the frame starts; be safe */
    }
    Py_DECREF(original);
    return (PyObject *)moved;
}

#else /* 3.11 */

/* Calls `code` as a function with the arguments bound in `frame`. */
static PyObject *call_with_frame_arguments(EmberFrame *frame, PyObject *function) {
    PyCodeObject *co = frame->f_code;
    PyObject *names = co->co_localsplusnames;
    int npos = co->co_argcount, nkwonly = co->co_kwonlyargcount;
    PyObject *varargs = (co->co_flags & CO_VARARGS) ? frame->localsplus[npos + nkwonly] : NULL;
    PyObject *varkw = (co->co_flags & CO_VARKEYWORDS)
                          ? frame->localsplus[npos + nkwonly + ((co->co_flags & CO_VARARGS) != 0)]
                          : NULL;
    PyObject *args = PyList_New(0);
    PyObject *kwargs = PyDict_New();
    PyObject *result = NULL;
    if (args == NULL || kwargs == NULL) {
        goto done;
    }
    for (int i = 0; i < npos; i++) {
        if (PyList_Append(args, frame->localsplus[i]) < 0) {
            goto done;
        }
    }
    if (varargs != NULL && PyList_SetSlice(args, npos, npos, varargs) < 0) {
        goto done;
    }
    for (int i = npos; i < npos + nkwonly; i++) {
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(names, i), frame->localsplus[i]) < 0) {
            goto done;
        }
    }
    if (varkw != NULL && PyDict_Update(kwargs, varkw) < 0) {
        goto done;
    }
    PyObject *tuple = PyList_AsTuple(args);
    if (tuple != NULL) {
        result = PyObject_Call(function, tuple, kwargs);
        Py_DECREF(tuple);
    }
done:
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return result;
}

PyObject *ember_call_relocated(EmberFrame *frame, PyCodeObject *code) {
    PyObject *original_function = ember_frame_function(frame);
    PyObject *function = PyFunction_New((PyObject *)code, frame->f_globals);
    if (function == NULL) {
        return NULL;
    }
    PyObject *closure = PyFunction_GET_CLOSURE(original_function);
    if (closure != NULL && PyFunction_SetClosure(function, closure) < 0) {
        Py_DECREF(function);
        return NULL;
    }
    /* Keep the frame's builtins even if globals' __builtins__ changed since. */
    Py_SETREF(((PyFunctionObject *)function)->func_builtins, Py_NewRef(frame->f_builtins));
    ember_tls.bypass = (PyObject *)code; /* its frame must not be looked up again */
    PyObject *result = call_with_frame_arguments(frame, function);
    ember_tls.bypass = NULL;
    Py_DECREF(function);
    return result;
}

#endif
