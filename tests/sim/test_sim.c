/* test_sim.c - tests of the simulated CUDA itself: the fake libcuda.so.1
 * (lookup table, capacity and OOM, VMM, streams and events, cuMemFree
 * semantics, capture rules, threads, fork) and the fake libcudart.so.13 end
 * to end. Every other suite trusts these doubles, so they are checked
 * against the behaviour of the real libraries, not just exercised.
 */
/* cudaGetDriverEntryPoint is deprecated, and tested on purpose: PyTorch
 * and the interposer still use it. */
#define CUDA_ENABLE_DEPRECATED 1
#include <check.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "simcu.h"

/* The _ptsz ABI is declared only for code built for per-thread default
 * streams; these tests call both flavours. */
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                      CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size,
                                           cudaStream_t s);
cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s);

#define MiB ((size_t)1 << 20)
/* Long enough that work launched this slowly is surely still pending when
 * the next line checks, even on a loaded machine or under valgrind. */
#define SLOW_US 400000u
#define GRAN (2 * MiB)

/* The legacy 32-bit ABI, declared by cuda.h only for the driver itself. */
typedef CUresult(CUDAAPI *legacy_alloc_fn)(unsigned int *dptr, unsigned int bytesize);
typedef CUresult(CUDAAPI *legacy_free_fn)(unsigned int dptr);

#define CU_OK(call) ck_assert_int_eq((call), CUDA_SUCCESS)
#define RT_OK(call) ck_assert_int_eq((call), cudaSuccess)

static CUcontext ctx0;

/* ---- helpers ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *as_ptr(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

static bool all_bytes(CUdeviceptr p, unsigned char v, size_t n)
{
    const unsigned char *b = as_ptr(p);
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return false;
    return true;
}

static void *libcuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(h);
    dlclose(h); /* still loaded: the test links it */
    return h;
}

static void *driver_sym(const char *abi)
{
    void *p = dlsym(libcuda(), abi);
    ck_assert_msg(p != NULL, "libcuda.so.1 does not export %s", abi);
    return p;
}

/* Every SIMCU_ variable back to its default, then a fresh simulation. */
static void scene(const char *name, const char *value)
{
    static const char *const vars[] = {"SIMCU_DEVICES", "SIMCU_EXTERNAL",
                                       "SIMCU_NO_VMM", "SIMCU_FAIL_ALLOC",
                                       "SIMCU_DRIVER_VERSION", "SIMCU_FAIL_ERROR",
                                       "SIMCU_FAIL_EVENT"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    setenv("SIMCU_CAPACITY", "1G", 1);
    if (name)
        setenv(name, value, 1);
    simcu_reset();
}

static void setup(void)
{
    scene(NULL, NULL);
    CU_OK(cuInit(0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx0, 0));
    CU_OK(cuCtxSetCurrent(ctx0));
}

static void teardown(void)
{
    simcu_wait_idle();
    scene(NULL, NULL);
}

static CUmemAllocationProp vmm_prop(int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static void set_rw(CUdeviceptr va, size_t size)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_OK(cuMemSetAccess(va, size, &d, 1));
}

/* Dynamic symbols of an ELF file, read from its section headers. */
typedef void (*sym_fn)(const char *name, bool defined, bool global_func,
                       void *arg);

static void elf_dynsyms(const char *path, sym_fn fn, void *arg)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    const char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    const Elf64_Ehdr *eh = (const void *)map;
    ck_assert_int_eq(memcmp(eh->e_ident, ELFMAG, SELFMAG), 0);
    const Elf64_Shdr *sh = (const void *)(map + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *sym = (const void *)(map + sh[i].sh_offset);
        const char *str = map + sh[sh[i].sh_link].sh_offset;
        for (size_t j = 1; j < sh[i].sh_size / sizeof *sym; j++)
            fn(str + sym[j].st_name, sym[j].st_shndx != SHN_UNDEF,
               ELF64_ST_BIND(sym[j].st_info) == STB_GLOBAL &&
                   ELF64_ST_TYPE(sym[j].st_info) == STT_FUNC,
               arg);
    }
    munmap((void *)map, (size_t)st.st_size);
    close(fd);
}

static const char *loaded_path(const char *soname)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(h);
    struct link_map *lm = NULL;
    ck_assert_int_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
    dlclose(h);
    return lm->l_name;
}

/* ================= the lookup path ================= */

