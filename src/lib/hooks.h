/* hooks.h: what each exported hook does (intercept.c), for the shim
 * (shim.c), which only forwards. Built with the CUDA headers. */
#ifndef OL_HOOKS_H
#define OL_HOOKS_H

#include "cuda_abi.h"

/* ---- intercept.c: what each hook does ---------------------------------- */
#define OL_HANDLER_DECL(name, ret, params, args) ret ol_on_##name params;
OL_INTERPOSED_FNS(OL_HANDLER_DECL)
#undef OL_HANDLER_DECL
void *ol_on_dlsym(void *handle, const char *name, const void *caller);
/* A C++ throw: seen, then passed to the C++ runtime (never returns). */
_Noreturn void ol_on_cxa_throw(void *object, void *type, void (*destroy)(void *));
/* The shim's table: hook address for each interposed function. */
void ol_intercept_install(void *const hooks[OL_FN_COUNT]);
void *ol_intercept_wrap(void *real_fn);

/* The library's own exported calls (include/oomlens.h) and its unloading. */
const char *ol_on_version(void);
int ol_on_write_report(void); /* 0 when every report file was written */
int ol_on_capture(int on);     /* call sites taken (1) or paused (0): the state before */
void ol_on_unload(void);      /* the process is exiting: final reports */

#endif
