/* GuardProgram: a frame's guard as a flat list of instructions run in C.
 *
 * A guard written as Python (`type(L['x']) is T and L['x'].shape == (2, 3) ...`)
 * pays the interpreter's dispatch for every load and comparison; on a large model
 * that is hundreds of checks per call. A GuardProgram states the same checks as a
 * register machine: loads put values into registers, checks compare a register
 * with a constant, and the first check that fails answers False. The cache lookup
 * (code_cache.c) runs a GuardProgram directly, without a Python call.
 *
 * The program is built from Python as a tuple of instructions, each a 4-tuple
 * `(opname, dst, src, arg)` (arg None when left out); registers 0, 1 and 2 hold the frame's f_locals,
 * globals and builtins. Every instruction does exactly what the Python expression
 * named next to its opcode below does, including which exceptions it raises:
 * like a generated Python guard wrapped in `try: ... except Exception: return
 * False`, an Exception raised by a step makes the program answer False, while a
 * BaseException that is not an Exception (KeyboardInterrupt) propagates.
 *
 * Nothing here knows torch: a tensor check is a sequence of attribute loads and
 * comparisons (`t.dtype is D`, `t.shape == (2, 3)`) that the tracer emits.
 */
#include "ember.h"
#include "ember_frame_hook.h"
#include <math.h>

typedef enum {
    /* loads: reg[dst] = ... */
    OP_LOAD_ATTR,   /* reg[src].<arg> */
    OP_LOAD_ITEM,   /* reg[src][arg] (fast paths for exact dict, list, tuple) */
    OP_LOAD_TYPE,   /* type(reg[src]) */
    OP_LOAD_CONST,  /* arg */
    OP_CALL,        /* reg[src](*arg) */
    OP_CALL_METHOD, /* reg[src].<arg>() */
    OP_LOAD_LIST,   /* list(reg[src]) */
    OP_LOAD_VALUES, /* list(reg[src].values()) */
    OP_LOAD_GENERIC_ATTR, /* object.__getattribute__(reg[src], arg): no Python hook runs */
    /* checks: the program answers False when one fails */
    OP_CHECK_TYPE,       /* type(reg[src]) is arg */
    OP_CHECK_IS,         /* reg[src] is arg */
    OP_CHECK_IS_NOT,     /* reg[src] is not arg */
    OP_CHECK_SAME,       /* reg[src] is reg[arg] */
    OP_CHECK_DISTINCT,   /* the registers in the tuple arg hold distinct objects */
    OP_CHECK_EQ,         /* reg[src] == arg */
    OP_CHECK_TRUE,       /* bool(reg[src]) */
    OP_CHECK_FALSE,      /* not reg[src] */
    OP_CHECK_LEN,        /* len(reg[src]) == arg */
    OP_CHECK_ITEM_TYPES, /* tuple(map(type, reg[src])) == arg */
    OP_CHECK_KEYS,       /* [*reg[src]] == arg (a list) */
    OP_CHECK_DIMS,       /* reg[src] (a shape or strides) matches arg = (dims, min) */
    OP_CHECK_NO_ATTR,    /* not hasattr(reg[src], arg) */
    OP_CHECK_NOT_IN,     /* arg not in reg[src] */
    OP_CHECK_CALL,       /* arg[0](reg[src], *arg[1]) is truthy: the escape hatch; with
                            arg[2] True its exceptions propagate instead of failing */
    OP_CHECK_OWNER,      /* the thread's hook setting is arg or False */
    OP_CHECK_NATIVE,     /* arg = (capsule, data): a C check a plug-in provides */
    OP_CHECK_FLOAT,      /* type(v) is float and v is arg bit for bit: NaN matches NaN,
                            -0.0 differs from 0.0 */
    /* control */
    OP_BLOCK, /* the next `arg` instructions are a block: skipped, their registers set
                 again, when what they read last time they passed is unchanged (stamps.c) */
    OP_COUNT
} Opcode;

static const char *const op_names[OP_COUNT] = {
    "LOAD_ATTR",  "LOAD_ITEM",      "LOAD_TYPE",   "LOAD_CONST",       "CALL",
    "CALL_METHOD", "LOAD_LIST",     "LOAD_VALUES", "LOAD_GENERIC_ATTR", "CHECK_TYPE",
    "CHECK_IS",
    "CHECK_IS_NOT", "CHECK_SAME",   "CHECK_DISTINCT", "CHECK_EQ",      "CHECK_TRUE",
    "CHECK_FALSE", "CHECK_LEN",     "CHECK_ITEM_TYPES", "CHECK_KEYS",  "CHECK_DIMS",
    "CHECK_NO_ATTR", "CHECK_NOT_IN", "CHECK_CALL", "CHECK_OWNER", "CHECK_NATIVE",
    "CHECK_FLOAT", "BLOCK",
};

/* CHECK_NATIVE's plug-in (a capsule holding an `ember_native_check`) is the public ABI
 * declared in include/ember_frame_hook.h, which plug-ins compile against. */

/* The registers that hold the frame's namespaces when a program starts. */
enum { REG_LOCALS = 0, REG_GLOBALS = 1, REG_BUILTINS = 2, REG_FIRST_FREE = 3 };

/* A dim of CHECK_DIMS that is not compared (None in the Python tuple). */
#define ANY_DIM PY_SSIZE_T_MIN

typedef struct {
    int op;
    int dst;
    int src;
    PyObject *arg;     /* borrowed from the instruction tuple the program keeps */
    Py_ssize_t n;      /* LOAD_ITEM: int index; CHECK_LEN: length; CHECK_SAME: register;
                          CHECK_CALL: 1 when its exceptions propagate;
                          CHECK_DIMS: minimum of an unchecked dim, or -1 */
    Py_ssize_t *ints;  /* CHECK_DISTINCT: registers; CHECK_DIMS: dims (ANY_DIM) */
    Py_ssize_t nints;
    PyObject *extra;   /* CHECK_CALL: the callable; CHECK_DIMS: the static tuple or NULL;
                          CHECK_NATIVE: the data */
    ember_native_check native; /* CHECK_NATIVE: the plug-in's function */
    int has_int_key;   /* LOAD_ITEM: arg is an exact int that fits n */
    Py_ssize_t block;  /* BLOCK: its index in the program's blocks */
    int needs_src;     /* reads reg[src] (checked to be loaded when it runs) */
} Instr;

/* A block of instructions that may be skipped (BLOCK): once it has passed with stamps
 * taken of everything it read, a run whose stamps still hold sets the registers that later
 * instructions read from it to the objects they held, and goes on after it. */
