/* Shared declarations of the ember_frame_hook._C extension.
 *
 * The extension has one job: PEP 523 frame evaluation with a per-code-object
 * cache of guarded substitute code. Each file implements one concept:
 *   types.c         GuardedCode, Frame (what the callback sees), CacheView
 *   code_cache.c    the per-code cache stored in co_extra
 *   guard_program.c GuardProgram: a guard as instructions run in C
 *   stamps.c        what a passing block of guard checks read, re-checked cheaply
 *   thread_state.c  the per-thread setting and installing the eval function
 *   eval_frame.c    the eval function itself
 *   module.c        the Python-facing functions
 */
#ifndef EMBER_H
#define EMBER_H

#include "compat.h"

/* ---- types.c ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyCodeObject *code; /* substitute code, run instead of the frame's own */
    PyObject *guard;    /* guard(f_locals) -> truthy when `code` may run */
    Py_ssize_t hits;    /* times the guard passed */
    PyObject *weakrefs;
    PyObject *dict;     /* lets the tracer attach metadata (e.g. guard text) */
} GuardedCodeObject;

extern PyTypeObject GuardedCode_Type;
extern PyTypeObject Frame_Type;
extern PyTypeObject CacheView_Type;

#define GuardedCode_Check(op) PyObject_TypeCheck(op, &GuardedCode_Type)

/* A snapshot of a frame about to start, handed to the callback. */
PyObject *ember_frame_view_new(EmberFrame *frame, PyObject *f_locals);
/* The state of a code object's cache, handed to the callback. */
PyObject *ember_cache_view_new(PyObject *code, PyObject *entries, int limit);

/* ---- guard_program.c ------------------------------------------------- */

extern PyTypeObject GuardProgram_Type;
int ember_guard_program_init(void); /* readies the type */
/* 1 passed, 0 failed (an Exception counts as failing), -1 other error set. */
int ember_guard_program_run(PyObject *program, PyObject *f_locals);

/* Running the programs of one code object's entries in turn over one frame: a
 * program that repeats the first instructions of the one run before it starts
 * where they differ, with its registers (or fails at once, when it repeats the
 * instruction that failed). */
typedef struct {
    PyObject **regs;
    Py_ssize_t size;
    PyObject *last;  /* the program run last (a strong reference) */
    int result;      /* its answer */
    Py_ssize_t stop; /* the instruction that decided it */
} EmberGuardRun;
void ember_guard_run_init(EmberGuardRun *run);
int ember_guard_run_next(EmberGuardRun *run, PyObject *program, PyObject *f_locals);
void ember_guard_run_clear(EmberGuardRun *run);

/* ---- stamps.c ---------------------------------------------------------- */

typedef struct {
    int kind;
    int reg;          /* STAMP_REGISTER: the register */
    PyObject *obj;    /* borrowed; alive whenever the stamps before it hold */
    PyObject *expect; /* borrowed, compared by identity; STAMP_REGISTER: obj, owned, when
                         the stamp holds it alive (ember_stamp_register) */
    uint64_t version;
} EmberStamp;

typedef struct {
    EmberStamp *items;
    Py_ssize_t n, cap;
    int unstable; /* something read cannot be stamped: the block runs in full */
    uintptr_t *seen; /* (kind, object) pairs stamped: a hash set */
    Py_ssize_t nseen, seen_cap;
} EmberStampLog;

int ember_stamps_init(void);
int ember_stamp_immutable(PyObject *value, int depth);
int ember_stamp_register(EmberStampLog *log, int reg, PyObject *obj);
void ember_stamp_dict(EmberStampLog *log, PyObject *dict);
void ember_stamp_type(EmberStampLog *log, PyObject *obj, int always);
void ember_stamp_attribute(EmberStampLog *log, PyObject *obj, PyObject *name,
                           PyObject *loaded, int generic, int by_address);
int ember_stamps_hold(const EmberStamp *stamps, Py_ssize_t n, PyObject **regs);
void ember_stamp_log_clear(EmberStampLog *log);
void ember_stamps_free(EmberStamp *stamps, Py_ssize_t n);
int ember_stamps_traverse(const EmberStamp *stamps, Py_ssize_t n, visitproc visit, void *arg);

/* ---- code_cache.c ----------------------------------------------------- */

typedef struct CodeCache {
    PyObject *entries;   /* list of GuardedCode, most recently used first */
    int skip;            /* never call the callback or substitute for this code */
    PyObject *code;      /* borrowed: the cache dies with its code object */
    struct CodeCache *prev, *next; /* registry of every live cache, for reset() */
} CodeCache;

int ember_code_cache_init(void);
/* The cache of `code`, or NULL when it has none (never raises). */
CodeCache *ember_code_cache_get(PyObject *code);
/* The cache of `code`, created on first use; NULL with an exception set. */
CodeCache *ember_code_cache_ensure(PyObject *code);
/* Runs the guards MRU-first; returns a borrowed GuardedCode whose guard
 * passed (moved to the front), Py_None when none did, NULL on error. */
PyObject *ember_code_cache_lookup(CodeCache *cache, PyObject *f_locals);
/* Puts `entry` first, evicting the least recently used one past the limit. */
int ember_code_cache_insert(CodeCache *cache, PyObject *entry);
void ember_code_cache_reset_all(void);
int ember_cache_limit(void);
void ember_set_cache_limit(int limit);

/* ---- thread_state.c --------------------------------------------------- */

/* Fast per-thread view of the setting; the owning reference lives in the
 * thread-state dict so that it is released when the thread ends. */
typedef struct {
    PyObject *setting; /* borrowed: NULL/None off, False run-only, callable */
    int busy;          /* inside the callback or a guard: hook is off */
    PyObject *bypass;  /* 3.11 relocation: the next frame of this code runs as is */
} EmberThreadState;

extern _Thread_local EmberThreadState ember_tls;

/* Returns the previous setting (new reference) or NULL on error. */
PyObject *ember_set_thread_setting(PyObject *setting);
PyObject *ember_get_thread_setting(void);

/* ---- relocate.c -------------------------------------------------------- */

#if PY_VERSION_HEX >= 0x030C0000
/* Moves the unstarted frame into a new frame-stack chunk with `code`; returns
 * the moved frame to evaluate, or NULL (no exception) when out of memory. */
PyObject *ember_run_relocated(PyThreadState *tstate, EmberFrame *frame, PyCodeObject *code);
#else
/* Runs `code` as a fresh function with the frame's bound arguments. */
PyObject *ember_call_relocated(EmberFrame *frame, PyCodeObject *code);
#endif

/* ---- eval_frame.c ----------------------------------------------------- */

PyObject *ember_eval_frame(PyThreadState *tstate, EmberFrame *frame, int throw_flag);
/* Checks that `code` can run in place of a frame of `original`; raises
 * TypeError naming the mismatch and returns -1 when it cannot. */
int ember_check_substitute(PyCodeObject *original, PyCodeObject *code);

typedef struct {
    unsigned long long hits;       /* a guard passed, substitute ran */
    unsigned long long misses;     /* no guard passed (callback consulted or not) */
    unsigned long long callbacks;  /* callback invocations */
    unsigned long long relocated;  /* substitute's frame did not fit in place: moved */
    unsigned long long passthrough;/* frames left alone (skipped, traced, generators...) */
} EmberStats;

extern EmberStats ember_stats;

#endif /* EMBER_H */
