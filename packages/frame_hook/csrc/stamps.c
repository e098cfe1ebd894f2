/* Stamps: what a run of guard checks read, kept so a later run can tell that nothing it
 * read has changed, without reading it again.
 *
 * A model's guard reads thousands of module attributes (a conv's stride, each module's
 * four hook dicts, `type(m).forward.__globals__['F']`) that never change between calls.
 * CPython stamps every dict with a version that changes on each write and is never
 * reused (a global counter, 3.11 and 3.12), and every class with a version tag that
 * changes when the class or a base is modified. So when the dicts and classes a block of
 * checks read carry the versions they had when the block last passed, the block passes
 * again: its loads return the same objects, and its checks compare those objects with
 * constants in ways that cannot change (identity, the value of an int or a str, a dict's
 * keys).
 *
 * A stamp is one fact to re-check, cheaply: a register still holds the same object, a
 * dict is at a version, an object's instance dict is the same dict at a version, an
 * object's class is the same class (at a version tag). Stamps are checked in the order
 * they were taken, and every object a stamp dereferences is alive because an earlier
 * stamp vouched for the container holding it (or for the register holding it): pointers
 * are borrowed, never dereferenced before that. A register's stamp vouches for an
 * address, not an object: a freed argument's address is soon another's (tuples come
 * from a freelist). Such an object is stamped with its class as well, and what is read
 * through it is stable only where a version stamp proves it is the same object.
 *
 * What is not safe to stamp (a list, a property, a value with its own __eq__) makes the
 * log unstable, and its block is run in full from then on.
 */
#include "ember.h"

/* ma_version_tag is deprecated in 3.12 (kept, still bumped on every write) */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
static inline uint64_t dict_version(PyObject *dict) {
    return ((PyDictObject *)dict)->ma_version_tag;
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

enum {
    STAMP_REGISTER,      /* regs[reg] is obj */
    STAMP_DICT,          /* obj (an exact dict or OrderedDict) is at version */
    STAMP_INSTANCE_DICT, /* obj's instance dict is `expect`, at version */
    STAMP_TYPE,          /* type(obj) is `expect` */
    STAMP_TYPE_TAG,      /* type(obj) is `expect`, at version tag `version` */
    STAMP_CLASS,         /* obj (a class) is at version tag `version` */
};

static PyObject *str_getattribute;    /* interned "__getattribute__" */
static PyObject *object_getattribute; /* object.__getattribute__ as types find it */

static int valid_tag(PyTypeObject *type) {
    return (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && type->tp_version_tag != 0;
}

static int is_plain_dict(PyObject *obj) {
    return PyDict_CheckExact(obj) || PyODict_CheckExact(obj);
}

/* A value no code can change: None, a bool, int, float, complex, str or bytes of the
 * exact built-in type, or an exact tuple of such values. */
int ember_stamp_immutable(PyObject *value, int depth) {
    if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
        PyFloat_CheckExact(value) || PyComplex_CheckExact(value) ||
        PyUnicode_CheckExact(value) || PyBytes_CheckExact(value)) {
        return 1;
    }
    if (!PyTuple_CheckExact(value) || depth > 3) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); i++) {
        if (!ember_stamp_immutable(PyTuple_GET_ITEM(value, i), depth + 1)) {
            return 0;
        }
    }
    return 1;
}

/* Whether (kind, obj) was stamped already, remembering it if not: a module's instance
 * dict is read for each of its attributes, but stamped once. */
static int seen_before(EmberStampLog *log, int kind, PyObject *obj) {
    if (log->nseen * 2 >= log->seen_cap) {
        size_t cap = log->seen_cap ? 2 * (size_t)log->seen_cap : 1024;
        uintptr_t *grown = PyMem_Calloc(cap, sizeof(uintptr_t));
        if (grown == NULL) {
            return 0; /* stamped again: harmless */
        }
        for (Py_ssize_t i = 0; i < log->seen_cap; i++) {
            uintptr_t key = log->seen[i];
            size_t j = (key >> 4) & (cap - 1);
            while (key != 0 && grown[j] != 0) {
                j = (j + 1) & (cap - 1);
            }
            if (key != 0) {
                grown[j] = key;
            }
        }
        PyMem_Free(log->seen);
        log->seen = grown;
        log->seen_cap = (Py_ssize_t)cap;
    }
    uintptr_t key = (uintptr_t)obj ^ (uintptr_t)kind; /* objects are 8-byte aligned, kinds < 8 */
    size_t mask = (size_t)log->seen_cap - 1, j = (key >> 4) & mask;
    while (log->seen[j] != 0) {
        if (log->seen[j] == key) {
            return 1;
        }
        j = (j + 1) & mask;
    }
    log->seen[j] = key;
    log->nseen++;
    return 0;
}