enum { BLOCK_UNRECORDED, BLOCK_RECORDED, BLOCK_RUN_ALWAYS };
#define BLOCK_MAX_MISSES 8 /* recorded, then found changed this often: stop recording */

typedef struct {
    Py_ssize_t start, end; /* its instructions: [start, end) */
    int state;
    int misses;
    EmberStamp *stamps;
    Py_ssize_t nstamps;
    int *restore;             /* registers it loads that instructions after it read */
    PyObject **restore_values; /* their objects when it passed (borrowed: see stamps.c) */
    Py_ssize_t nrestore;
    Py_ssize_t unstamped; /* run always: the instruction whose read no stamp covers */
} Block;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Instr *code;
    Py_ssize_t ncode;
    Py_ssize_t nregs;
    PyObject *instructions; /* the tuple it was built from: owns every `arg` */
    PyObject *globals;
    PyObject *builtins;
    PyObject *weakrefs;
    unsigned long long serial;        /* unique per program, never reused */
    unsigned long long shared_with;   /* serial of the program shared_length is for */
    Py_ssize_t shared_length;         /* instructions in common with that program */
    Block *blocks;
    Py_ssize_t nblocks;
    int running; /* runs in progress: a load can run Python code that runs this program */
} GuardProgramObject;

static unsigned long long next_serial = 1;

static PyObject *str_values; /* interned "values" */

/* ---- running ------------------------------------------------------------ */

#define SET_REG(index, value)                  \
    do {                                       \
        PyObject *_old = regs[(index)];        \
        regs[(index)] = (value);               \
        Py_XDECREF(_old);                      \
    } while (0)

/* reg[src][arg]; NULL without an error set when the key or index is missing. */
static PyObject *load_item(PyObject *base, const Instr *in) {
    if (PyDict_CheckExact(base)) {
        /* NULL without an error: a KeyError in Python, which fails the guard */
        return Py_XNewRef(PyDict_GetItemWithError(base, in->arg));
    }
    if (in->has_int_key && (PyList_CheckExact(base) || PyTuple_CheckExact(base))) {
        Py_ssize_t size = Py_SIZE(base), i = in->n < 0 ? in->n + size : in->n;
        if (i < 0 || i >= size) {
            return NULL; /* an IndexError in Python */
        }
        PyObject *item = PyList_CheckExact(base) ? PyList_GET_ITEM(base, i)
                                                 : PyTuple_GET_ITEM(base, i);
        return Py_NewRef(item);
    }
    return PyObject_GetItem(base, in->arg);
}

/* 1: the same ints; 0: not; -1: error. `value` is a shape/stride sequence. */
static int dims_match(PyObject *value, const Instr *in) {
    if (in->extra != NULL && PyTuple_Check(value) &&
        Py_TYPE(value)->tp_richcompare == PyTuple_Type.tp_richcompare) {
        /* `value == (2, 3)` for a tuple or torch.Size: item-wise == */
        Py_ssize_t size = PyTuple_GET_SIZE(value);
        if (size != in->nints) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            PyObject *item = PyTuple_GET_ITEM(value, i);
            if (PyLong_CheckExact(item)) {
                int overflow = 0;
                long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
                if (overflow || v != (long long)in->ints[i]) {
                    return 0;
                }
                continue;
            }
            int equal = PyObject_RichCompareBool(item, PyTuple_GET_ITEM(in->extra, i), Py_EQ);
            if (equal <= 0) {
                return equal;
            }
        }
        return 1;
    }
    if (in->extra != NULL) {
        return PyObject_RichCompareBool(value, in->extra, Py_EQ);
    }
    /* `len(d) == n and d[0] == 4 and d[1] >= 2 ...` (a dynamic dim has no value) */
    Py_ssize_t size = PyObject_Length(value);
    if (size < 0) {
        return -1;
    }
    if (size != in->nints) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        if (in->ints[i] == ANY_DIM && in->n < 0) {
            continue;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        PyObject *item = index == NULL ? NULL : PyObject_GetItem(value, index);
        Py_XDECREF(index);
        if (item == NULL) {
            return -1;
        }
        int is_any = in->ints[i] == ANY_DIM;
        PyObject *bound = PyLong_FromSsize_t(is_any ? in->n : in->ints[i]);
        int ok = bound == NULL ? -1 : PyObject_RichCompareBool(item, bound, is_any ? Py_GE : Py_EQ);
        Py_XDECREF(bound);
        Py_DECREF(item);
        if (ok <= 0) {
            return ok;
        }
    }
    return 1;
}

static int compare_pointers(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (PyObject *const *)a, y = (uintptr_t) * (PyObject *const *)b;
    return (x > y) - (x < y);
}

static int distinct(PyObject **regs, const Instr *in) {
    Py_ssize_t n = in->nints;
    if (n <= 8) {
        for (Py_ssize_t i = 0; i < n; i++) {
            for (Py_ssize_t j = i + 1; j < n; j++) {
                if (regs[in->ints[i]] == regs[in->ints[j]]) {
                    return 0;
                }
            }
        }
        return 1;
    }
    PyObject **sorted = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    if (sorted == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        sorted[i] = regs[in->ints[i]];
    }
    qsort(sorted, (size_t)n, sizeof(PyObject *), compare_pointers);
    int result = 1;
    for (Py_ssize_t i = 1; i < n && result; i++) {
        result = sorted[i] != sorted[i - 1];
    }
    PyMem_Free(sorted);
    return result;
}

/* `[*value] == keys`: an exact dict is walked in place, anything else iterated. An exact
 * OrderedDict expected empty (a module's hook dicts, four a module) is told by its size:
 * iterating it would build a list on every call. */
static int keys_match(PyObject *value, PyObject *keys) {
    if (PyODict_CheckExact(value) && PyList_GET_SIZE(keys) == 0) {
        return PyDict_GET_SIZE(value) == 0;
    }
    if (!PyDict_CheckExact(value)) {
        PyObject *list = PySequence_List(value);
        if (list == NULL) {
            return -1;
        }
        int equal = PyObject_RichCompareBool(list, keys, Py_EQ);
        Py_DECREF(list);
        return equal;
    }
    if (PyDict_GET_SIZE(value) != PyList_GET_SIZE(keys)) {
        return 0;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject *expected = PyList_GET_ITEM(keys, i++);
        if (key == expected) {
            continue;
        }
        Py_INCREF(key);
        int equal = PyObject_RichCompareBool(key, expected, Py_EQ);
        Py_DECREF(key);
        if (equal <= 0) {
            return equal;
        }
    }
    return 1;
}

