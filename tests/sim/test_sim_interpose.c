/* test_sim_interpose.c - the simulated CUDA under an interposer.
 *
 * This executable does what the LD_PRELOADed oomlens library does: it
 * defines cuMemAlloc_v2 and dlsym itself, and its dlsym hands back a wrapper
 * for "cuGetProcAddress_v2" that in turn wraps "cuMemAlloc". Definitions in
 * the executable come first in symbol lookup, exactly like a preloaded
 * library's. The checks: the fake driver still hands out its own functions
 * (it must not give an interposer itself back), and the fake cudart reaches
 * the driver only through the hookable lookup path.
 */
/* cudaGetDriverEntryPoint is deprecated, and tested on purpose: PyTorch
 * and the interposer still use it. */
#define CUDA_ENABLE_DEPRECATED 1
#include <check.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "simcu.h"

/* AddressSanitizer resolves its interceptors with dlsym before anything
 * else runs; a dlsym defined here would be called half-initialized. So
 * the hook, and the test that needs it, exist only in plain builds. */
#ifndef __SANITIZE_ADDRESS__
#define HOOK_DLSYM 1
#endif

static unsigned long exe_alloc_calls;

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym(void)
{
    static dlsym_fn fn;
    if (!fn) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        memcpy(&fn, &p, sizeof p);
    }
    return fn;
}

static void *fn_to_ptr(void (*f)(void))
{
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

/* An interposer's hook on cuMemAlloc_v2 by symbol: forwards to the
 * driver's own function, found through cuGetProcAddress. */
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    exe_alloc_calls++;
    void *p = NULL;
    PFN_cuMemAlloc_v3020 fn;
    CUresult r = cuGetProcAddress("cuMemAlloc", &p, 13000, 0, NULL);
    if (r)
        return r;
    memcpy(&fn, &p, sizeof p);
    return fn(dptr, bytesize);
}

#ifdef HOOK_DLSYM
static unsigned long getproc_wraps, alloc_wraps;
static PFN_cuGetProcAddress_v12000 real_getproc;
static PFN_cuMemAlloc_v3020 real_alloc;

static CUresult CUDAAPI wrapped_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    alloc_wraps++;
    return real_alloc(dptr, bytesize);
}

static CUresult CUDAAPI wrapped_getproc(const char *symbol, void **pfn,
                                        int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status)
{
    getproc_wraps++;
    CUresult r = real_getproc(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020) {
        memcpy(&real_alloc, pfn, sizeof *pfn);
        *pfn = fn_to_ptr((void (*)(void))wrapped_alloc);
    }
    return r;
}

void *dlsym(void *restrict handle, const char *restrict name)
{
    void *p = real_dlsym()(handle, name);
    if (p && strcmp(name, "cuGetProcAddress_v2") == 0) {
        memcpy(&real_getproc, &p, sizeof p);
        return fn_to_ptr((void (*)(void))wrapped_getproc);
    }
    return p;
}
#endif

static void *driver_own(const char *abi)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(h);
    void *p = real_dlsym()(h, abi);
    dlclose(h);
    return p;
}

START_TEST(test_driver_hands_out_its_own)
{
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    void *p = NULL;
    ck_assert_int_eq(cuGetProcAddress("cuMemAlloc", &p, 13000, 0, NULL), CUDA_SUCCESS);
    ck_assert_ptr_eq(p, driver_own("cuMemAlloc_v2"));
    ck_assert_ptr_ne(p, fn_to_ptr((void (*)(void))cuMemAlloc_v2));
    /* A call by symbol reaches this executable's definition... */
    CUcontext c;
    ck_assert_int_eq(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSetCurrent(c), CUDA_SUCCESS);
    CUdeviceptr d;
    unsigned long before = exe_alloc_calls;
    ck_assert_int_eq(cuMemAlloc(&d, 64), CUDA_SUCCESS);
    ck_assert_uint_eq(exe_alloc_calls, before + 1);
    /* ...and the legacy v1 entry does not detour through it. */
    void *v1p = NULL;
    CUresult(CUDAAPI * v1)(unsigned int *, unsigned int); /* legacy ABI */
    ck_assert_int_eq(cuGetProcAddress("cuMemAlloc", &v1p, 3000, 0, NULL), CUDA_SUCCESS);
    memcpy(&v1, &v1p, sizeof v1p);
    unsigned int small;
    ck_assert_int_eq(v1(&small, 64), CUDA_SUCCESS);
    ck_assert_uint_eq(exe_alloc_calls, before + 1);
    ck_assert_int_eq(cuMemFree(d), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(small), CUDA_SUCCESS);
}
END_TEST

#ifdef HOOK_DLSYM
START_TEST(test_cudart_goes_through_getproc)
{
    unsigned long exe_before = exe_alloc_calls, wraps_before = alloc_wraps;
    void *p = NULL;
    ck_assert_int_eq(cudaMalloc(&p, 4096), cudaSuccess);
    /* cudart looked up cuGetProcAddress_v2 with (our) dlsym... */
    ck_assert_uint_gt(getproc_wraps, 10);
    /* ...got cuMemAlloc through it, and never called it by symbol. */
    ck_assert_uint_eq(alloc_wraps, wraps_before + 1);
    ck_assert_uint_eq(exe_alloc_calls, exe_before);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    /* PyTorch's expandable segments path lands on the wrapper too. */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000,
                                                      cudaEnableDefault, &st),
                     cudaSuccess);
    ck_assert_int_eq(st, cudaDriverEntryPointSuccess);
    ck_assert_ptr_eq(fn, fn_to_ptr((void (*)(void))wrapped_alloc));
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("sim-interpose");
    TCase *tc = tcase_create("interpose");
    tcase_add_test(tc, test_driver_hands_out_its_own);
#ifdef HOOK_DLSYM
    tcase_add_test(tc, test_cudart_goes_through_getproc);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