static const struct getproc_case {
    const char *symbol;
    int version;
    cuuint64_t flags;
    CUresult result;
    CUdriverProcAddressQueryResult status;
    const char *abi; /* expected function, NULL for none */
} getproc_cases[] = {
    {"cuMemAlloc", 3000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAlloc"},
    {"cuMemAlloc", 3020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAlloc_v2"},
    {"cuMemAlloc", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAlloc_v2"},
    {"cuMemAlloc", 1000, 0, CUDA_ERROR_NOT_FOUND,
     CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, NULL},
    {"cuMemFree", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemFree_v2"},
    {"cuMemGetInfo", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuMemGetInfo_v2"},
    {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_DEFAULT, CUDA_SUCCESS,
     CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_SUCCESS,
     CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
     CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
     CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemFreeAsync_ptsz"},
    {"cuMemAllocAsync", 11000, 0, CUDA_ERROR_NOT_FOUND,
     CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, NULL},
    {"cuGetProcAddress", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuGetProcAddress_v2"},
    {"cuGetProcAddress", 11080, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuGetProcAddress"},
    {"cuStreamDestroy", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuStreamDestroy_v2"},
    {"cuEventDestroy", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuEventDestroy_v2"},
    {"cuCtxPopCurrent", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuCtxPopCurrent_v2"},
    {"cuCtxSynchronize", 12080, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuCtxSynchronize"},
    {"cuCtxSynchronize", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS,
     "cuCtxSynchronize_v2"},
    {"cuStreamQuery", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
     CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuStreamQuery_ptsz"},
    {"cuStreamGetCaptureInfo", 13000, 0, CUDA_SUCCESS,
     CU_GET_PROC_ADDRESS_SUCCESS, "cuStreamGetCaptureInfo_v3"},
    {"cuMemCreate", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, "cuMemCreate"},
    {"cuNoSuchFunction", 13000, 0, CUDA_ERROR_NOT_FOUND,
     CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, NULL},
    /* ABI names are not base names. */
    {"cuMemAlloc_v2", 13000, 0, CUDA_ERROR_NOT_FOUND,
     CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, NULL},
};

START_TEST(test_getproc_table)
{
    const struct getproc_case *c = &getproc_cases[_i];
    void *fn = (void *)&fn;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult r = cuGetProcAddress(c->symbol, &fn, c->version, c->flags, &st);
    ck_assert_msg(r == c->result, "%s@%d: result %d", c->symbol, c->version, r);
    ck_assert_int_eq(st, c->status);
    if (c->abi)
        ck_assert_ptr_eq(fn, driver_sym(c->abi));
    else
        ck_assert_ptr_null(fn);
}
END_TEST

START_TEST(test_getproc_v1_and_distinct_ptsz)
{
    PFN_cuGetProcAddress_v11030 v1;
    void *p = NULL;
    CU_OK(cuGetProcAddress("cuGetProcAddress", &p, 11030, 0, NULL));
    memcpy(&v1, &p, sizeof p);
    CU_OK(v1("cuMemAlloc", &p, 13000, 0));
    ck_assert_ptr_eq(p, driver_sym("cuMemAlloc_v2"));
    ck_assert_int_eq(v1("cuNope", &p, 13000, 0), CUDA_ERROR_NOT_FOUND);
    ck_assert_ptr_null(p);
    /* _ptsz variants are separate functions: an interposer tells ABIs apart
     * by address. */
    ck_assert_ptr_ne(driver_sym("cuMemAllocAsync"), driver_sym("cuMemAllocAsync_ptsz"));
    ck_assert_ptr_ne(driver_sym("cuMemFreeAsync"), driver_sym("cuMemFreeAsync_ptsz"));
    ck_assert_ptr_ne(driver_sym("cuMemAlloc"), driver_sym("cuMemAlloc_v2"));
}
END_TEST

START_TEST(test_getproc_bad_arguments)
{
    void *p = (void *)&p;
    CUdriverProcAddressQueryResult st;
    ck_assert_int_eq(cuGetProcAddress(NULL, &p, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(cuGetProcAddress("cuInit", NULL, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress("cuInit", &p, 13000, 8, &st),
                     CUDA_ERROR_INVALID_VALUE);
    /* Newer than the driver: documented as invalid. */
    ck_assert_int_eq(cuGetProcAddress("cuInit", &p, 13010, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    scene("SIMCU_DRIVER_VERSION", "12080");
    ck_assert_int_eq(cuGetProcAddress("cuInit", &p, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuGetProcAddress("cuInit", &p, 12080, 0, &st));
    /* No cuInit needed to look things up: cudart gets cuInit this way. */
    simcu_uninit();
    CU_OK(cuGetProcAddress("cuInit", &p, 12080, 0, &st));
    ck_assert_ptr_eq(p, driver_sym("cuInit"));
}
END_TEST

/* Each row is the answer for its own version and flavour: no row shadows
 * another, so every exported function is reachable by base name. */
START_TEST(test_getproc_every_row_reachable)
{
    const char *abi, *base;
    int ver, ptds;
    size_t n = 0;
    for (size_t i = 0; simcu_proc_entry(i, &abi, &base, &ver, &ptds) == 0; i++, n++) {
        void *p = NULL;
        cuuint64_t flags = ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
        CU_OK(cuGetProcAddress(base, &p, ver, flags, NULL));
        ck_assert_msg(p == driver_sym(abi), "%s@%d does not give %s", base, ver, abi);
    }
    ck_assert_uint_gt(n, 60);
}
END_TEST

static void check_driver_export(const char *name, bool defined, bool func, void *arg)
{
    if (!defined)
        return;
    ck_assert_msg(strncmp(name, "cu", 2) == 0 || strncmp(name, "simcu_", 6) == 0,
                  "libcuda.so.1 leaks %s", name);
    if (strncmp(name, "cu", 2) != 0)
        return;
    ck_assert_msg(func, "%s is not a function", name);
    bool listed = false;
    const char *abi;
    for (size_t i = 0; simcu_proc_entry(i, &abi, NULL, NULL, NULL) == 0; i++)
        listed |= strcmp(abi, name) == 0;
    ck_assert_msg(listed, "%s is exported but not in the lookup table", name);
    (*(size_t *)arg)++;
}

START_TEST(test_exports_match_table)
{
    size_t n = 0, rows = 0;
    elf_dynsyms(loaded_path("libcuda.so.1"), check_driver_export, &n);
    while (simcu_proc_entry(rows, NULL, NULL, NULL, NULL) == 0)
        rows++;
    ck_assert_uint_eq(n, rows);
}
END_TEST

/* ================= memory ================= */

START_TEST(test_alloc_write_read_free)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 1000));
    ck_assert_uint_eq(p % 256, 0);
    ck_assert_uint_eq(simcu_used_bytes(0), 1024); /* 512 B units */
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    memset(as_ptr(p), 0x5a, 1000);
    unsigned char back[1000];
    CU_OK(cuMemcpyDtoH(back, p, sizeof back));
    ck_assert_int_eq(back[999], 0x5a);
    ck_assert(simcu_is_device_memory(p, 1000));
    ck_assert(!simcu_is_device_memory(p, 1001));
    CUdeviceptr base;
    size_t size;
    CU_OK(cuMemGetAddressRange(&base, &size, p + 10));
    ck_assert_uint_eq(base, p);
    ck_assert_uint_eq(size, 1000);
    CU_OK(cuMemFree(p));
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    ck_assert_uint_eq(simcu_alloc_calls(), 1);
    ck_assert_uint_eq(simcu_call_count("cuMemAlloc_v2"), 1);
    ck_assert_uint_eq(simcu_call_count("cuMemFree_v2"), 1);
    ck_assert_uint_eq(simcu_call_count("nonsense"), 0);
}
END_TEST

START_TEST(test_free_errors)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 4096));
    ck_assert_int_eq(cuMemFree(p + 16), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(p));
    ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(0));
    ck_assert_int_eq(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(test_capacity_and_oom)
{
    scene("SIMCU_CAPACITY", "64M");
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, 40 * MiB));
    ck_assert_int_eq(cuMemAlloc(&b, 30 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAlloc(&b, 24 * MiB)); /* exactly full */
    ck_assert_uint_eq(simcu_used_bytes(0), 64 * MiB);
    ck_assert_int_eq(cuMemAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    /* An impossible request fails at once, with nothing mapped. */
    ck_assert_int_eq(cuMemAlloc(&b, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemFree(a));
    ck_assert_uint_eq(simcu_peak_used_bytes(0), 64 * MiB);
    size_t total;
    CU_OK(cuDeviceTotalMem(&total, 0));
    ck_assert_uint_eq(total, 64 * MiB);
}
END_TEST

START_TEST(test_mem_get_info)
{
    size_t free_b, total;
    CU_OK(cuMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(total, 1024 * MiB);
    ck_assert_uint_eq(free_b, 1024 * MiB);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 100 * MiB + 1));
    CU_OK(cuMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(free_b, 1024 * MiB - 100 * MiB - 512);
    ck_assert_int_eq(cuMemGetInfo(NULL, &total), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(test_external_memory)
{
    scene("SIMCU_EXTERNAL", "16M");
    simcu_set_capacity(0, 64 * MiB);
    size_t free_b, total;
    CU_OK(cuMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(free_b, 48 * MiB);
    ck_assert_uint_eq(simcu_used_bytes(0), 16 * MiB);
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 50 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAlloc(&p, 48 * MiB));
    simcu_set_external(0, 32 * MiB); /* someone else grew: now over */
    CU_OK(cuMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(free_b, 0);
    ck_assert_uint_eq(simcu_peak_used_bytes(0), 80 * MiB);
    CU_OK(cuMemFree(p));
    CU_OK(cuMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(free_b, 32 * MiB);
}
END_TEST

START_TEST(test_fail_event_env)
{
    scene("SIMCU_FAIL_EVENT", "2");
    CUevent a, b, c;
    CU_OK(cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
    ck_assert_int_eq(cuEventCreate(&b, CU_EVENT_DISABLE_TIMING), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuEventCreate(&c, CU_EVENT_DISABLE_TIMING)); /* only the 2nd fails */
    CU_OK(cuEventDestroy(a));
    CU_OK(cuEventDestroy(c));
    simcu_reset(); /* counted again from here */
    CU_OK(cuEventCreate(&a, 0));
    ck_assert_int_eq(cuEventCreate(&b, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuEventDestroy(a));
}
END_TEST

START_TEST(test_fail_alloc_env)
{
    scene("SIMCU_FAIL_ALLOC", "3");
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr a, b, c, d;
    CU_OK(cuMemAlloc(&a, 4096));
    CU_OK(cuMemAllocAsync(&b, 4096, 0));
    ck_assert_int_eq(cuMemCreate(&h, GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAlloc(&c, 4096)); /* only the 3rd fails */
    CU_OK(cuMemCreate(&h, GRAN, &prop, 0));
    ck_assert_uint_eq(simcu_alloc_calls(), 5);
    simcu_fail_alloc_at(2); /* the 2nd from now */
    CU_OK(cuMemAlloc(&d, 4096));
    CUdeviceptr e;
    ck_assert_int_eq(cuMemAllocAsync(&e, 4096, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAllocAsync(&e, 4096, 0));
    simcu_fail_alloc_at(0);
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
    CU_OK(cuMemFree(c));
    CU_OK(cuMemFree(d));
    CU_OK(cuMemFree(e));
    CU_OK(cuMemRelease(h));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
}
END_TEST

/* The injected failure can be another error than out of memory. */
START_TEST(test_fail_alloc_other_error)
{
    scene("SIMCU_FAIL_ERROR", "999");
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr a;
    simcu_fail_alloc_at(1);
    ck_assert_int_eq(cuMemAlloc(&a, 4096), CUDA_ERROR_UNKNOWN);
    simcu_fail_alloc_at(1);
    simcu_fail_alloc_error(CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, GRAN, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemAlloc(&a, 4096));
    CU_OK(cuMemFree(a));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
}
END_TEST

START_TEST(test_needs_init_and_context)
{
    CUdeviceptr p;
    size_t f, t;
    CU_OK(cuCtxSetCurrent(NULL));
    ck_assert_int_eq(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(simcu_launch_sleep(0, 1), CUDA_ERROR_INVALID_CONTEXT);
    /* VMM needs no context, like CUDA's. */
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, GRAN, &prop, 0));
    CU_OK(cuMemRelease(h));
    CU_OK(cuCtxPushCurrent(ctx0));
    CUcontext top;
    CU_OK(cuCtxPopCurrent(&top));
    ck_assert_ptr_eq(top, ctx0);
    ck_assert_int_eq(cuCtxPopCurrent(&top), CUDA_ERROR_INVALID_CONTEXT);

    simcu_uninit();
    int v = 0;
    CU_OK(cuDriverGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    ck_assert_int_eq(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuCtxGetCurrent(&top), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuMemCreate(&h, GRAN, &prop, 0), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuInit(0));

    scene("SIMCU_DEVICES", "0");
    simcu_uninit();
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

START_TEST(test_devices_and_contexts)
{
    scene("SIMCU_DEVICES", "2");
    int n = 0;
    CU_OK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 2);
    char name[64];
    CU_OK(cuDeviceGetName(name, sizeof name, 1));
    ck_assert_str_eq(name, "SimCU Device 1");
    int attr = -1;
    CU_OK(cuDeviceGetAttribute(
        &attr, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1));
    ck_assert_int_eq(attr, 1);
    ck_assert_int_eq(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 2),
                     CUDA_ERROR_INVALID_DEVICE);
    CUcontext c1;
    CU_OK(cuDevicePrimaryCtxRetain(&c1, 1));
    CU_OK(cuCtxPushCurrent(c1));
    CUdevice dev = -1;
    CU_OK(cuCtxGetDevice(&dev));
    ck_assert_int_eq(dev, 1);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 4096));
    ck_assert_uint_eq(simcu_used_bytes(1), 4096);
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    int ordinal = -1;
    CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 5));
    ck_assert_int_eq(ordinal, 1);
    CUcontext owner = NULL;
    CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    ck_assert_ptr_eq(owner, c1);
    unsigned type = 0;
    CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
    int host_var;
    ck_assert_int_eq(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)(uintptr_t)&host_var),
                     CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(p));
    CU_OK(cuCtxPopCurrent(NULL));
    CU_OK(cuDevicePrimaryCtxRelease(1));
}
END_TEST

static const struct size_case {
    const char *text;
    size_t want; /* 0: rejected, default kept */
} size_cases[] = {
    {"123", 123},
    {"1K", 1024},
    {"2M", 2 * MiB},
    {"3g", (size_t)3 << 30},
    {"1T", (size_t)1 << 40},
    {"4GiB", (size_t)4 << 30},
    {"5kb", 5 * 1024},
    {"abc", 0},
    {"-1", 0},
    {"12Q", 0},
    {"1G2", 0},
    {"99999999999T", 0},
};

START_TEST(test_capacity_parsing)
{
    const struct size_case *c = &size_cases[_i];
    scene("SIMCU_CAPACITY", c->text);
    ck_assert_uint_eq(simcu_capacity(0), c->want ? c->want : (size_t)8 << 30);
}
END_TEST

START_TEST(test_overlap_helpers)
{
    const CUdeviceptr base[] = {0x1000, 0x3000, 0x2000, 0x9000, 0x2800};
    const size_t size[] = {0x1000, 0x1000, 0x800, 0, 0x100};
    size_t a = 99, b = 99;
    ck_assert_int_eq(simcu_ranges_overlap(base, size, 4, &a, &b), 0);
    ck_assert_int_eq(simcu_ranges_overlap(base, size, 5, &a, &b), 0);
    const size_t big[] = {0x2000, 0x1000, 0x800, 0, 0x100};
    ck_assert_int_eq(simcu_ranges_overlap(base, big, 5, &a, &b), 1);
    ck_assert(a == 0 && (b == 2 || b == 4));
    /* A long range overlapping a later, non-adjacent one. */
    const CUdeviceptr b2[] = {0x0, 0x100, 0x200};
    const size_t s2[] = {0x1000, 0x10, 0x10};
    ck_assert_int_eq(simcu_ranges_overlap(b2, s2, 3, NULL, NULL), 1);

    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++)
        CU_OK(cuMemAlloc(&p[i], (size_t)(i + 1) * 3000));
    ck_assert_int_eq(simcu_check_no_overlap(), 0);
    for (int i = 0; i < 8; i++)
        CU_OK(cuMemFree(p[i]));
}
END_TEST

#if defined(__x86_64__)
START_TEST(test_legacy_v1_alloc)
{
    void *p = NULL;
    legacy_alloc_fn alloc_v1;
    legacy_free_fn free_v1;
    CU_OK(cuGetProcAddress("cuMemAlloc", &p, 3000, 0, NULL));
    memcpy(&alloc_v1, &p, sizeof p);
    CU_OK(cuGetProcAddress("cuMemFree", &p, 3000, 0, NULL));
    memcpy(&free_v1, &p, sizeof p);
    unsigned int d = 0;
    CU_OK(alloc_v1(&d, 4096));
    ck_assert_uint_ne(d, 0);
    ((unsigned char *)(uintptr_t)d)[4095] = 7;
    ck_assert(simcu_is_device_memory(d, 4096));
    CU_OK(free_v1(d));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
}
END_TEST
#endif

/* ================= VMM ================= */

START_TEST(test_vmm_data_survives_remap)
{
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    ck_assert_uint_eq(g, GRAN);
    CU_OK(cuMemGetAllocationGranularity(&g, &prop,
                                        CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    ck_assert_uint_eq(g, GRAN);

    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, 8 * GRAN, 0, 0, 0));
    ck_assert_uint_eq(va % GRAN, 0);
    ck_assert_uint_eq(simcu_used_bytes(0), 0); /* address space is free */
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, 2 * GRAN, &prop, 0));
    ck_assert_uint_eq(simcu_used_bytes(0), 2 * GRAN);
    CUmemAllocationProp got;
    CU_OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    ck_assert_int_eq(got.location.id, 0);

    CU_OK(cuMemMap(va, 2 * GRAN, 0, h, 0));
    ck_assert(!simcu_is_device_memory(va, 1)); /* no access granted yet */
    set_rw(va, 2 * GRAN);
    ck_assert(simcu_is_device_memory(va, 2 * GRAN));
    unsigned char *host = as_ptr(va);
    for (size_t i = 0; i < 2 * GRAN; i += 4096)
        host[i] = (unsigned char)(i / 4096 % 251);
    CU_OK(cuMemUnmap(va, 2 * GRAN));
    ck_assert(!simcu_is_device_memory(va, 1));

    CUdeviceptr elsewhere = va + 4 * GRAN;
    CU_OK(cuMemMap(elsewhere, 2 * GRAN, 0, h, 0));
    set_rw(elsewhere, 2 * GRAN);
    host = as_ptr(elsewhere);
    for (size_t i = 0; i < 2 * GRAN; i += 4096)
        ck_assert_int_eq(host[i], (unsigned char)(i / 4096 % 251));
    unsigned long long flags = 0;
    CU_OK(cuMemGetAccess(&flags, &prop.location, elsewhere));
    ck_assert_uint_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* Released but mapped: still counts, as in CUDA. */
    CU_OK(cuMemRelease(h));
    ck_assert_uint_eq(simcu_used_bytes(0), 2 * GRAN);
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    ck_assert_int_eq(cuMemAddressFree(va, 8 * GRAN), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemUnmap(elsewhere, 2 * GRAN));
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    CU_OK(cuMemAddressFree(va, 8 * GRAN));
    ck_assert_uint_eq(simcu_live_reservations(), 0);
}
END_TEST

/* An expandable segment: chunks mapped end to end, one kernel across. */
START_TEST(test_vmm_adjacent_chunks)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, 4 * GRAN, 4 * GRAN, 0, 0));
    ck_assert_uint_eq(va % (4 * GRAN), 0);
    CUmemGenericAllocationHandle h[2];
    for (int i = 0; i < 2; i++) {
        CU_OK(cuMemCreate(&h[i], GRAN, &prop, 0));
        CU_OK(cuMemMap(va + (CUdeviceptr)i * GRAN, GRAN, 0, h[i], 0));
        CU_OK(cuMemRelease(h[i]));
    }
    set_rw(va, 2 * GRAN); /* one call over both mappings */
    CU_OK(simcu_launch_fill(0, va + GRAN - 100, 0x77, 200, 0));
    CU_OK(cuCtxSynchronize());
    ck_assert(all_bytes(va + GRAN - 100, 0x77, 200));
    ck_assert_uint_eq(simcu_fault_count(), 0);
    ck_assert_int_eq(simcu_check_no_overlap(), 0);
    /* A kernel running into the unmapped rest faults instead of crashing. */
    CU_OK(simcu_launch_fill(0, va + 2 * GRAN - 8, 1, 16, 0));
    CU_OK(cuCtxSynchronize());
    ck_assert_uint_eq(simcu_fault_count(), 1);
    CUmemGenericAllocationHandle again;
    CU_OK(cuMemRetainAllocationHandle(&again, as_ptr(va + 5)));
    ck_assert_uint_eq(again, h[0]);
    CU_OK(cuMemRelease(again));
    CU_OK(cuMemUnmap(va, 2 * GRAN));
    CU_OK(cuMemAddressFree(va, 4 * GRAN));
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
}
END_TEST

/* A reservation the address space refuses, made when the table of
 * reservations had to grow: the table the grow moved is kept (it was left
 * pointing at freed memory: valgrind's 256 bytes lost, and the next
 * reservation written there). */
START_TEST(test_vmm_refused_reservation_keeps_the_table)
{
    CUdeviceptr va[40], refused;
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(cuMemAddressReserve(&refused, (size_t)1 << 62, 0, 0, 0),
                         CUDA_ERROR_OUT_OF_MEMORY);
        CU_OK(cuMemAddressReserve(&va[i], GRAN, 0, 0, 0));
    }
    for (int i = 0; i < 40; i++)
        CU_OK(cuMemAddressFree(va[i], GRAN));
    ck_assert_int_eq(cuMemAddressFree(va[0], GRAN), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(test_vmm_errors)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp bad = vmm_prop(7);
    ck_assert_int_eq(cuMemCreate(&h, GRAN, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
    CUdeviceptr va;
    ck_assert_int_eq(cuMemAddressReserve(&va, MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&va, GRAN, 3 * MiB, 0, 0),
                     CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemAddressReserve(&va, 4 * GRAN, 0, 0, 0));
    CU_OK(cuMemCreate(&h, GRAN, &prop, 0));
    ck_assert_int_eq(cuMemMap(va + 4096, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(va, GRAN, GRAN, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(va, 2 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(va + 4 * GRAN, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(va, GRAN, 0, h + 1000, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemMap(va, GRAN, 0, h, 0));
    ck_assert_int_eq(cuMemMap(va, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemUnmap(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location = prop.location;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ck_assert_int_eq(cuMemSetAccess(va, GRAN / 2, &d, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemSetAccess(va, GRAN, &d, 0), CUDA_ERROR_INVALID_VALUE);
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    CU_OK(cuMemSetAccess(va, GRAN, &d, 1));
    ck_assert(!simcu_is_device_memory(va, 1)); /* read-only */
    CU_OK(cuMemUnmap(va, GRAN));
    CU_OK(cuMemRelease(h));
    ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemAddressFree(va, 4 * GRAN));
    simcu_set_capacity(0, 3 * GRAN);
    ck_assert_int_eq(cuMemCreate(&h, 4 * GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}
END_TEST

START_TEST(test_vmm_unsupported)
{
    scene("SIMCU_NO_VMM", "1");
    int attr = -1;
    CU_OK(cuDeviceGetAttribute(
        &attr, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    ck_assert_int_eq(attr, 0);
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t g;
    ck_assert_int_eq(cuMemCreate(&h, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &prop,
                                                   CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     CUDA_ERROR_NOT_SUPPORTED);
    CU_OK(cuMemAlloc(&va, 4096)); /* plain allocation still works */
    CU_OK(cuMemFree(va));
}
END_TEST

/* ================= streams ================= */

START_TEST(test_fill_lands_later)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 4096));
    memset(as_ptr(p), 0, 4096);
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    double t0 = now_ms();
    CU_OK(simcu_launch_fill(s, p, 0xab, 4096, SLOW_US));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    ck_assert(all_bytes(p, 0, 4096));
    ck_assert_uint_eq(simcu_pending_work(), 1);
    CU_OK(cuStreamSynchronize(s));
    ck_assert_double_ge(now_ms() - t0, SLOW_US / 1000.0 - 1);
    ck_assert(all_bytes(p, 0xab, 4096));
    CU_OK(cuStreamQuery(s));
    ck_assert_uint_eq(simcu_pending_work(), 0);
    ck_assert_uint_eq(simcu_stream_sync_count(), 1);
    ck_assert_uint_eq(simcu_sync_count(), 0);
    CU_OK(cuStreamDestroy(s));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_stream_order)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 256));
    CUstream s;
    CU_OK(cuStreamCreateWithPriority(&s, 0, -1));
    double t0 = now_ms();
    CU_OK(simcu_launch_fill(s, p, 1, 256, 100000));
    CU_OK(simcu_launch_fill(s, p, 2, 256, 0)); /* must not overtake */
    CU_OK(cuStreamSynchronize(s));
    ck_assert(all_bytes(p, 2, 256));
    ck_assert_double_ge(now_ms() - t0, 99.0);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_streams_run_independently)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 256));
    CUstream slow, fast;
    CU_OK(cuStreamCreate(&slow, 0));
    CU_OK(cuStreamCreate(&fast, 0));
    CU_OK(simcu_launch_sleep(slow, SLOW_US));
    CU_OK(simcu_launch_fill(fast, p, 9, 256, 0));
    CU_OK(cuStreamSynchronize(fast));
    ck_assert(all_bytes(p, 9, 256));
    /* Had fast waited for slow, slow would be done by now. */
    ck_assert_int_eq(cuStreamQuery(slow), CUDA_ERROR_NOT_READY);
    /* Destroying a busy stream is fine: its work still completes. */
    CU_OK(cuStreamDestroy(slow));
    ck_assert_uint_eq(simcu_pending_work(), 1);
    simcu_wait_idle();
    ck_assert_uint_eq(simcu_pending_work(), 0);
    CU_OK(cuStreamDestroy(fast));
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_legacy_stream_ordering)
{
    CUdeviceptr p, q;
    CU_OK(cuMemAlloc(&p, 256));
    CU_OK(cuMemAlloc(&q, 256));
    CUstream blocking, nonblocking;
    CU_OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    /* The legacy stream waits for earlier work on blocking streams... */
    CU_OK(simcu_launch_fill(blocking, p, 5, 256, 100000));
    unsigned char back[256];
    CU_OK(cuMemcpyDtoH(back, p, sizeof back));
    ck_assert_int_eq(back[0], 5);
    /* ...and blocking streams wait for earlier legacy work. */
    CU_OK(simcu_launch_fill(0, q, 6, 256, 100000));
    CU_OK(simcu_launch_check(blocking, q, 6, 256, 0));
    CU_OK(cuStreamSynchronize(blocking));
    ck_assert_uint_eq(simcu_check_failures(), 0);
    /* Non-blocking streams are not waited for. */
    CU_OK(simcu_launch_fill(nonblocking, q, 9, 256, SLOW_US));
    CU_OK(cuMemsetD8(p, 1, 256));
    ck_assert(all_bytes(p, 1, 256));
    ck_assert_int_eq(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamSynchronize(nonblocking));
    ck_assert(all_bytes(q, 9, 256));
    CU_OK(cuStreamDestroy(blocking));
    CU_OK(cuStreamDestroy(nonblocking));
    CU_OK(cuMemFree(p));
    CU_OK(cuMemFree(q));
}
END_TEST

START_TEST(test_sync_copies)
{
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, 1000));
    CU_OK(cuMemAlloc(&b, 1000));
    char src[1000], dst[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (char)(i * 7);
    CU_OK(cuMemcpyHtoD(a, src, sizeof src));
    CU_OK(cuMemcpyDtoD(b, a, sizeof src));
    CU_OK(cuMemcpyDtoH(dst, b, sizeof dst));
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);
    CU_OK(cuMemcpy((CUdeviceptr)(uintptr_t)dst, a, 10));
    ck_assert_int_eq(cuMemcpyHtoD(a, src, 1001), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, 10),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemsetD8(a + 999, 0, 2), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
}
END_TEST

static void *per_thread_sleeper(void *arg)
{
    CUresult *res = arg;
    res[0] = cuCtxSetCurrent(ctx0);
    res[1] = simcu_launch_sleep(CU_STREAM_PER_THREAD, SLOW_US);
    res[2] = cuStreamQuery(CU_STREAM_PER_THREAD);
    return NULL;
}

START_TEST(test_per_thread_streams)
{
    CUresult res[3] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, per_thread_sleeper, res), 0);
    pthread_join(t, NULL);
    CU_OK(res[0]);
    CU_OK(res[1]);
    ck_assert_int_eq(res[2], CUDA_ERROR_NOT_READY);
    /* This thread's own default stream is another, idle stream; the exited
     * thread's work still completes. */
    CU_OK(cuStreamQuery(CU_STREAM_PER_THREAD));
    ck_assert_uint_eq(simcu_pending_work(), 1);
    simcu_wait_idle();
}
END_TEST

/* ================= cuMemFree semantics ================= */

START_TEST(test_free_waits_for_device)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 4096));
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(simcu_launch_fill(s, p, 0x11, 4096, 150000));
    double t0 = now_ms();
    CU_OK(cuMemFree(p)); /* must not pull the memory from under the fill */
    ck_assert_double_ge(now_ms() - t0, 149.0);
    ck_assert_uint_eq(simcu_pending_work(), 0);
    ck_assert_uint_eq(simcu_sync_count(), 1);
    ck_assert_uint_eq(simcu_fault_count(), 0);
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    CU_OK(cuCtxSynchronize());
    ck_assert_uint_eq(simcu_sync_count(), 2);
    CU_OK(cuStreamDestroy(s));
}
END_TEST

START_TEST(test_free_async_in_stream_order)
{
    CUstream s, other;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuStreamCreate(&other, 0));
    CUdeviceptr p;
    CU_OK(cuMemAllocAsync(&p, 8192, s));
    CU_OK(simcu_launch_fill(s, p, 3, 8192, SLOW_US));
    CU_OK(cuMemFreeAsync(p, s));
    ck_assert_int_eq(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
    /* Nothing waited, nothing released yet. */
    ck_assert_uint_eq(simcu_sync_count(), 0);
    ck_assert_uint_eq(simcu_used_bytes(0), 8192);
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    ck_assert_uint_eq(simcu_pending_work(), 2);
    CU_OK(cuStreamSynchronize(s));
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    ck_assert_uint_eq(simcu_fault_count(), 0);
    ck_assert_uint_eq(simcu_sync_count(), 0);
    /* A kernel on another stream that outlives the free is a use after
     * free: skipped and counted. */
    CU_OK(cuMemAllocAsync(&p, 8192, s));
    CU_OK(simcu_launch_fill(other, p, 4, 8192, SLOW_US));
    CU_OK(cuMemFreeAsync(p, s));
    CU_OK(cuStreamSynchronize(other));
    ck_assert_uint_eq(simcu_fault_count(), 1);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuStreamDestroy(other));
}
END_TEST

START_TEST(test_free_async_ptsz)
{
    CUdeviceptr p;
    CU_OK(cuMemAllocAsync_ptsz(&p, 4096, 0));
    CU_OK(simcu_launch_sleep(CU_STREAM_PER_THREAD, SLOW_US));
    CU_OK(cuMemFreeAsync_ptsz(p, 0)); /* 0 is this thread's stream here */
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    ck_assert_uint_eq(simcu_call_count("cuMemAllocAsync_ptsz"), 1);
    ck_assert_uint_eq(simcu_call_count("cuMemFreeAsync_ptsz"), 1);
    ck_assert_uint_eq(simcu_call_count("cuMemFreeAsync"), 0);
}
END_TEST

/* ================= events ================= */

START_TEST(test_event_record_query_sync)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64));
    CUstream s;
    CUevent e;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    CU_OK(cuEventQuery(e)); /* never recorded: complete */
    CU_OK(simcu_launch_fill(s, p, 8, 64, SLOW_US));
    CU_OK(cuEventRecord(e, s));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CU_OK(cuEventSynchronize(e));
    ck_assert(all_bytes(p, 8, 64));
    CU_OK(cuEventQuery(e));
    CU_OK(cuEventDestroy(e));
    ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_stream_wait_event)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64));
    CUstream a, b;
    CUevent e;
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU_OK(simcu_launch_fill(a, p, 1, 64, 150000));
    CU_OK(cuEventRecord(e, a));
    CU_OK(cuStreamWaitEvent(b, e, 0));
    CU_OK(simcu_launch_check(b, p, 1, 64, 0));
    CU_OK(cuEventDestroy(e)); /* pending waits keep it alive */
    CU_OK(cuStreamSynchronize(b));
    ck_assert_uint_eq(simcu_check_failures(), 0);
    /* Without the wait, b reads before a writes. */
    CU_OK(simcu_launch_fill(a, p, 2, 64, 150000));
    CU_OK(simcu_launch_check(b, p, 2, 64, 0));
    CU_OK(cuStreamSynchronize(b));
    ck_assert_uint_eq(simcu_check_failures(), 1);
    CU_OK(cuStreamSynchronize(a));
    CU_OK(cuStreamDestroy(a));
    CU_OK(cuStreamDestroy(b));
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_event_elapsed)
{
    CUstream s;
    CUevent a, b, untimed;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuEventCreate(&a, 0));
    CU_OK(cuEventCreate(&b, 0));
    CU_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    float ms = -1;
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventRecord(a, s));
    CU_OK(simcu_launch_sleep(s, SLOW_US));
    CU_OK(cuEventRecord(b, s));
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    CU_OK(cuEventSynchronize(b));
    CU_OK(cuEventElapsedTime(&ms, a, b));
    ck_assert_float_ge(ms, SLOW_US / 1000.0f - 1);
    CU_OK(cuEventRecord(untimed, s));
    CU_OK(cuStreamSynchronize(s));
    ck_assert_int_eq(cuEventElapsedTime(&ms, a, untimed), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventDestroy(a));
    CU_OK(cuEventDestroy(b));
    CU_OK(cuEventDestroy(untimed));
    CU_OK(cuStreamDestroy(s));
}
END_TEST

