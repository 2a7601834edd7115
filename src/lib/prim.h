/* prim.h: the primitive layer's contract (prim.c). The only code that
 * finds the real CUDA driver and runtime, calls glibc's dlsym and dlopen,
 * and opens the optional libraries (libunwind, libdw, NVML, CPython's
 * symbols). Everything else in the library reaches CUDA through these
 * functions, so a new driver call is added here or nowhere. */
#ifndef OL_PRIM_H
#define OL_PRIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"

/* ---- prim.c: the only code that calls into the real CUDA -------------- */
void *ol_prim_dlsym(void *handle, const char *name); /* glibc's dlsym */
void *ol_prim_dlopen_loaded(const char *path); /* glibc's dlopen, RTLD_NOLOAD */
void ol_prim_dlclose(void *handle);            /* glibc's dlclose */
struct link_map;
struct link_map *ol_prim_owner_of(const void *p); /* the object defining p, or NULL */
/* The first definition of name in an object loaded after self, in that
 * object itself (RTLD_LOCAL ones too), or NULL. */
void *ol_prim_defined_after(const struct link_map *self, const char *name);
void *ol_prim_real(ol_fn_t fn);                       /* NULL if unavailable */
bool ol_prim_driver_available(void);
bool ol_prim_opening_driver(void);
int ol_prim_fn_of(const void *real_fn); /* which interposed function, or -1 */
int ol_prim_fn_by_name(const char *name);
const char *ol_prim_name(ol_fn_t fn);
int ol_prim_current_device_driver(void);
int ol_prim_current_device_runtime(void);

#define OL_REAL(name) ((ol_pfn_##name)ol_prim_real(OL_FN_##name))

/* C++ exceptions (the Itanium ABI's, as libstdc++ and libc++ keep them):
 * the thrown type's mangled name, the message of one derived from
 * std::exception (its what()), and the C++ runtime's own __cxa_throw,
 * which every throw goes on to. */
const char *ol_prim_exception_type_name(const void *type);
const char *ol_prim_exception_message(void *object);
_Noreturn void ol_prim_cxa_throw(void *object, void *type, void (*destroy)(void *));

/* Manage mode's own use of the driver; return 0 on success, -1 out of
 * memory (vmm_map) or failure, -2 another failure. */
uint64_t ol_prim_vmm_granularity(int device); /* 0: no VMM on this device */
int ol_prim_vmm_reserve(uint64_t size, uint64_t alignment, uint64_t *base);
void ol_prim_vmm_unreserve(uint64_t base, uint64_t size);
int ol_prim_vmm_map(int device, uint64_t addr, uint64_t size, uint64_t *handle);
/* A handle already made (mapped elsewhere too, perhaps) mapped at addr. */
int ol_prim_vmm_map_handle(int device, uint64_t addr, uint64_t size, uint64_t handle);
void ol_prim_vmm_unmap(uint64_t addr, uint64_t size, uint64_t handle);
/* The mapping at addr goes; its memory stays with the handle's other one. */
void ol_prim_vmm_unmap_only(uint64_t addr, uint64_t size);
void *ol_prim_event_create(void);
int ol_prim_event_record(void *event, void *stream);
int ol_prim_event_done(void *event); /* 1 done, 0 pending, -1 error */
int ol_prim_event_wait(void *event);
void ol_prim_event_destroy(void *event);
int ol_prim_device_synchronize(void);
int ol_prim_context_barrier(void *event); /* 0: later work waits for earlier work */
int ol_prim_context_record(void *event);  /* 0: passes once all earlier work is done */
int ol_prim_stream_idle(void *stream); /* 1 idle, 0 busy, -1 error */
/* count words of pinned host memory streams can write; NULL: not available */
uint32_t *ol_prim_host_words(size_t count, uint64_t *device_addr);
int ol_prim_stream_write_word(void *stream, uint64_t device_addr, uint32_t value); /* 0 ok */
int ol_prim_mem_info(size_t *free_bytes, size_t *total_bytes); /* current device; 0 ok */
typedef struct ol_gpu_process {
  uint32_t pid;
  int64_t bytes; /* -1: not available */
} ol_gpu_process_t;
int ol_prim_device_processes(int device, ol_gpu_process_t *out, int max); /* -1: no NVML */
void *ol_prim_unwinder(void); /* libunwind's unw_backtrace, NULL without libunwind.so.8 */
void *ol_prim_python_symbol(const char *name); /* from the loaded CPython, or NULL */
void *ol_prim_open_library(const char *soname); /* dlopen, local; NULL if absent */
uint64_t ol_prim_device_total_memory(int device); /* 0 if unknown */
bool ol_prim_has_context(void);                   /* a CUDA context is current */
/* Binds the calling thread to the runtime's context as the runtime's first
 * call on it would (cudaFree(NULL)); true when a context is current then. */
bool ol_prim_bind_runtime_context(void);


#endif
