/* shim.c: the exported face of liboomlens.so, and nothing else.
 *
 * Every CUDA symbol we interpose is defined here under its exact ABI name
 * (asm labels, because cuda.h renames cuMemAlloc to cuMemAlloc_v2 and so on)
 * and forwards to its handler in intercept.c. The table of these hooks lets
 * the lookup paths hand them out in place of the real functions. Nothing
 * else in the library knows it was preloaded. */
#include <dlfcn.h>

#include "hooks.h"
#include "oomlens.h"

#define OL_EXPORT __attribute__((visibility("default")))

#define OL_DEFINE_HOOK(name, ret, params, args)      \
  OL_EXPORT ret ol_hook_##name params __asm__(#name); \
  ret ol_hook_##name params                          \
  {                                                  \
    return ol_on_##name args;                        \
  }
OL_INTERPOSED_FNS(OL_DEFINE_HOOK)
#undef OL_DEFINE_HOOK

static void *const hooks[OL_FN_COUNT] = {
#define OL_HOOK_ADDRESS(name, ret, params, args) [OL_FN_##name] = (void *)ol_hook_##name,
  OL_INTERPOSED_FNS(OL_HOOK_ADDRESS)
#undef OL_HOOK_ADDRESS
};

OL_EXPORT void *dlsym(void *handle, const char *name)
{
  return ol_on_dlsym(handle, name, __builtin_return_address(0));
}

/* Every C++ throw passes here on its way to the C++ runtime: PyTorch's own
 * out-of-memory, raised where no allocation call failed, is seen so. */
OL_EXPORT _Noreturn void __cxa_throw(void *object, void *type, void (*destroy)(void *));
OL_EXPORT _Noreturn void __cxa_throw(void *object, void *type, void (*destroy)(void *))
{
  ol_on_cxa_throw(object, type, destroy);
}

OL_EXPORT const char *oomlens_version(void)
{
  return ol_on_version();
}

OL_EXPORT int oomlens_write_report(void)
{
  return ol_on_write_report();
}

OL_EXPORT int oomlens_capture(int on)
{
  return ol_on_capture(on);
}

/* Only records a pointer: no work may happen at load time. */
__attribute__((constructor)) static void install_hooks(void)
{
  ol_intercept_install(hooks);
}

__attribute__((destructor)) static void write_exit_report(void)
{
  ol_on_unload();
}