/* ================= capture ================= */

START_TEST(test_capture_sync_invalidates)
{
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64));
    memset(as_ptr(p), 0, 64);
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_OK(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
    ck_assert_uint_ne(id, 0);
    CU_OK(simcu_launch_fill(s, p, 1, 64, 0)); /* captured, not run */
    ck_assert_uint_eq(simcu_pending_work(), 0);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_uint_eq(simcu_capture_violations(), 1);
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_int_eq(simcu_launch_fill(s, p, 1, 64, 0),
                     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUgraph g = (CUgraph)&g;
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(g);
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert(all_bytes(p, 0, 64));
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(p));
}
END_TEST

START_TEST(test_capture_clean)
{
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    ck_assert_int_eq(cuStreamBeginCapture(0, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_ILLEGAL_STATE);
    CU_OK(simcu_launch_sleep(s, 10));
    CUdeviceptr p;
    CU_OK(cuMemAllocAsync(&p, 4096, s)); /* stream-ordered: allowed */
    CU_OK(cuMemFreeAsync(p, s));
    ck_assert_uint_eq(simcu_live_allocations(), 1); /* until capture ends */
    CUgraph g = NULL;
    CU_OK(cuStreamEndCapture(s, &g));
    ck_assert_ptr_nonnull(g);
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    CU_OK(cuGraphDestroy(g));
    ck_assert_int_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(simcu_capture_violations(), 0);
    CU_OK(cuStreamDestroy(s));
}
END_TEST

typedef struct thread_alloc {
    CUresult r;
    CUdeviceptr p;
} thread_alloc_t;

static void *alloc_in_thread(void *arg)
{
    thread_alloc_t *a = arg;
    cuCtxSetCurrent(ctx0);
    a->r = cuMemAlloc(&a->p, 4096);
    return NULL;
}

/* cuMemAlloc from another thread; the block is freed once capture ends. */
static CUresult alloc_from_other_thread(CUdeviceptr *p)
{
    thread_alloc_t a = {CUDA_ERROR_UNKNOWN, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_in_thread, &a), 0);
    pthread_join(t, NULL);
    *p = a.p;
    return a.r;
}