static void add(EmberStampLog *log, int kind, int reg, PyObject *obj, PyObject *expect,
                uint64_t version) {
    if (log->unstable || (kind != STAMP_REGISTER && seen_before(log, kind, obj))) {
        return;
    }
    if (log->n == log->cap) {
        Py_ssize_t cap = log->cap ? 2 * log->cap : 64;
        EmberStamp *grown = PyMem_Realloc(log->items, (size_t)cap * sizeof(EmberStamp));
        if (grown == NULL) {
            log->unstable = 1; /* no memory to record: run the block in full */
            return;
        }
        log->items = grown;
        log->cap = cap;
    }
    log->items[log->n++] = (EmberStamp){kind, reg, obj, expect, version};
}

/* 1 when the stamp holds `obj` alive, so that the register holding its address again
 * proves it the same object: immutable data (a hyperparameter read in an earlier block)
 * and functions (whose globals a later load reads); both are small, and held only until
 * the block is recorded again. Anything else is known by its address only. */
int ember_stamp_register(EmberStampLog *log, int reg, PyObject *obj) {
    int hold = !log->unstable && (PyFunction_Check(obj) || ember_stamp_immutable(obj, 0));
    Py_ssize_t n = log->n;
    add(log, STAMP_REGISTER, reg, obj, NULL, 0);
    if (hold && log->n > n) {
        log->items[n].expect = Py_NewRef(obj);
        return 1;
    }
    return 0;
}

void ember_stamp_dict(EmberStampLog *log, PyObject *dict) {
    if (!is_plain_dict(dict)) {
        log->unstable = 1;
        return;
    }
    add(log, STAMP_DICT, 0, dict, NULL, dict_version(dict));
}

/* `always`: obj is known by its address only (see guard_program.c's note()), so even a
 * static class may differ next time; otherwise only a heap type's instances can change
 * class (`__class__` assignment). */