/* `tuple(map(type, value)) == types` */
static int item_types_match(PyObject *value, PyObject *types) {
    Py_ssize_t n = PyTuple_GET_SIZE(types);
    if (PyTuple_CheckExact(value) || PyList_CheckExact(value)) {
        if (Py_SIZE(value) != n) {
            return 0;
        }
        PyObject **items = PyTuple_CheckExact(value) ? ((PyTupleObject *)value)->ob_item
                                                      : ((PyListObject *)value)->ob_item;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((PyObject *)Py_TYPE(items[i]) != PyTuple_GET_ITEM(types, i)) {
                return 0;
            }
        }
        return 1;
    }
    PyObject *list = PySequence_List(value);
    if (list == NULL) {
        return -1;
    }
    int result = item_types_match(list, types);
    Py_DECREF(list);
    return result;
}

/* 1 when `hasattr(value, name)` is surely False without running type.__getattribute__:
 * `value` is a class whose metaclass is exactly `type`, and neither `type` nor any class
 * of value's MRO defines `name` (what type's attribute lookup reads, from the same
 * per-type method cache). 0 means "not decided here": the caller asks getattr. A class
 * that defines the name through a descriptor whose __get__ raises AttributeError is left
 * to getattr, so the answer never differs from hasattr's. */
static int class_lacks(PyObject *value, PyObject *name) {
    if (Py_TYPE(value) != &PyType_Type || !PyUnicode_CheckExact(name)) {
        return 0;
    }
    return _PyType_Lookup(&PyType_Type, name) == NULL &&
           _PyType_Lookup((PyTypeObject *)value, name) == NULL;
}

/* ---- blocks: recording what a block read, skipping it when unchanged ---- */

typedef struct {
    Block *block;        /* the block being recorded, or NULL */
    Py_ssize_t unstamped; /* the first instruction no stamp covered, or -1 */
    EmberStampLog log;
    unsigned char *seen; /* per register: SEEN_LOADED, SEEN_BY_ADDRESS or 0 */
} Recorder;

enum {
    SEEN_LOADED = 1,     /* loaded in the block, from what its stamps vouch for */
    SEEN_BY_ADDRESS = 2, /* from before the block: stamped by its address and class */
};

static void begin_recording(Recorder *rec, Block *block, Py_ssize_t nregs) {
    rec->seen = PyMem_Calloc((size_t)nregs, 1);
    rec->block = rec->seen == NULL ? NULL : block; /* no memory: just run it */
    rec->unstamped = -1;
    memset(&rec->log, 0, sizeof(rec->log));
}

static void stop_recording(Recorder *rec) {
    ember_stamp_log_clear(&rec->log);
    PyMem_Free(rec->seen);
    rec->seen = NULL;
    rec->block = NULL;
}

/* The block passed: keep its stamps and the objects its later-read registers hold. */
static void finish_recording(Recorder *rec, PyObject **regs) {
    Block *b = rec->block;
    int stable = !rec->log.unstable;
    for (Py_ssize_t i = 0; stable && i < b->nrestore; i++) {
        b->restore_values[i] = regs[b->restore[i]];
        stable = b->restore_values[i] != NULL;
    }
    if (stable) {
        EmberStamp *old = b->stamps;
        Py_ssize_t nold = b->nstamps;
        b->stamps = rec->log.items;
        b->nstamps = rec->log.n;
        rec->log.items = NULL;
        rec->log.n = 0;
        b->state = BLOCK_RECORDED;
        ember_stamps_free(old, nold); /* last: a held object's release may run code */
    }
    else {
        b->state = BLOCK_RUN_ALWAYS;
        b->unstamped = rec->unstamped;
    }
    stop_recording(rec);
}

/* What instruction `in`, which just passed inside a block being recorded, read: `value`
 * is reg[src] as it read it, the loaded object (a load) is in reg[dst]. */
static void note(Recorder *rec, Py_ssize_t pc, const Instr *in, PyObject **regs,
                 PyObject *value) {
    EmberStampLog *log = &rec->log;
    int was_stable = !log->unstable;
    if (in->op < OP_CHECK_TYPE && in->dst == in->src) {
        log->unstable = 1; /* `value` was replaced (and maybe freed) by the load */
        rec->unstamped = was_stable ? pc : rec->unstamped;
        return;
    }
    if (in->needs_src && !rec->seen[in->src]) {
        /* It came from before the block. Its register holding the same address again
         * does not make it the same object: the old one may have been freed and the
         * address reused (a new argument tuple from the freelist). So its class is
         * stamped too, which keeps the stamps after it memory-safe, and what is read
         * through it stays stable only where a later stamp proves it is the same object
         * (a dict's version is never reused). */
        if (ember_stamp_register(log, in->src, value)) {
            rec->seen[in->src] = SEEN_LOADED; /* held alive by the stamp: the same one */
        }
        else {
            ember_stamp_type(log, value, 1);
            rec->seen[in->src] = SEEN_BY_ADDRESS;
        }
    }
    int by_address = in->needs_src && rec->seen[in->src] == SEEN_BY_ADDRESS;
    switch (in->op) {
    case OP_LOAD_ATTR:
    case OP_LOAD_GENERIC_ATTR:
        ember_stamp_attribute(log, value, in->arg, regs[in->dst], in->op == OP_LOAD_GENERIC_ATTR,
                              by_address);
        break;
    case OP_LOAD_ITEM:
        if (!PyTuple_CheckExact(value)) {
            ember_stamp_dict(log, value);
        }
        else if (by_address) {
            log->unstable = 1; /* a tuple's items are known only while it is the same one */
        }
        break;
    case OP_LOAD_CONST:
    case OP_CHECK_IS:
    case OP_CHECK_IS_NOT:
        break;
    case OP_LOAD_TYPE:
    case OP_CHECK_TYPE:
        ember_stamp_type(log, value, by_address);
        break;
    case OP_CHECK_EQ:
    case OP_CHECK_FLOAT:
    case OP_CHECK_TRUE:
    case OP_CHECK_FALSE:
    case OP_CHECK_ITEM_TYPES:
        /* an immutable value's content is known only while it is the same object */
        log->unstable |= by_address || !ember_stamp_immutable(value, 0);
        break;
    case OP_CHECK_LEN:
    case OP_CHECK_NOT_IN:
        if (!ember_stamp_immutable(value, 0)) {
            ember_stamp_dict(log, value);
        }
        else if (by_address) {
            log->unstable = 1;
        }
        break;
    case OP_CHECK_KEYS: /* an OrderedDict's order can change without a write */
        if (PyODict_CheckExact(value) && PyList_GET_SIZE(in->arg) > 1) {
            log->unstable = 1;
            break;
        }
        ember_stamp_dict(log, value);
        break;
    default:
        log->unstable = 1;
    }
    if (in->op < OP_CHECK_TYPE) {
        rec->seen[in->dst] = SEEN_LOADED;
    }
    if (was_stable && log->unstable) {
        rec->unstamped = pc;
    }
}