START_TEST(test_capture_unsafe_calls)
{
    CUstream s;
    CUgraph g;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, 0));
    /* Global mode: cuMemAlloc is a potentially unsafe call. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_uint_eq(simcu_capture_violations(), 1);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* ...unless this thread relaxes, as PyTorch does around cudaMalloc. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
    ck_assert_int_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_OK(cuMemAlloc(&p, 4096));
    /* cuMemFree synchronizes the device: never legal while capturing. */
    ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_uint_eq(simcu_capture_violations(), 2);
    CU_OK(cuMemFree(p));
    /* Another thread is bound by a global capture, not a thread-local one. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CU_OK(alloc_from_other_thread(&p));
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuMemFree(p));
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(alloc_from_other_thread(&p),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_uint_eq(simcu_capture_violations(), 3);
    CU_OK(cuStreamDestroy(s));
}
END_TEST

START_TEST(test_capture_device_sync_and_legacy)
{
    CUstream s, nb;
    CUgraph g;
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64));
    CU_OK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CU_OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_uint_eq(simcu_sync_count(), 0);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Legacy-stream work would depend on the capturing blocking stream. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuMemsetD8(p, 0, 64), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* A non-blocking stream does not tie the legacy stream. */
    CU_OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cuMemsetD8(p, 0, 64));
    CU_OK(cuStreamEndCapture(nb, &g));
    CU_OK(cuGraphDestroy(g));
    ck_assert_uint_eq(simcu_capture_violations(), 2);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuStreamDestroy(nb));
    CU_OK(cuMemFree(p));
}
END_TEST