void ember_stamp_type(EmberStampLog *log, PyObject *obj, int always) {
    PyTypeObject *type = Py_TYPE(obj);
    if (always || (type->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        add(log, STAMP_TYPE, 0, obj, (PyObject *)type, 0);
    }
}

/* `loaded` is `obj.name` (`object.__getattribute__(obj, name)` when `generic`): stable
 * when it is the value in obj's instance dict and nothing in obj's class can intercept
 * the lookup, or a class attribute found plainly in the class's MRO. */
void ember_stamp_attribute(EmberStampLog *log, PyObject *obj, PyObject *name,
                           PyObject *loaded, int generic, int by_address) {
    PyTypeObject *type = Py_TYPE(obj);
    if (log->unstable) {
        return;
    }
    /* known by address only, a function may be another one at the same address */
    if (!by_address && PyFunction_Check(obj) && (PyUnicode_CompareWithASCIIString(name, "__globals__") == 0 ||
                                  PyUnicode_CompareWithASCIIString(name, "__closure__") == 0)) {
        return; /* read-only slots of the function object */
    }
    if (PyType_Check(obj) && !generic) {
        /* a class attribute: the metaclass is `type` and has no attribute of that name,
         * and the MRO lookup's own value was returned (a function, not a bound method) */
        PyTypeObject *cls = (PyTypeObject *)obj;
        if (type != &PyType_Type || _PyType_Lookup(&PyType_Type, name) != NULL ||
            _PyType_Lookup(cls, name) != loaded || !valid_tag(cls)) {
            log->unstable = 1;
            return;
        }
        add(log, STAMP_CLASS, 0, obj, NULL, cls->tp_version_tag);
        return;
    }
    PyObject **slot = _PyObject_GetDictPtr(obj);
    PyObject *dict = slot == NULL ? NULL : *slot;
    if (dict != NULL && loaded == dict && PyUnicode_CompareWithASCIIString(name, "__dict__") == 0) {
        /* the instance dict itself (what a check that an attribute is absent reads) */
        add(log, STAMP_INSTANCE_DICT, 0, obj, dict, dict_version(dict));
        return;
    }
    if (!generic && type->tp_getattro != PyObject_GenericGetAttr &&
        type->tp_getattro != PyModule_Type.tp_getattro &&
        _PyType_Lookup(type, str_getattribute) != object_getattribute) {
        log->unstable = 1; /* a Python __getattribute__ */
        return;
    }
    PyObject *descr = _PyType_Lookup(type, name);
    PyObject *own = dict != NULL && PyDict_CheckExact(dict) ? PyDict_GetItemWithError(dict, name)
                                                            : NULL;
    PyErr_Clear();
    /* found in the instance dict past no data descriptor, or a plain class attribute (no
     * __get__) the instance dict does not shadow */
    int from_dict = own == loaded && (descr == NULL || Py_TYPE(descr)->tp_descr_set == NULL);
    int from_class = own == NULL && descr == loaded && Py_TYPE(descr)->tp_descr_get == NULL &&
                     (dict == NULL || PyDict_CheckExact(dict));
    if (!(from_dict || from_class) || !valid_tag(type) || loaded == NULL) {
        log->unstable = 1;
        return;
    }
    if (slot != NULL) { /* without a slot, an object can never gain the attribute */
        /* a dict not made yet is stamped as NULL: a first attribute set makes one */
        add(log, STAMP_INSTANCE_DICT, 0, obj, dict, dict == NULL ? 0 : dict_version(dict));
    }
    add(log, STAMP_TYPE_TAG, 0, obj, (PyObject *)type, type->tp_version_tag);
}

/* 1 when every stamp still holds over `regs`, else 0 (no error is left set). */
int ember_stamps_hold(const EmberStamp *stamps, Py_ssize_t n, PyObject **regs) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const EmberStamp *s = &stamps[i];
        switch (s->kind) {
        case STAMP_REGISTER:
            if (regs[s->reg] != s->obj) {
                return 0;
            }
            break;
        case STAMP_DICT:
            if (dict_version(s->obj) != s->version) {
                return 0;
            }
            break;
        case STAMP_INSTANCE_DICT: {
            PyObject **slot = _PyObject_GetDictPtr(s->obj);
            if (slot == NULL || *slot != s->expect ||
                (*slot != NULL && dict_version(*slot) != s->version)) {
                PyErr_Clear();
                return 0;
            }
            break;
        }
        case STAMP_TYPE:
        case STAMP_TYPE_TAG: {
            PyTypeObject *type = Py_TYPE(s->obj);
            if ((PyObject *)type != s->expect ||
                (s->kind == STAMP_TYPE_TAG &&
                 (!valid_tag(type) || type->tp_version_tag != s->version))) {
                return 0;
            }
            break;
        }
        case STAMP_CLASS: {
            PyTypeObject *cls = (PyTypeObject *)s->obj;
            if (!valid_tag(cls) || cls->tp_version_tag != s->version) {
                return 0;
            }
            break;
        }
        }
    }
    return 1;
}

void ember_stamps_free(EmberStamp *stamps, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stamps[i].kind == STAMP_REGISTER) {
            Py_CLEAR(stamps[i].expect);
        }
    }
    PyMem_Free(stamps);
}

int ember_stamps_traverse(const EmberStamp *stamps, Py_ssize_t n, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stamps[i].kind == STAMP_REGISTER) {
            Py_VISIT(stamps[i].expect);
        }
    }
    return 0;
}

void ember_stamp_log_clear(EmberStampLog *log) {
    ember_stamps_free(log->items, log->n);
    PyMem_Free(log->seen);
    memset(log, 0, sizeof(*log));
}

int ember_stamps_init(void) {
    str_getattribute = PyUnicode_InternFromString("__getattribute__");
    if (str_getattribute == NULL) {
        return -1;
    }
    object_getattribute = _PyType_Lookup(&PyBaseObject_Type, str_getattribute);
    return object_getattribute == NULL ? -1 : 0;
}