/* At a BLOCK: 1 when it was skipped (its registers set again), else 0, recording it
 * into `rec` when it should be. */
static int enter_block(GuardProgramObject *p, Block *b, PyObject **regs, Recorder *rec) {
    if (b->state == BLOCK_RECORDED) {
        if (ember_stamps_hold(b->stamps, b->nstamps, regs)) {
            for (Py_ssize_t i = 0; i < b->nrestore; i++) {
                SET_REG(b->restore[i], Py_NewRef(b->restore_values[i]));
            }
            return 1;
        }
        if (++b->misses >= BLOCK_MAX_MISSES) {
            b->state = BLOCK_RUN_ALWAYS; /* what it reads changes call after call */
        }
    }
    if (b->state != BLOCK_RUN_ALWAYS && rec->block == NULL) {
        begin_recording(rec, b, p->nregs);
    }
    return 0;
}

/* Runs p's instructions from `start` over `regs` (p->nregs of them, 0-2 set).
 * 1: every check passed; 0: one failed (or an Exception was raised); -1: a
 * BaseException that is not an Exception, left set. `*stop` is the instruction
 * that decided a 0 or -1. */
static int run_code(GuardProgramObject *p, PyObject **regs, Py_ssize_t start, Py_ssize_t *stop) {
    int result = 1;
    Py_ssize_t pc;
    Recorder rec = {NULL};
    /* A run inside another run of this program (a property's code calling the compiled
     * function) runs every block in full and records none: the outer run may be reading
     * or recording the blocks' stamps. */
    int use_blocks = p->running++ == 0;
    for (pc = start; pc < p->ncode && result == 1; pc++) {
        if (rec.block != NULL && pc == rec.block->end) {
            finish_recording(&rec, regs);
        }
        const Instr *in = &p->code[pc];
        if (in->op == OP_BLOCK) {
            if (!use_blocks) {
                continue;
            }
            Block *b = &p->blocks[in->block];
            if (enter_block(p, b, regs, &rec)) {
                pc = b->end - 1;
            }
            continue;
        }
        PyObject *value = in->needs_src ? regs[in->src] : NULL;
        PyObject *loaded = NULL;
        int ok = 1; /* for checks: 1 passed, 0 failed, -1 raised */
        if (in->needs_src && value == NULL) {
            /* a bug in the program's builder: say so, never answer */
            PyErr_Format(PyExc_SystemError, "GuardProgram: register %d read before set", in->src);
            result = -1;
            break;
        }
        switch (in->op) {
        case OP_LOAD_ATTR:
            loaded = PyObject_GetAttr(value, in->arg);
            break;
        case OP_LOAD_GENERIC_ATTR:
            loaded = PyObject_GenericGetAttr(value, in->arg);
            break;
        case OP_LOAD_ITEM:
            loaded = load_item(value, in);
            break;
        case OP_LOAD_TYPE:
            loaded = Py_NewRef((PyObject *)Py_TYPE(value));
            break;
        case OP_LOAD_CONST:
            loaded = Py_NewRef(in->arg);
            break;
        case OP_CALL:
            loaded = PyObject_Call(value, in->arg, NULL);
            break;
        case OP_CALL_METHOD:
            loaded = PyObject_CallMethodNoArgs(value, in->arg);
            break;
        case OP_LOAD_LIST:
            loaded = PySequence_List(value);
            break;
        case OP_LOAD_VALUES: {
            PyObject *view = PyObject_CallMethodNoArgs(value, str_values);
            loaded = view == NULL ? NULL : PySequence_List(view);
            Py_XDECREF(view);
            break;
        }
        case OP_CHECK_TYPE:
            ok = (PyObject *)Py_TYPE(value) == in->arg;
            break;
        case OP_CHECK_IS:
            ok = value == in->arg;
            break;
        case OP_CHECK_IS_NOT:
            ok = value != in->arg;
            break;
        case OP_CHECK_SAME:
            ok = value == regs[in->n];
            break;
        case OP_CHECK_DISTINCT:
            ok = distinct(regs, in);
            break;
        case OP_CHECK_EQ:
            ok = PyObject_RichCompareBool(value, in->arg, Py_EQ);
            break;
        case OP_CHECK_TRUE:
            ok = value == Py_True ? 1 : value == Py_False ? 0 : PyObject_IsTrue(value);
            break;
        case OP_CHECK_FALSE:
            ok = value == Py_False ? 1 : value == Py_True ? 0 : PyObject_Not(value);
            break;
        case OP_CHECK_LEN: {
            Py_ssize_t size = PyObject_Length(value);
            ok = size < 0 ? -1 : size == in->n;
            break;
        }
        case OP_CHECK_ITEM_TYPES:
            ok = item_types_match(value, in->arg);
            break;
        case OP_CHECK_KEYS:
            ok = keys_match(value, in->arg);
            break;
        case OP_CHECK_DIMS:
            ok = dims_match(value, in);
            break;
        case OP_CHECK_NO_ATTR: {
            if (class_lacks(value, in->arg)) {
                break; /* ok stays 1 */
            }
            PyObject *found = NULL;
            ok = _PyObject_LookupAttr(value, in->arg, &found); /* 1 found, 0 missing */
            Py_XDECREF(found);
            ok = ok < 0 ? -1 : !ok;
            break;
        }
        case OP_CHECK_NOT_IN: {
            int contained = PySequence_Contains(value, in->arg);
            ok = contained < 0 ? -1 : !contained;
            break;
        }
        case OP_CHECK_CALL: {
            Py_ssize_t nextra = PyTuple_GET_SIZE(PyTuple_GET_ITEM(in->arg, 1));
            PyObject *stack[8];
            if (nextra > 7) {
                PyErr_SetString(PyExc_SystemError, "CHECK_CALL takes at most 7 extra arguments");
                ok = -1;
                break;
            }
            stack[0] = value;
            for (Py_ssize_t i = 0; i < nextra; i++) {
                stack[i + 1] = PyTuple_GET_ITEM(PyTuple_GET_ITEM(in->arg, 1), i);
            }
            PyObject *verdict = PyObject_Vectorcall(in->extra, stack, (size_t)nextra + 1, NULL);
            ok = verdict == NULL ? -1 : PyObject_IsTrue(verdict);
            Py_XDECREF(verdict);
            if (ok < 0 && in->n) {
                result = -1; /* a raising check: its exception propagates */
                continue;
            }
            break;
        }
        case OP_CHECK_OWNER: {
            PyObject *setting = ember_tls.setting == NULL ? Py_None : ember_tls.setting;
            ok = setting == in->arg || setting == Py_False;
            break;
        }
        case OP_CHECK_NATIVE:
            ok = in->native(value, in->extra);
            break;
        case OP_CHECK_FLOAT: {
            double want = PyFloat_AS_DOUBLE(in->arg);
            if (!PyFloat_CheckExact(value)) {
                ok = 0;
                break;
            }
            double got = PyFloat_AS_DOUBLE(value);
            ok = isnan(want) ? isnan(got) : got == want && signbit(got) == signbit(want);
            break;
        }
        default: /* decode() lets no other opcode in */
            PyErr_SetString(PyExc_SystemError, "GuardProgram: bad opcode");
            result = -1;
            continue;
        }
        if (in->op < OP_CHECK_TYPE) {
            if (loaded == NULL) {
                ok = PyErr_Occurred() ? -1 : 0; /* 0: load_item's missing key */
            }
            else {
                SET_REG(in->dst, loaded);
            }
        }
        if (ok < 0) {
            /* like `except Exception: return False` around the Python guard */
            result = PyErr_ExceptionMatches(PyExc_Exception) ? (PyErr_Clear(), 0) : -1;
        }
        else if (ok == 0) {
            result = 0;
        }
        else if (rec.block != NULL) {
            note(&rec, pc, in, regs, value);
        }
    }
    if (rec.block != NULL && result == 1 && pc == rec.block->end) {
        finish_recording(&rec, regs);
    }
    if (rec.block != NULL) {
        stop_recording(&rec); /* it failed, or the run began inside it */
    }
    p->running--;
    *stop = pc - 1; /* the loop stepped past the deciding instruction */
    return result;
}

