/* Everything that differs between CPython versions lives here, so the rest of
 * the extension reads the same on 3.11 and 3.12.
 *
 * We read the interpreter's private frame layout (_PyInterpreterFrame) through
 * the installed internal headers, but we call no private *function* other than
 * the PEP 523 entry points, which CPython exports on purpose. Private helpers
 * such as _PyThreadState_PopFrame are hidden symbols in many builds, so relying
 * on them would make the extension fail to load there.
 */
#ifndef EMBER_COMPAT_H
#define EMBER_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "ember_frame_hook supports CPython 3.11 and 3.12 only (the frame layout differs elsewhere)"
#endif

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#define EMBER_UNDEF_BUILD_CORE
#endif
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030C0000
/* Python.h (included without Py_BUILD_CORE) defines this as a macro that the
 * internal GC header then tries to declare as a function. */
#undef _PyGC_FINALIZED
#include <internal/pycore_interp.h> /* interp->monitors, for sys.monitoring tools */
#endif
#ifdef EMBER_UNDEF_BUILD_CORE
#undef Py_BUILD_CORE
#undef EMBER_UNDEF_BUILD_CORE
#endif

/* Kinds of slots in co_localspluskinds (internal/pycore_code.h). */
#define EMBER_FAST_LOCAL 0x20
#define EMBER_FAST_CELL 0x40
#define EMBER_FAST_FREE 0x80

#define EMBER_SKIPPED_FLAGS \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

typedef _PyInterpreterFrame EmberFrame;

static inline PyObject *ember_frame_function(EmberFrame *frame) {
#if PY_VERSION_HEX >= 0x030C0000
    return frame->f_funcobj;
#else
    return (PyObject *)frame->f_func;
#endif
}

/* Words a frame of this code takes on the thread's frame stack. */
static inline Py_ssize_t ember_frame_size(PyCodeObject *code) {
#if PY_VERSION_HEX >= 0x030C0000
    return code->co_framesize;
#else
    return code->co_nlocalsplus + code->co_stacksize + FRAME_SPECIALS_SIZE;
#endif
}

/* Code extra slots: the public spelling changed in 3.12. */
static inline Py_ssize_t ember_request_code_extra_index(freefunc free) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyUnstable_Eval_RequestCodeExtraIndex(free);
#else
    return _PyEval_RequestCodeExtraIndex(free);
#endif
}

static inline int ember_code_get_extra(PyObject *code, Py_ssize_t index, void **extra) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyUnstable_Code_GetExtra(code, index, extra);
#else
    return _PyCode_GetExtra(code, index, extra);
#endif
}

static inline int ember_code_set_extra(PyObject *code, Py_ssize_t index, void *extra) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyUnstable_Code_SetExtra(code, index, extra);
#else
    return _PyCode_SetExtra(code, index, extra);
#endif
}

/* sys.monitoring tools that only time calls: cProfile's (sys.monitoring.PROFILER_ID, 2) and
 * the one sys.setprofile runs on (6). CPython 3.12 reserves these ids. */
#define EMBER_PROFILER_TOOLS ((1 << 2) | (1 << 6))

/* A frame is traced when sys.settrace (or a debugger built on it) is active on this thread,
 * while a trace or profile callback runs, or, on 3.12, when a sys.monitoring tool other than
 * a profiler (PEP 669 debuggers, coverage) listens to any event globally. Substituting code
 * under them would hide the user's lines. A profiler (sys.setprofile, cProfile,
 * torch.profiler's Python stacks) times what runs: the compiled code runs under it, as it
 * does without it, so that a profile shows the compiled program. */
static inline int ember_tracing_active(PyThreadState *tstate) {
    if (tstate->c_tracefunc != NULL || tstate->tracing) {
        return 1;
    }
#if PY_VERSION_HEX >= 0x030C0000
    const uint8_t *tools = tstate->interp->monitors.tools;
    for (int event = 0; event < _PY_MONITORING_UNGROUPED_EVENTS; event++) {
        if (tools[event] & ~EMBER_PROFILER_TOOLS) {
            return 1;
        }
    }
#endif
    return 0;
}

/* Number of argument slots at the start of localsplus: positional (including
 * positional-only), keyword-only, then *args and **kwargs when present. */
static inline int ember_argument_slots(PyCodeObject *code) {
    int n = code->co_argcount + code->co_kwonlyargcount;
    if (code->co_flags & CO_VARARGS) {
        n++;
    }
    if (code->co_flags & CO_VARKEYWORDS) {
        n++;
    }
    return n;
}

#endif /* EMBER_COMPAT_H */