static void *end_capture_in_thread(void *arg)
{
    CUgraph g;
    cuCtxSetCurrent(ctx0);
    *(CUresult *)arg = cuStreamEndCapture(*(CUstream *)arg, &g);
    return NULL;
}

START_TEST(test_capture_wrong_thread)
{
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    union {
        CUstream s;
        CUresult r;
    } arg = {.s = s};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, end_capture_in_thread, &arg), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(arg.r, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuStreamDestroy(s));
}
END_TEST

/* ================= the fake cudart ================= */

START_TEST(test_rt_malloc_free_info)
{
    void *p = NULL;
    unsigned long frees = simcu_call_count("cuMemFree_v2");
    RT_OK(cudaMalloc(&p, MiB));
    ck_assert(simcu_is_device_memory((CUdeviceptr)(uintptr_t)p, MiB));
    ck_assert_uint_eq(simcu_call_count("cuMemAlloc_v2"), 1);
    size_t free_b = 0, total = 0;
    RT_OK(cudaMemGetInfo(&free_b, &total));
    ck_assert_uint_eq(total, 1024 * MiB);
    ck_assert_uint_eq(free_b, 1023 * MiB);
    RT_OK(cudaFree(p));
    ck_assert_uint_eq(simcu_call_count("cuMemFree_v2"), frees + 1);
    ck_assert_uint_eq(simcu_sync_count(), 1); /* cudaFree synchronizes */
    RT_OK(cudaFree(NULL));
    ck_assert_uint_eq(simcu_sync_count(), 1);
    p = &p;
    RT_OK(cudaMalloc(&p, 0));
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(simcu_alloc_calls(), 1);
    int v = 0;
    RT_OK(cudaDriverGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    RT_OK(cudaRuntimeGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    int dev = -1;
    RT_OK(cudaGetDevice(&dev));
    ck_assert_int_eq(dev, 0);
    RT_OK(cudaGetDeviceCount(&v));
    ck_assert_int_eq(v, 1);
}
END_TEST

START_TEST(test_rt_errors)
{
    void *p = NULL;
    RT_OK(cudaGetLastError());
    ck_assert_int_eq(cudaMalloc(&p, (size_t)4 << 30), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
    RT_OK(cudaGetLastError()); /* not sticky */
    ck_assert_str_eq(cudaGetErrorName(cudaErrorMemoryAllocation),
                     "cudaErrorMemoryAllocation");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    ck_assert_str_eq(cudaGetErrorName((cudaError_t)12345), "unrecognized error code");
    int x;
    ck_assert_int_eq(cudaFree(&x), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaSetDevice(3), cudaErrorInvalidDevice);
    cudaStream_t s;
    RT_OK(cudaStreamCreate(&s));
    RT_OK(cudaMalloc(&p, 64));
    ck_assert_int_eq(simcu_launch_sleep(s, SLOW_US), CUDA_SUCCESS);
    ck_assert_int_eq(cudaStreamQuery(s), cudaErrorNotReady);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidDevice); /* NotReady not kept */
    RT_OK(cudaStreamSynchronize(s));
    RT_OK(cudaStreamDestroy(s));
    RT_OK(cudaFree(p));
    const char *name = NULL;
    CU_OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name));
    ck_assert_str_eq(name, "CUDA_ERROR_OUT_OF_MEMORY");
    ck_assert_int_eq(cuGetErrorString((CUresult)4242, &name), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

static const struct entry_case {
    const char *symbol;
    unsigned version;
    unsigned long long flags;
    enum cudaDriverEntryPointQueryResult status;
    const char *abi;
} entry_cases[] = {
    {"cuMemAlloc", 13000, cudaEnableDefault, cudaDriverEntryPointSuccess, "cuMemAlloc_v2"},
    {"cuMemAlloc", 3000, cudaEnableDefault, cudaDriverEntryPointSuccess, "cuMemAlloc"},
    {"cuMemCreate", 12000, cudaEnableDefault, cudaDriverEntryPointSuccess, "cuMemCreate"},
    {"cuMemCreate", 10000, cudaEnableDefault,
     cudaDriverEntryPointVersionNotSufficent, NULL},
    {"cuMemAllocAsync", 13000, cudaEnablePerThreadDefaultStream,
     cudaDriverEntryPointSuccess, "cuMemAllocAsync_ptsz"},
    {"cuMemAllocAsync", 13000, cudaEnableLegacyStream, cudaDriverEntryPointSuccess,
     "cuMemAllocAsync"},
    {"cuGetProcAddress", 13000, cudaEnableDefault, cudaDriverEntryPointSuccess,
     "cuGetProcAddress_v2"},
    {"cuDoesNotExist", 13000, cudaEnableDefault, cudaDriverEntryPointSymbolNotFound,
     NULL},
};

START_TEST(test_rt_driver_entry_points)
{
    const struct entry_case *c = &entry_cases[_i];
    void *fn = &fn;
    enum cudaDriverEntryPointQueryResult st = (enum cudaDriverEntryPointQueryResult)-1;
    RT_OK(cudaGetDriverEntryPointByVersion(c->symbol, &fn, c->version, c->flags, &st));
    ck_assert_int_eq(st, c->status);
    if (c->abi)
        ck_assert_ptr_eq(fn, driver_sym(c->abi));
    else
        ck_assert_ptr_null(fn);
    if (c->version == 13000) { /* the runtime's own version */
        void *again = NULL;
        RT_OK(cudaGetDriverEntryPoint(c->symbol, &again, c->flags, NULL));
        ck_assert_ptr_eq(again, fn);
    }
}
END_TEST

START_TEST(test_rt_entry_point_errors)
{
    void *fn;
    ck_assert_int_eq(cudaGetDriverEntryPoint("cuInit", &fn, 7, NULL),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuInit", &fn, 13010, 0, NULL),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetDriverEntryPoint(NULL, &fn, 0, NULL), cudaErrorInvalidValue);
}
END_TEST

START_TEST(test_rt_async_and_ptsz)
{
    cudaStream_t s;
    void *p = NULL, *q = NULL;
    RT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT_OK(cudaMallocAsync(&p, 4096, s));
    ck_assert_uint_eq(simcu_call_count("cuMemAllocAsync"), 1);
    CU_OK(simcu_launch_sleep(s, SLOW_US));
    RT_OK(cudaFreeAsync(p, s));
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    RT_OK(cudaStreamSynchronize(s));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    ck_assert_uint_eq(simcu_sync_count(), 0);
    /* The _ptsz entry points reach the driver's _ptsz functions. */
    RT_OK(cudaMallocAsync_ptsz(&q, 4096, 0));
    CU_OK(simcu_launch_sleep(CU_STREAM_PER_THREAD, SLOW_US));
    RT_OK(cudaFreeAsync_ptsz(q, 0));
    ck_assert_uint_eq(simcu_call_count("cuMemAllocAsync_ptsz"), 1);
    ck_assert_uint_eq(simcu_call_count("cuMemFreeAsync_ptsz"), 1);
    ck_assert_uint_eq(simcu_live_allocations(), 1);
    RT_OK(cudaStreamSynchronize(cudaStreamPerThread));
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    RT_OK(cudaStreamDestroy(s));
}
END_TEST

START_TEST(test_rt_streams_events_copies)
{
    char src[256], dst[256];
    for (int i = 0; i < 256; i++)
        src[i] = (char)i;
    void *d = NULL;
    RT_OK(cudaMalloc(&d, sizeof src));
    RT_OK(cudaMemcpy(d, src, sizeof src, cudaMemcpyHostToDevice));
    RT_OK(cudaMemcpy(dst, d, sizeof dst, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);
    RT_OK(cudaMemset(d, 0x42, sizeof src));
    RT_OK(cudaMemcpy(dst, d, sizeof dst, cudaMemcpyDefault));
    ck_assert_int_eq(dst[100], 0x42);
    ck_assert_int_eq(cudaMemcpy(dst, d, 1, (enum cudaMemcpyKind)9),
                     cudaErrorInvalidMemcpyDirection);

    cudaStream_t s, t;
    cudaEvent_t e;
    RT_OK(cudaStreamCreate(&s));
    RT_OK(cudaStreamCreate(&t));
    RT_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CU_OK(simcu_launch_fill(s, (CUdeviceptr)(uintptr_t)d, 0x24, sizeof src, SLOW_US));
    RT_OK(cudaEventRecord(e, s));
    ck_assert_int_eq(cudaEventQuery(e), cudaErrorNotReady);
    RT_OK(cudaStreamWaitEvent(t, e, 0));
    CU_OK(simcu_launch_check(t, (CUdeviceptr)(uintptr_t)d, 0x24, sizeof src, 0));
    RT_OK(cudaEventSynchronize(e));
    RT_OK(cudaDeviceSynchronize());
    ck_assert_uint_eq(simcu_check_failures(), 0);
    ck_assert_uint_eq(simcu_sync_count(), 1);
    RT_OK(cudaEventDestroy(e));

    enum cudaStreamCaptureStatus cs;
    cudaGraph_t g = NULL;
    RT_OK(cudaStreamBeginCapture(t, cudaStreamCaptureModeGlobal));
    RT_OK(cudaStreamIsCapturing(t, &cs));
    ck_assert_int_eq(cs, cudaStreamCaptureStatusActive);
    void *x = NULL;
    ck_assert_int_eq(cudaMalloc(&x, 64), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(t, &g), cudaErrorStreamCaptureInvalidated);
    RT_OK(cudaStreamBeginCapture(t, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    RT_OK(cudaMalloc(&x, 64));
    RT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    ck_assert_int_eq(mode, cudaStreamCaptureModeRelaxed);
    RT_OK(cudaStreamEndCapture(t, &g));
    RT_OK(cudaGraphDestroy(g));
    RT_OK(cudaFree(x));
    RT_OK(cudaStreamDestroy(s));
    RT_OK(cudaStreamDestroy(t));
    RT_OK(cudaFree(d));
}
END_TEST

START_TEST(test_rt_devices)
{
    scene("SIMCU_DEVICES", "2");
    int n = 0, dev = -1;
    RT_OK(cudaGetDeviceCount(&n));
    ck_assert_int_eq(n, 2);
    RT_OK(cudaSetDevice(1));
    RT_OK(cudaGetDevice(&dev));
    ck_assert_int_eq(dev, 1);
    void *p = NULL;
    RT_OK(cudaMalloc(&p, 4096));
    ck_assert_uint_eq(simcu_used_bytes(1), 4096);
    RT_OK(cudaFree(p));
    RT_OK(cudaSetDevice(0)); /* leave the thread as other tests expect */
}
END_TEST

static void check_no_driver_ref(const char *name, bool defined, bool func, void *arg)
{
    (void)func;
    (void)arg;
    if (defined)
        ck_assert_msg(strncmp(name, "cuda", 4) == 0, "libcudart leaks %s", name);
    else
        ck_assert_msg(strncmp(name, "cu", 2) != 0,
                      "libcudart references driver symbol %s", name);
}

/* The whole point: cudart reaches the driver only through
 * cuGetProcAddress_v2, never by linking to a driver symbol. */
START_TEST(test_rt_no_driver_symbols)
{
    elf_dynsyms(loaded_path("libcudart.so.13"), check_no_driver_ref, NULL);
}
END_TEST

/* ================= threads and fork ================= */

enum { THREADS = 6, ROUNDS = 150 };

static void *churn(void *arg)
{
    unsigned long *errors = arg;
    CUstream s;
    if (cuCtxSetCurrent(ctx0) || cuStreamCreate(&s, 0)) {
        (*errors)++;
        return NULL;
    }
    for (unsigned i = 0; i < ROUNDS; i++) {
        size_t size = 512 + (i * 4093u) % 65536;
        unsigned char v = (unsigned char)i;
        CUdeviceptr p;
        *errors += cuMemAllocAsync(&p, size, s) != CUDA_SUCCESS;
        *errors += simcu_launch_fill(s, p, v, size, i % 3 ? 0 : 200) != CUDA_SUCCESS;
        *errors += simcu_launch_check(s, p, v, size, 0) != CUDA_SUCCESS;
        *errors += (i % 2 ? cuMemFreeAsync(p, s) : cuMemFree(p)) != CUDA_SUCCESS;
    }
    *errors += cuStreamSynchronize(s) != CUDA_SUCCESS;
    *errors += cuStreamDestroy(s) != CUDA_SUCCESS;
    return NULL;
}

START_TEST(test_threads)
{
    pthread_t t[THREADS];
    unsigned long errors[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &errors[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_uint_eq(errors[i], 0);
    }
    simcu_wait_idle();
    ck_assert_uint_eq(simcu_check_failures(), 0);
    ck_assert_uint_eq(simcu_fault_count(), 0);
    ck_assert_uint_eq(simcu_live_allocations(), 0);
    ck_assert_uint_eq(simcu_used_bytes(0), 0);
    ck_assert_uint_eq(simcu_alloc_calls(), THREADS * ROUNDS);
    ck_assert_uint_eq(simcu_sync_count(), THREADS * ROUNDS / 2);
    ck_assert_int_eq(simcu_check_no_overlap(), 0);
}
END_TEST

START_TEST(test_fork)
{
    CUdeviceptr kept;
    CU_OK(cuMemAlloc(&kept, 64));
    /* Start the worker thread and let it settle before the fork: a thread
     * still starting up may hold the allocator's lock (ASan's, whose
     * start-up allocates), which a forked child would then wait on forever. */
    CU_OK(simcu_launch_sleep(0, 0));
    CU_OK(cuCtxSynchronize());
    CU_OK(simcu_launch_sleep(0, 1000));
    fflush(NULL); /* the child exits through exit() */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* No worker thread survived: the simulation must start another. */
        CUdeviceptr p;
        bool ok = cuMemAlloc(&p, 4096) == CUDA_SUCCESS &&
                  simcu_launch_fill(0, p, 7, 4096, 1000) == CUDA_SUCCESS &&
                  cuCtxSynchronize() == CUDA_SUCCESS && all_bytes(p, 7, 4096) &&
                  cuMemFree(p) == CUDA_SUCCESS && simcu_pending_work() == 0;
        /* exit(), so the driver's exit handler stops the new worker and
         * valgrind's leak check of the child stays clean; but not under
         * LeakSanitizer, whose exit check in a forked child of a threaded
         * process warns about the threads the child does not have. */
#ifdef __SANITIZE_ADDRESS__
        _exit(ok ? 0 : 1);
#else
        exit(ok ? 0 : 1);
#endif
    }
    int status = -1;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_OK(cuMemFree(kept));
}
END_TEST

/* ================= suite ================= */

static TCase *tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    return tc;
}

#define N_OF(a) ((int)(sizeof(a) / sizeof *(a)))

static Suite *sim_suite(void)
{
    Suite *s = suite_create("sim");

    TCase *tc = tcase("getproc");
    tcase_add_loop_test(tc, test_getproc_table, 0, N_OF(getproc_cases));
    tcase_add_test(tc, test_getproc_v1_and_distinct_ptsz);
    tcase_add_test(tc, test_getproc_bad_arguments);
    tcase_add_test(tc, test_getproc_every_row_reachable);
    tcase_add_test(tc, test_exports_match_table);
    suite_add_tcase(s, tc);

    tc = tcase("memory");
    tcase_add_test(tc, test_alloc_write_read_free);
    tcase_add_test(tc, test_free_errors);
    tcase_add_test(tc, test_capacity_and_oom);
    tcase_add_test(tc, test_mem_get_info);
    tcase_add_test(tc, test_external_memory);
    tcase_add_test(tc, test_fail_alloc_env);
    tcase_add_test(tc, test_fail_event_env);
    tcase_add_test(tc, test_fail_alloc_other_error);
    tcase_add_test(tc, test_needs_init_and_context);
    tcase_add_test(tc, test_devices_and_contexts);
    tcase_add_loop_test(tc, test_capacity_parsing, 0, N_OF(size_cases));
    tcase_add_test(tc, test_overlap_helpers);
#if defined(__x86_64__)
    tcase_add_test(tc, test_legacy_v1_alloc);
#endif
    suite_add_tcase(s, tc);

    tc = tcase("vmm");
    tcase_add_test(tc, test_vmm_data_survives_remap);
    tcase_add_test(tc, test_vmm_adjacent_chunks);
    tcase_add_test(tc, test_vmm_errors);
    tcase_add_test(tc, test_vmm_refused_reservation_keeps_the_table);
    tcase_add_test(tc, test_vmm_unsupported);
    suite_add_tcase(s, tc);

    tc = tcase("streams");
    tcase_add_test(tc, test_fill_lands_later);
    tcase_add_test(tc, test_stream_order);
    tcase_add_test(tc, test_streams_run_independently);
    tcase_add_test(tc, test_legacy_stream_ordering);
    tcase_add_test(tc, test_sync_copies);
    tcase_add_test(tc, test_per_thread_streams);
    suite_add_tcase(s, tc);

    tc = tcase("free");
    tcase_add_test(tc, test_free_waits_for_device);
    tcase_add_test(tc, test_free_async_in_stream_order);
    tcase_add_test(tc, test_free_async_ptsz);
    suite_add_tcase(s, tc);

    tc = tcase("events");
    tcase_add_test(tc, test_event_record_query_sync);
    tcase_add_test(tc, test_stream_wait_event);
    tcase_add_test(tc, test_event_elapsed);
    suite_add_tcase(s, tc);

    tc = tcase("capture");
    tcase_add_test(tc, test_capture_sync_invalidates);
    tcase_add_test(tc, test_capture_clean);
    tcase_add_test(tc, test_capture_unsafe_calls);
    tcase_add_test(tc, test_capture_device_sync_and_legacy);
    tcase_add_test(tc, test_capture_wrong_thread);
    suite_add_tcase(s, tc);

    tc = tcase("runtime");
    tcase_add_test(tc, test_rt_malloc_free_info);
    tcase_add_test(tc, test_rt_errors);
    tcase_add_loop_test(tc, test_rt_driver_entry_points, 0, N_OF(entry_cases));
    tcase_add_test(tc, test_rt_entry_point_errors);
    tcase_add_test(tc, test_rt_async_and_ptsz);
    tcase_add_test(tc, test_rt_streams_events_copies);
    tcase_add_test(tc, test_rt_devices);
    tcase_add_test(tc, test_rt_no_driver_symbols);
    suite_add_tcase(s, tc);

    tc = tcase("threads");
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_fork);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sim_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