static PyObject **new_registers(Py_ssize_t n, PyObject **small, Py_ssize_t nsmall) {
    if (n <= nsmall) {
        memset(small, 0, (size_t)nsmall * sizeof(PyObject *));
        return small;
    }
    PyObject **regs = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (regs == NULL) {
        PyErr_NoMemory();
    }
    return regs;
}

static void set_namespaces(PyObject **regs, GuardProgramObject *p, PyObject *f_locals) {
    Py_XSETREF(regs[REG_LOCALS], Py_NewRef(f_locals));
    Py_XSETREF(regs[REG_GLOBALS], Py_NewRef(p->globals));
    Py_XSETREF(regs[REG_BUILTINS], Py_NewRef(p->builtins));
}

static void clear_registers(PyObject **regs, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(regs[i]);
    }
}

int ember_guard_program_run(PyObject *program, PyObject *f_locals) {
    GuardProgramObject *p = (GuardProgramObject *)program;
    PyObject *small[64];
    PyObject **regs = new_registers(p->nregs, small, 64);
    if (regs == NULL) {
        return -1;
    }
    set_namespaces(regs, p, f_locals);
    Py_ssize_t stop;
    int result = run_code(p, regs, 0, &stop);
    clear_registers(regs, p->nregs);
    if (regs != small) {
        PyMem_Free(regs);
    }
    return result;
}

/* ---- sharing checks between the entries of one code object --------------- */

/* Whether two instruction constants make their instructions behave alike: the same
 * object, or plain data of the same types, equal item by item, floats bit for bit
 * (0.0 and -0.0 make CHECK_FLOAT differ though `==` says they are equal). */
static int same_constant(PyObject *a, PyObject *b) {
    if (a == b) {
        return 1;
    }
    if (Py_TYPE(a) != Py_TYPE(b)) {
        return 0;
    }
    if (PyFloat_CheckExact(a)) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return memcmp(&x, &y, sizeof(double)) == 0;
    }
    if (PyLong_CheckExact(a) || PyUnicode_CheckExact(a) || PyBytes_CheckExact(a)) {
        int equal = PyObject_RichCompareBool(a, b, Py_EQ);
        if (equal < 0) {
            PyErr_Clear();
        }
        return equal == 1;
    }
    if (PyTuple_CheckExact(a) || PyList_CheckExact(a)) {
        Py_ssize_t n = Py_SIZE(a);
        if (Py_SIZE(b) != n) {
            return 0;
        }
        PyObject **x = PyTuple_CheckExact(a) ? ((PyTupleObject *)a)->ob_item
                                             : ((PyListObject *)a)->ob_item;
        PyObject **y = PyTuple_CheckExact(b) ? ((PyTupleObject *)b)->ob_item
                                             : ((PyListObject *)b)->ob_item;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!same_constant(x[i], y[i])) {
                return 0;
            }
        }
        return 1;
    }
    return 0; /* other objects: only the very same one */
}

static Py_ssize_t common_prefix(GuardProgramObject *a, GuardProgramObject *b) {
    if (a->globals != b->globals || a->builtins != b->builtins) {
        return 0; /* register 1 or 2 would differ */
    }
    Py_ssize_t n = a->ncode < b->ncode ? a->ncode : b->ncode, i = 0;
    for (; i < n; i++) {
        const Instr *x = &a->code[i], *y = &b->code[i];
        if (x->op != y->op || x->dst != y->dst || x->src != y->src ||
            !same_constant(x->arg, y->arg)) {
            break;
        }
    }
    return i;
}

void ember_guard_run_init(EmberGuardRun *run) {
    memset(run, 0, sizeof(*run));
}

/* Where `p` may resume after `last` ran `[0, stop]` over the same frame, sharing `shared`
 * instructions with it. Registers are reused as scratch, so `last`'s instructions past the
 * shared prefix may have overwritten a register the prefix loaded (`shape`, then `dtype`,
 * then `requires_grad` into one scratch register): resume no later than the first prefix
 * instruction that loaded such a register, so that `p` reloads it. Instructions before that
 * one loaded registers nothing after them touched, so theirs still hold the prefix's values. */
static Py_ssize_t resume_point(const GuardProgramObject *last, Py_ssize_t shared, Py_ssize_t stop) {
    Py_ssize_t start = shared;
    Py_ssize_t end = stop < last->ncode ? stop : last->ncode - 1;
    for (Py_ssize_t i = shared; i <= end && start > 0; i++) {
        const Instr *tail = &last->code[i];
        if (tail->op >= OP_CHECK_TYPE) {
            continue; /* a check: it writes no register */
        }
        for (Py_ssize_t k = 0; k < start; k++) {
            if (last->code[k].op < OP_CHECK_TYPE && last->code[k].dst == tail->dst) {
                start = k;
                break;
            }
        }
    }
    return start;
}

