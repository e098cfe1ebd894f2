/* The three small Python types of the hook's interface. */
#include "ember.h"
#include <structmember.h>

/* ---- GuardedCode ------------------------------------------------------ */

static PyObject *guarded_code_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"code", "guard", NULL};
    PyObject *code = NULL, *guard = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:GuardedCode", kwlist, &code, &guard)) {
        return NULL;
    }
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError,
                     "GuardedCode(code, guard): code must be a code object (a function's "
                     "__code__), got %.200s",
                     Py_TYPE(code)->tp_name);
        return NULL;
    }
    if (!PyCallable_Check(guard)) {
        PyErr_Format(PyExc_TypeError,
                     "GuardedCode(code, guard): guard must be callable as guard(f_locals) -> "
                     "bool, got %.200s",
                     Py_TYPE(guard)->tp_name);
        return NULL;
    }
    PyCodeObject *co = (PyCodeObject *)code;
    if (!(co->co_flags & CO_OPTIMIZED) || (co->co_flags & EMBER_SKIPPED_FLAGS)) {
        PyErr_Format(PyExc_TypeError,
                     "GuardedCode(code, guard): code %R must be the code of a plain function "
                     "(not a generator, coroutine, class body or module)",
                     code);
        return NULL;
    }
    GuardedCodeObject *self = (GuardedCodeObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->code = (PyCodeObject *)Py_NewRef(code);
    self->guard = Py_NewRef(guard);
    self->hits = 0;
    return (PyObject *)self;
}

static int guarded_code_traverse(GuardedCodeObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->code);
    Py_VISIT(self->guard);
    Py_VISIT(self->dict);
    return 0;
}

static int guarded_code_clear(GuardedCodeObject *self) {
    Py_CLEAR(self->code);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->dict);
    return 0;
}

