/* The per-code-object cache, stored in the code object's co_extra slot.
 *
 * Each cache holds a list of GuardedCode entries, most recently used first,
 * bounded by a limit shared by all caches. The cache is freed by CPython when
 * its code object dies; a registry of live caches lets reset() drop them all.
 */
#include "ember.h"

#define DEFAULT_CACHE_LIMIT 8

static Py_ssize_t extra_index = -1;
static int cache_limit = DEFAULT_CACHE_LIMIT;
static CodeCache registry = {.prev = &registry, .next = &registry};

static void code_cache_free(void *ptr) {
    /* CPython calls every registered free function for every extra slot of a dying
     * code object, set or not: a code object that only another extension (such as
     * TorchDynamo) annotated reaches us with NULL. */
    if (ptr == NULL) {
        return;
    }
    CodeCache *cache = (CodeCache *)ptr;
    cache->prev->next = cache->next;
    cache->next->prev = cache->prev;
    PyObject *entries = cache->entries;
    PyMem_RawFree(cache);
    Py_XDECREF(entries);
}

int ember_code_cache_init(void) {
    extra_index = ember_request_code_extra_index(code_cache_free);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ember_frame_hook: CPython has no free code-extra slot left");
        return -1;
    }
    return 0;
}

CodeCache *ember_code_cache_get(PyObject *code) {
    void *extra = NULL;
    if (ember_code_get_extra(code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (CodeCache *)extra;
}

CodeCache *ember_code_cache_ensure(PyObject *code) {
    CodeCache *cache = ember_code_cache_get(code);
    if (cache != NULL) {
        return cache;
    }
    cache = PyMem_RawCalloc(1, sizeof(CodeCache));
    if (cache == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    cache->code = code;
    if (ember_code_set_extra(code, extra_index, cache) < 0) {
        PyMem_RawFree(cache);
        return NULL;
    }
    cache->next = registry.next;
    cache->prev = &registry;
    registry.next->prev = cache;
    registry.next = cache;
    return cache;
}

static void move_to_front(PyObject *list, Py_ssize_t index) {
    PyObject **items = ((PyListObject *)list)->ob_item;
    PyObject *item = items[index];
    memmove(&items[1], &items[0], (size_t)index * sizeof(PyObject *));
    items[0] = item;
}

static PyObject *lookup_entries(CodeCache *cache, PyObject *entries, PyObject *f_locals,
                                EmberGuardRun *run);

PyObject *ember_code_cache_lookup(CodeCache *cache, PyObject *f_locals) {
    PyObject *entries = cache->entries;
    if (entries == NULL) {
        return Py_None;
    }
    EmberGuardRun run; /* guard programs share the instructions they have in common */
    ember_guard_run_init(&run);
    PyObject *found = lookup_entries(cache, entries, f_locals, &run);
    /* Dropping the registers can run finalizers: not with a guard's exception set. */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    ember_guard_run_clear(&run);
    PyErr_Restore(type, value, traceback);
    return found;
}

static PyObject *lookup_entries(CodeCache *cache, PyObject *entries, PyObject *f_locals,
                                EmberGuardRun *run) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        /* Guards are Python code: they may reset() the cache under us, so hold
         * our own references and re-find the entry afterwards. */
        Py_INCREF(entries);
        GuardedCodeObject *entry = (GuardedCodeObject *)Py_NewRef(PyList_GET_ITEM(entries, i));
        int passed;
        if (Py_IS_TYPE(entry->guard, &GuardProgram_Type)) {
            passed = ember_guard_run_next(run, entry->guard, f_locals); /* no Python call */
        }
        else {
            Py_CLEAR(run->last); /* Python code ran: the next program starts afresh */
            PyObject *verdict = PyObject_CallOneArg(entry->guard, f_locals);
            passed = verdict == NULL ? -1 : PyObject_IsTrue(verdict);
            Py_XDECREF(verdict);
        }
        if (passed != 0) {
            Py_ssize_t now = -1;
            if (passed > 0 && cache->entries == entries) {
                for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entries); j++) {
                    if (PyList_GET_ITEM(entries, j) == (PyObject *)entry) {
                        now = j;
                        break;
                    }
                }
            }
            Py_DECREF(entries);
            if (passed < 0) {
                Py_DECREF(entry);
                return NULL;
            }
            if (now > 0) {
                move_to_front(entries, now);
            }
            entry->hits++;
            /* The caller gets a new reference: the entry may have been dropped. */
            return (PyObject *)entry;
        }
        Py_DECREF(entry);
        int changed = cache->entries != entries;
        Py_DECREF(entries);
        if (changed) {
            return Py_None;
        }
    }
    return Py_None;
}

int ember_code_cache_insert(CodeCache *cache, PyObject *entry) {
    if (cache->entries == NULL) {
        cache->entries = PyList_New(0);
        if (cache->entries == NULL) {
            return -1;
        }
    }
    PyObject *entries = cache->entries;
    /* Inserting an entry already cached (the callback cached it itself, under its own
     * lock: cache_insert) moves it to the front; it never takes a second slot. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        if (PyList_GET_ITEM(entries, i) == entry) {
            if (i > 0) {
                move_to_front(entries, i);
            }
            return 0;
        }
    }
    if (PyList_Insert(entries, 0, entry) < 0) {
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(entries);
    if (size > cache_limit) {
        /* Evict the least recently used entries past the limit. */
        Py_INCREF(entries);
        int rc = PyList_SetSlice(entries, cache_limit, size, NULL);
        Py_DECREF(entries);
        return rc;
    }
    return 0;
}

void ember_code_cache_reset_all(void) {
    /* Dropping entries can run arbitrary code (finalizers) that frees code
     * objects and so unlinks caches: detach everything first, then release. */
    Py_ssize_t count = 0;
    for (CodeCache *c = registry.next; c != &registry; c = c->next) {
        count++;
    }
    PyObject **graveyard = PyMem_RawCalloc((size_t)count + 1, sizeof(PyObject *));
    Py_ssize_t n = 0;
    for (CodeCache *c = registry.next; c != &registry; c = c->next) {
        c->skip = 0;
        if (graveyard != NULL) {
            graveyard[n++] = c->entries;
            c->entries = NULL;
        }
    }
    if (graveyard == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(graveyard[i]);
    }
    PyMem_RawFree(graveyard);
}

int ember_cache_limit(void) {
    return cache_limit;
}

void ember_set_cache_limit(int limit) {
    cache_limit = limit;
}