int ember_guard_run_next(EmberGuardRun *run, PyObject *program, PyObject *f_locals) {
    GuardProgramObject *p = (GuardProgramObject *)program;
    Py_ssize_t start = 0;
    GuardProgramObject *last = (GuardProgramObject *)run->last;
    if (last != NULL && run->result == 0) {
        if (p->shared_with != last->serial) { /* both are immutable: compute once */
            p->shared_with = last->serial;
            p->shared_length = common_prefix(last, p);
        }
        /* The instructions before run->stop passed and the one at it failed, over the
         * same frame: where `p` repeats them, their outcome is known. */
        if (p->shared_length > run->stop) {
            return 0;
        }
        start = resume_point(last, p->shared_length, run->stop);
    }
    if (p->nregs > run->size) {
        PyObject **grown = PyMem_Calloc((size_t)p->nregs, sizeof(PyObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (run->regs != NULL) {
            memcpy(grown, run->regs, (size_t)run->size * sizeof(PyObject *));
            PyMem_Free(run->regs);
        }
        run->regs = grown;
        run->size = p->nregs;
    }
    if (start == 0) {
        clear_registers(run->regs, run->size);
        set_namespaces(run->regs, p, f_locals);
    }
    Py_XSETREF(run->last, Py_NewRef(program));
    run->result = run_code(p, run->regs, start, &run->stop);
    return run->result;
}

void ember_guard_run_clear(EmberGuardRun *run) {
    if (run->regs != NULL) {
        clear_registers(run->regs, run->size);
        PyMem_Free(run->regs);
    }
    Py_CLEAR(run->last);
    ember_guard_run_init(run);
}

/* ---- building ----------------------------------------------------------- */

static int opcode_of(PyObject *name) {
    for (int op = 0; op < OP_COUNT; op++) {
        if (PyUnicode_CompareWithASCIIString(name, op_names[op]) == 0) {
            return op;
        }
    }
    return -1;
}

static int bad(Py_ssize_t pc, const char *what) {
    PyErr_Format(PyExc_ValueError, "GuardProgram instruction %zd: %s", pc, what);
    return -1;
}

static Py_ssize_t *int_array(PyObject *seq, Py_ssize_t *count, int none_is_any) {
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    Py_ssize_t *ints = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_ssize_t));
    if (ints == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (item == Py_None && none_is_any) {
            ints[i] = ANY_DIM;
            continue;
        }
        ints[i] = PyLong_Check(item) ? PyLong_AsSsize_t(item) : -1;
        if (!PyLong_Check(item) || (ints[i] == -1 && PyErr_Occurred()) || ints[i] == ANY_DIM) {
            PyErr_Clear();
            PyMem_Free(ints);
            PyErr_SetString(PyExc_ValueError, "GuardProgram: expected a tuple of ints");
            return NULL;
        }
    }
    *count = n;
    return ints;
}

/* Fills `in` from `(opname, dst, src, arg)`; checks what the interpreter relies on. */
static int decode(Py_ssize_t pc, PyObject *item, Instr *in, Py_ssize_t nregs) {
    Py_ssize_t size = PyTuple_Check(item) ? PyTuple_GET_SIZE(item) : 0;
    if ((size != 3 && size != 4) || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
        return bad(pc, "expected (opname, dst, src[, arg])");
    }
    in->op = opcode_of(PyTuple_GET_ITEM(item, 0));
    if (in->op < 0) {
        return bad(pc, "unknown opname");
    }
    long dst = PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
    long src = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
    if (PyErr_Occurred()) {
        return -1;
    }
    in->dst = (int)dst;
    in->src = (int)src;
    in->arg = size == 4 ? PyTuple_GET_ITEM(item, 3) : Py_None;
    int is_load = in->op < OP_CHECK_TYPE;
    int needs_src = in->op != OP_LOAD_CONST && in->op != OP_CHECK_DISTINCT &&
                    in->op != OP_CHECK_OWNER && in->op != OP_BLOCK;
    if (is_load && (dst < REG_FIRST_FREE || dst >= nregs)) {
        return bad(pc, "dst must be a free register (3 and up, below nregs)");
    }
    in->needs_src = needs_src;
    if (needs_src && (src < 0 || src >= nregs)) {
        return bad(pc, "src must be a register");
    }
    PyObject *arg = in->arg;
    switch (in->op) {
    case OP_LOAD_ATTR:
    case OP_LOAD_GENERIC_ATTR:
    case OP_CALL_METHOD:
    case OP_CHECK_NO_ATTR:
        if (!PyUnicode_Check(arg)) {
            return bad(pc, "arg must be a str");
        }
        break;
    case OP_LOAD_ITEM:
        if (PyLong_CheckExact(arg)) {
            in->n = PyLong_AsSsize_t(arg);
            in->has_int_key = !(in->n == -1 && PyErr_Occurred());
            PyErr_Clear();
        }
        break;
    case OP_CALL:
        if (!PyTuple_Check(arg)) {
            return bad(pc, "CALL takes a tuple of arguments");
        }
        break;
    case OP_CHECK_FLOAT:
        if (!PyFloat_CheckExact(arg)) {
            return bad(pc, "CHECK_FLOAT takes a float");
        }
        break;
    case OP_BLOCK:
        in->n = PyLong_Check(arg) ? PyLong_AsSsize_t(arg) : -1;
        if (in->n < 1) {
            PyErr_Clear();
            return bad(pc, "BLOCK takes the number of instructions in it (1 or more)");
        }
        break;
    case OP_CHECK_TYPE:
        if (!PyType_Check(arg)) {
            return bad(pc, "CHECK_TYPE takes a type");
        }
        break;
    case OP_CHECK_SAME:
        in->n = PyLong_Check(arg) ? PyLong_AsSsize_t(arg) : -1;
        if (in->n < 0 || in->n >= nregs) {
            PyErr_Clear();
            return bad(pc, "CHECK_SAME takes a register");
        }
        break;
    case OP_CHECK_DISTINCT:
        if (!PyTuple_Check(arg) || (in->ints = int_array(arg, &in->nints, 0)) == NULL) {
            return bad(pc, "CHECK_DISTINCT takes a tuple of registers");
        }
        for (Py_ssize_t i = 0; i < in->nints; i++) {
            if (in->ints[i] < 0 || in->ints[i] >= nregs) {
                return bad(pc, "CHECK_DISTINCT takes a tuple of registers");
            }
        }
        break;
    case OP_CHECK_LEN:
        in->n = PyLong_Check(arg) ? PyLong_AsSsize_t(arg) : -1;
        if (in->n < 0) {
            PyErr_Clear();
            return bad(pc, "CHECK_LEN takes a length");
        }
        break;
    case OP_CHECK_ITEM_TYPES:
        if (!PyTuple_Check(arg)) {
            return bad(pc, "CHECK_ITEM_TYPES takes a tuple of types");
        }
        break;
    case OP_CHECK_KEYS:
        if (!PyList_CheckExact(arg)) {
            return bad(pc, "CHECK_KEYS takes a list of keys");
        }
        break;
    case OP_CHECK_DIMS: {
        PyObject *dims = PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 2
                             ? PyTuple_GET_ITEM(arg, 0) : NULL;
        PyObject *minimum = dims == NULL ? NULL : PyTuple_GET_ITEM(arg, 1);
        if (dims == NULL || !PyTuple_CheckExact(dims) ||
            (in->ints = int_array(dims, &in->nints, 1)) == NULL) {
            PyErr_Clear();
            return bad(pc, "CHECK_DIMS takes ((int | None, ...), int | None)");
        }
        in->n = minimum == Py_None ? -1 : PyLong_AsSsize_t(minimum);
        if (in->n < 0 && minimum != Py_None) {
            PyErr_Clear();
            return bad(pc, "CHECK_DIMS: the minimum must be an int >= 0 or None");
        }
        int any = 0;
        for (Py_ssize_t i = 0; i < in->nints; i++) {
            any |= in->ints[i] == ANY_DIM;
        }
        in->extra = any ? NULL : dims; /* all static: one tuple comparison */
        break;
    }
    case OP_CHECK_CALL:
        if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) < 2 || PyTuple_GET_SIZE(arg) > 3 ||
            !PyCallable_Check(PyTuple_GET_ITEM(arg, 0)) ||
            !PyTuple_Check(PyTuple_GET_ITEM(arg, 1)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(arg, 1)) > 7) {
            return bad(pc, "CHECK_CALL takes (callable, (up to 7 extra arguments)[, raises])");
        }
        in->extra = PyTuple_GET_ITEM(arg, 0);
        in->n = PyTuple_GET_SIZE(arg) == 3 && PyTuple_GET_ITEM(arg, 2) == Py_True;
        break;
    case OP_CHECK_NATIVE: {
        PyObject *capsule = PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 2
                                ? PyTuple_GET_ITEM(arg, 0) : NULL;
        if (capsule == NULL || !PyCapsule_IsValid(capsule, EMBER_NATIVE_CHECK_CAPSULE)) {
            return bad(pc,
                       "CHECK_NATIVE takes (capsule '" EMBER_NATIVE_CHECK_CAPSULE "', data)");
        }
        in->native =
            (ember_native_check)PyCapsule_GetPointer(capsule, EMBER_NATIVE_CHECK_CAPSULE);
        in->extra = PyTuple_GET_ITEM(arg, 1);
        break;
    }
    default:
        break;
    }
    return 0;
}