static void guarded_code_dealloc(GuardedCodeObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    guarded_code_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *guarded_code_repr(GuardedCodeObject *self) {
    if (self->code == NULL) {
        return PyUnicode_FromFormat("<%s cleared>", Py_TYPE(self)->tp_name);
    }
    return PyUnicode_FromFormat("<%s %U at %U:%d, hits=%zd>", Py_TYPE(self)->tp_name,
                                self->code->co_name, self->code->co_filename,
                                self->code->co_firstlineno, self->hits);
}

static PyMemberDef guarded_code_members[] = {
    {"code", T_OBJECT, offsetof(GuardedCodeObject, code), READONLY,
     "The code object run instead of the frame's own code."},
    {"guard", T_OBJECT, offsetof(GuardedCodeObject, guard), READONLY,
     "guard(f_locals) -> bool: whether `code` may run for these locals."},
    {"hits", T_PYSSIZET, offsetof(GuardedCodeObject, hits), READONLY,
     "How many times the guard passed and `code` ran."},
    {NULL},
};

static PyGetSetDef guarded_code_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

PyTypeObject GuardedCode_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember_frame_hook.GuardedCode",
    .tp_doc = "GuardedCode(code, guard): run `code` instead of a frame's own code "
              "whenever guard(f_locals) is true.",
    .tp_basicsize = sizeof(GuardedCodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = guarded_code_new,
    .tp_dealloc = (destructor)guarded_code_dealloc,
    .tp_traverse = (traverseproc)guarded_code_traverse,
    .tp_clear = (inquiry)guarded_code_clear,
    .tp_repr = (reprfunc)guarded_code_repr,
    .tp_members = guarded_code_members,
    .tp_getset = guarded_code_getset,
    .tp_weaklistoffset = offsetof(GuardedCodeObject, weakrefs),
    .tp_dictoffset = offsetof(GuardedCodeObject, dict),
};

/* ---- Frame -------------------------------------------------------------
 * A snapshot of a frame that is about to start. It holds references to the
 * frame's code, namespaces and locals, never to the interpreter frame itself,
 * so it stays valid after the callback returns. */

typedef struct {
    PyObject_HEAD
    PyObject *f_code;
    PyObject *f_locals;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_func;
    PyObject *closure;
} FrameObject;

PyObject *ember_frame_view_new(EmberFrame *frame, PyObject *f_locals) {
    FrameObject *self = PyObject_GC_New(FrameObject, &Frame_Type);
    if (self == NULL) {
        return NULL;
    }
    PyObject *func = ember_frame_function(frame);
    self->f_code = Py_NewRef((PyObject *)frame->f_code);
    self->f_locals = Py_NewRef(f_locals);
    self->f_globals = Py_NewRef(frame->f_globals);
    self->f_builtins = Py_NewRef(frame->f_builtins);
    self->f_func = Py_NewRef(func);
    PyObject *closure = PyFunction_GET_CLOSURE(func);
    self->closure = Py_NewRef(closure != NULL ? closure : Py_None);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int frame_traverse(FrameObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->f_code);
    Py_VISIT(self->f_locals);
    Py_VISIT(self->f_globals);
    Py_VISIT(self->f_builtins);
    Py_VISIT(self->f_func);
    Py_VISIT(self->closure);
    return 0;
}

static int frame_clear(FrameObject *self) {
    Py_CLEAR(self->f_code);
    Py_CLEAR(self->f_locals);
    Py_CLEAR(self->f_globals);
    Py_CLEAR(self->f_builtins);
    Py_CLEAR(self->f_func);
    Py_CLEAR(self->closure);
    return 0;
}

static void frame_dealloc(FrameObject *self) {
    PyObject_GC_UnTrack(self);
    frame_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *frame_repr(FrameObject *self) {
    PyCodeObject *code = (PyCodeObject *)self->f_code;
    return PyUnicode_FromFormat("<ember_frame_hook.Frame %U at %U:%d>", code->co_name,
                                code->co_filename, code->co_firstlineno);
}

static PyMemberDef frame_members[] = {
    {"f_code", T_OBJECT, offsetof(FrameObject, f_code), READONLY, "The frame's code object."},
    {"f_locals", T_OBJECT, offsetof(FrameObject, f_locals), READONLY,
     "Arguments and closure variables by name, as the frame starts (a dict)."},
    {"f_globals", T_OBJECT, offsetof(FrameObject, f_globals), READONLY, "Globals dict."},
    {"f_builtins", T_OBJECT, offsetof(FrameObject, f_builtins), READONLY, "Builtins dict."},
    {"f_func", T_OBJECT, offsetof(FrameObject, f_func), READONLY,
     "The function object being called."},
    {"closure", T_OBJECT, offsetof(FrameObject, closure), READONLY,
     "The function's closure cells (a tuple) or None."},
    {NULL},
};

PyTypeObject Frame_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember_frame_hook.Frame",
    .tp_doc = "What the callback sees of a frame that is about to start.",
    .tp_basicsize = sizeof(FrameObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)frame_dealloc,
    .tp_traverse = (traverseproc)frame_traverse,
    .tp_clear = (inquiry)frame_clear,
    .tp_repr = (reprfunc)frame_repr,
    .tp_members = frame_members,
};

/* ---- CacheView ---------------------------------------------------------
 * Tells the callback what is cached for the code already and whether the
 * limit is reached; what to do then is the tracer's policy. */

typedef struct {
    PyObject_HEAD
    PyObject *code;
    PyObject *entries; /* tuple, most recently used first */
    int limit;
} CacheViewObject;

PyObject *ember_cache_view_new(PyObject *code, PyObject *entries, int limit) {
    CacheViewObject *self = PyObject_GC_New(CacheViewObject, &CacheView_Type);
    if (self == NULL) {
        return NULL;
    }
    self->entries = entries != NULL ? PyList_AsTuple(entries) : PyTuple_New(0);
    if (self->entries == NULL) {
        self->code = NULL;
        Py_DECREF(self);
        return NULL;
    }
    self->code = Py_NewRef(code);
    self->limit = limit;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int cache_view_traverse(CacheViewObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->code);
    Py_VISIT(self->entries);
    return 0;
}

static int cache_view_clear(CacheViewObject *self) {
    Py_CLEAR(self->code);
    Py_CLEAR(self->entries);
    return 0;
}

static void cache_view_dealloc(CacheViewObject *self) {
    PyObject_GC_UnTrack(self);
    cache_view_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *cache_view_full(CacheViewObject *self, void *closure) {
    return PyBool_FromLong(PyTuple_GET_SIZE(self->entries) >= self->limit);
}

static PyObject *cache_view_repr(CacheViewObject *self) {
    return PyUnicode_FromFormat("<ember_frame_hook.CacheView %zd/%d entries>",
                                PyTuple_GET_SIZE(self->entries), self->limit);
}

static PyMemberDef cache_view_members[] = {
    {"code", T_OBJECT, offsetof(CacheViewObject, code), READONLY, "The frame's code object."},
    {"entries", T_OBJECT, offsetof(CacheViewObject, entries), READONLY,
     "Cached GuardedCode entries, most recently used first (all their guards failed)."},
    {"limit", T_INT, offsetof(CacheViewObject, limit), READONLY, "The cache limit per code."},
    {NULL},
};

static PyGetSetDef cache_view_getset[] = {
    {"full", (getter)cache_view_full, NULL,
     "True when the limit is reached: a new entry would evict the least recently used.",
     NULL},
    {NULL},
};

PyTypeObject CacheView_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember_frame_hook.CacheView",
    .tp_doc = "The cache of one code object, as the callback sees it.",
    .tp_basicsize = sizeof(CacheViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)cache_view_dealloc,
    .tp_traverse = (traverseproc)cache_view_traverse,
    .tp_clear = (inquiry)cache_view_clear,
    .tp_repr = (reprfunc)cache_view_repr,
    .tp_members = cache_view_members,
    .tp_getset = cache_view_getset,
};
