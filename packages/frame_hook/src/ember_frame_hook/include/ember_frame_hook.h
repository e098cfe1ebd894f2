/* ember_frame_hook.h: the public C interface of ember_frame_hook's native guard plug-in.
 *
 * A GuardProgram's CHECK_NATIVE instruction takes `arg = (capsule, data)` and calls
 * the C function the capsule holds as `check(value, data)`. It lets a package that knows
 * a type's C layout (the bytecode tracer's C++ tensor check, built against torch) add a
 * check without the frame hook knowing the type.
 *
 * The ABI, version EMBER_FRAME_HOOK_NATIVE_ABI_VERSION:
 *   - the capsule is named EMBER_NATIVE_CHECK_CAPSULE and its pointer is the check
 *     function itself (an `ember_native_check`, cast to `void *`; no struct around it);
 *   - `check(value, data)` answers 1 (passes), 0 (fails) or -1 with an exception set,
 *     exactly as the Python checks it stands for would; `value` and `data` are
 *     borrowed; it runs with the GIL held and must not keep either past the call.
 * A change to any of this bumps the version (and the capsule name, so an old plug-in is
 * refused when a program is built instead of being called wrongly).
 *
 * Find this header with `ember_frame_hook.get_include()`. It needs <Python.h> only and
 * compiles as C and as C++.
 */
#ifndef EMBER_FRAME_HOOK_H
#define EMBER_FRAME_HOOK_H

#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_FRAME_HOOK_NATIVE_ABI_VERSION 1

/* The name a CHECK_NATIVE capsule must carry. */
#define EMBER_NATIVE_CHECK_CAPSULE "ember_frame_hook.native_check"

/* The check a CHECK_NATIVE capsule holds: 1 passes, 0 fails, -1 raised. */
typedef int (*ember_native_check)(PyObject *value, PyObject *data);

/* A new reference to a capsule holding `check`, ready for CHECK_NATIVE's arg[0]; NULL
 * with an exception set on failure. */
static inline PyObject *ember_native_check_capsule(ember_native_check check) {
    return PyCapsule_New((void *)check, EMBER_NATIVE_CHECK_CAPSULE, NULL);
}

#ifdef __cplusplus
}
#endif

#endif /* EMBER_FRAME_HOOK_H */