static void free_code(Instr *code, Py_ssize_t n) {
    if (code == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyMem_Free(code[i].ints);
    }
    PyMem_Free(code);
}

static PyObject *guard_program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                          PyObject *kwnames);

static void free_blocks(Block *blocks, Py_ssize_t n) {
    for (Py_ssize_t i = 0; blocks != NULL && i < n; i++) {
        ember_stamps_free(blocks[i].stamps, blocks[i].nstamps);
        PyMem_Free(blocks[i].restore);
        PyMem_Free(blocks[i].restore_values);
    }
    PyMem_Free(blocks);
}

/* Registers an instruction reads. */
static void mark_reads(const Instr *in, unsigned char *read) {
    if (in->needs_src) {
        read[in->src] = 1;
    }
    if (in->op == OP_CHECK_SAME) {
        read[in->n] = 1;
    }
    for (Py_ssize_t i = 0; in->op == OP_CHECK_DISTINCT && i < in->nints; i++) {
        read[in->ints[i]] = 1;
    }
}

/* The blocks of `code` (its BLOCK instructions): where each ends (no block inside
 * another) and which of its loads' registers the instructions after it read. */
static Block *make_blocks(Instr *code, Py_ssize_t n, Py_ssize_t nregs, Py_ssize_t *nblocks) {
    *nblocks = 0;
    for (Py_ssize_t pc = 0; pc < n; pc++) {
        *nblocks += code[pc].op == OP_BLOCK;
    }
    if (*nblocks == 0) {
        return NULL;
    }
    Block *blocks = PyMem_Calloc((size_t)*nblocks, sizeof(Block));
    unsigned char *read = PyMem_Calloc((size_t)nregs, 1);
    if (blocks == NULL || read == NULL) {
        PyMem_Free(blocks);
        PyMem_Free(read);
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t index = *nblocks;
    /* backwards, so that `read` holds what the instructions after each block read */
    for (Py_ssize_t pc = n - 1; pc >= 0; pc--) {
        if (code[pc].op != OP_BLOCK) {
            mark_reads(&code[pc], read);
            continue;
        }
        Block *b = &blocks[--index];
        code[pc].block = index;
        b->start = pc + 1;
        b->end = pc + 1 + code[pc].n;
        b->unstamped = -1;
        Py_ssize_t count = 0;
        for (Py_ssize_t i = b->start; i < b->end && i < n; i++) {
            if (code[i].op == OP_BLOCK) {
                b->end = -1; /* a block inside a block */
                break;
            }
            count += code[i].op < OP_CHECK_TYPE && read[code[i].dst];
        }
        if (b->end < 0 || b->end > n) {
            PyMem_Free(read);
            free_blocks(blocks, *nblocks);
            bad(pc, "BLOCK must hold instructions of the program and no other BLOCK");
            return NULL;
        }
        b->restore = PyMem_Calloc((size_t)(count ? count : 1), sizeof(int));
        b->restore_values = PyMem_Calloc((size_t)(count ? count : 1), sizeof(PyObject *));
        if (b->restore == NULL || b->restore_values == NULL) {
            PyMem_Free(read);
            free_blocks(blocks, *nblocks);
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = b->start; i < b->end; i++) {
            if (code[i].op < OP_CHECK_TYPE && read[code[i].dst]) {
                b->restore[b->nrestore++] = code[i].dst;
                read[code[i].dst] = 0; /* once, however often it is loaded */
            }
        }
        for (Py_ssize_t i = b->start; i < b->end; i++) {
            mark_reads(&code[i], read);
        }
    }
    PyMem_Free(read);
    return blocks;
}

static PyObject *guard_program_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"instructions", "nregs", "f_globals", "f_builtins", NULL};
    PyObject *instructions, *globals, *builtins;
    Py_ssize_t nregs;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!nO!O!:GuardProgram", kwlist,
                                     &PyTuple_Type, &instructions, &nregs, &PyDict_Type,
                                     &globals, &PyDict_Type, &builtins)) {
        return NULL;
    }
    if (nregs < REG_FIRST_FREE || nregs > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "GuardProgram: nregs must be at least 3");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(instructions);
    Instr *code = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Instr));
    if (code == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t pc = 0; pc < n; pc++) {
        if (decode(pc, PyTuple_GET_ITEM(instructions, pc), &code[pc], nregs) < 0) {
            free_code(code, n);
            return NULL;
        }
    }
    Py_ssize_t nblocks;
    Block *blocks = make_blocks(code, n, nregs, &nblocks);
    if (blocks == NULL && PyErr_Occurred()) {
        free_code(code, n);
        return NULL;
    }
    GuardProgramObject *self = (GuardProgramObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        free_code(code, n);
        free_blocks(blocks, nblocks);
        return NULL;
    }
    self->blocks = blocks;
    self->nblocks = nblocks;
    self->vectorcall = guard_program_vectorcall;
    self->serial = next_serial++;
    self->code = code;
    self->ncode = n;
    self->nregs = nregs;
    self->instructions = Py_NewRef(instructions);
    self->globals = Py_NewRef(globals);
    self->builtins = Py_NewRef(builtins);
    return (PyObject *)self;
}

static PyObject *guard_program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                          PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "GuardProgram takes one argument, f_locals");
        return NULL;
    }
    int passed = ember_guard_program_run(self, args[0]);
    return passed < 0 ? NULL : Py_NewRef(passed ? Py_True : Py_False);
}

static int guard_program_traverse(GuardProgramObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->instructions);
    Py_VISIT(self->globals);
    Py_VISIT(self->builtins);
    for (Py_ssize_t i = 0; i < self->nblocks; i++) {
        int err = ember_stamps_traverse(self->blocks[i].stamps, self->blocks[i].nstamps, visit, arg);
        if (err) {
            return err;
        }
    }
    return 0;
}

static int guard_program_clear(GuardProgramObject *self) {
    /* The decoded code borrows from `instructions`: drop it first. */
    free_code(self->code, self->ncode);
    self->code = NULL;
    self->ncode = 0;
    free_blocks(self->blocks, self->nblocks);
    self->blocks = NULL;
    self->nblocks = 0;
    Py_CLEAR(self->instructions);
    Py_CLEAR(self->globals);
    Py_CLEAR(self->builtins);
    return 0;
}

static void guard_program_dealloc(GuardProgramObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    guard_program_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *guard_program_repr(GuardProgramObject *self) {
    return PyUnicode_FromFormat("<GuardProgram of %zd instructions, %zd registers>",
                                self->ncode, self->nregs);
}

static PyObject *get_instructions(GuardProgramObject *self, void *closure) {
    return Py_NewRef(self->instructions == NULL ? Py_None : self->instructions);
}

static PyObject *get_nregs(GuardProgramObject *self, void *closure) {
    return PyLong_FromSsize_t(self->nregs);
}

static PyObject *get_opnames(PyObject *cls, PyObject *unused) {
    PyObject *names = PyTuple_New(OP_COUNT);
    for (int op = 0; names != NULL && op < OP_COUNT; op++) {
        PyObject *name = PyUnicode_FromString(op_names[op]);
        if (name == NULL) {
            Py_CLEAR(names);
            break;
        }
        PyTuple_SET_ITEM(names, op, name);
    }
    return names;
}

static PyObject *get_blocks(GuardProgramObject *self, void *closure) {
    static const char *const names[] = {"unrecorded", "recorded", "run always"};
    PyObject *states = PyTuple_New(self->nblocks);
    for (Py_ssize_t i = 0; states != NULL && i < self->nblocks; i++) {
        const Block *b = &self->blocks[i];
        PyObject *item = Py_BuildValue("(snnnn)", names[b->state], b->start, b->end,
                                       b->state == BLOCK_RECORDED ? b->nstamps : 0,
                                       b->state == BLOCK_RUN_ALWAYS ? b->unstamped : -1);
        if (item == NULL) {
            Py_CLEAR(states);
            break;
        }
        PyTuple_SET_ITEM(states, i, item);
    }
    return states;
}

static PyGetSetDef guard_program_getset[] = {
    {"blocks", (getter)get_blocks, NULL,
     "Each BLOCK's (state, start, end, stamps, unstamped): the state 'unrecorded', "
     "'recorded' (skipped while its stamps hold) or 'run always' (the instruction at "
     "`unstamped` read what no stamp covers, or its stamps kept failing).", NULL},
    {"instructions", (getter)get_instructions, NULL,
     "The (opname, dst, src, arg) tuples the program runs.", NULL},
    {"nregs", (getter)get_nregs, NULL, "Number of registers (0-2: L, G, B).", NULL},
    {NULL},
};

static PyMethodDef guard_program_methods[] = {
    {"opnames", get_opnames, METH_NOARGS | METH_CLASS, "Every opname the interpreter knows."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject GuardProgram_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember_frame_hook.GuardProgram",
    .tp_doc = "GuardProgram(instructions, nregs, f_globals, f_builtins)\n\n"
              "A guard run in C: call it with a frame's f_locals for True/False. Registers "
              "0, 1, 2 hold f_locals, f_globals and f_builtins; see guard_program.c.",
    .tp_basicsize = sizeof(GuardProgramObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = guard_program_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GuardProgramObject, vectorcall),
    .tp_traverse = (traverseproc)guard_program_traverse,
    .tp_clear = (inquiry)guard_program_clear,
    .tp_dealloc = (destructor)guard_program_dealloc,
    .tp_repr = (reprfunc)guard_program_repr,
    .tp_getset = guard_program_getset,
    .tp_methods = guard_program_methods,
    .tp_weaklistoffset = offsetof(GuardProgramObject, weakrefs),
};

int ember_guard_program_init(void) {
    str_values = PyUnicode_InternFromString("values");
    return str_values == NULL ? -1 : PyType_Ready(&GuardProgram_Type);
}
