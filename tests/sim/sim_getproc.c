/* sim_getproc.c - cuGetProcAddress, as the real driver answers it.
 *
 * Callers (cudart, PyTorch, the interposer under test) ask for a BASE name
 * ("cuMemAlloc") and the CUDA version their code was built for; the driver
 * returns the newest ABI of that name no newer than the version
 * (cuMemAlloc_v2 for >= 3020, the legacy cuMemAlloc below), and the _ptsz
 * variant when asked for per-thread default stream semantics. One table,
 * generated from SIM_ABI_TABLE, holds every exported driver function.
 *
 * The library is linked with -Bsymbolic, so the addresses below are this
 * library's own functions even when an LD_PRELOADed interposer defines the
 * same names: a real driver hands out its own code, and an interposer that
 * forwards through cuGetProcAddress must not get itself back.
 */
#include "sim_internal.h"

#include <string.h>

typedef void (*sim_fn)(void);

typedef struct proc {
    const char *abi, *base;
    int version;
    bool ptds;
    sim_fn fn;
} proc_t;

static const proc_t procs[] = {
#define SIM_PROC_ROW(abi, base, ver, ptds) {#abi, base, ver, ptds, (sim_fn)abi},
    SIM_ABI_TABLE(SIM_PROC_ROW)
#undef SIM_PROC_ROW
};

_Static_assert(sizeof procs / sizeof *procs == SIM_FN_COUNT,
               "one row per exported function");
_Static_assert(sizeof(sim_fn) == sizeof(void *),
               "function pointers travel as void *");

/* Newest row of that base name usable at cudaVersion; on a tie the _ptsz
 * row wins when per-thread semantics were asked for. */
static const proc_t *lookup(const char *symbol, int cudaVersion, bool ptds,
                            bool *name_known)
{
    const proc_t *best = NULL;
    *name_known = false;
    for (size_t i = 0; i < SIM_FN_COUNT; i++) {
        const proc_t *p = &procs[i];
        if (strcmp(p->base, symbol) != 0)
            continue;
        *name_known = true;
        if (p->version > cudaVersion || (p->ptds && !ptds))
            continue;
        if (!best || p->version > best->version ||
            (p->version == best->version && p->ptds))
            best = p;
    }
    return best;
}

static CUresult getproc(const char *symbol, void **pfn, int cudaVersion,
                        cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (pfn)
        *pfn = NULL;
    if (!symbol || !pfn || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    int driver = sim.driver_version;
    sim_unlock();
    /* Documented: asking for a newer CUDA than the driver is an error. */
    if (cudaVersion > driver)
        return CUDA_ERROR_INVALID_VALUE;
    bool known_name;
    bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const proc_t *p = lookup(symbol, cudaVersion, ptds, &known_name);
    if (!p) {
        if (status)
            *status = known_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    /* Copy rather than cast: ISO C has no function-to-object conversion. */
    memcpy(pfn, &p->fn, sizeof *pfn);
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn,
                                     int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_CALLED(cuGetProcAddress_v2);
    return getproc(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                  int cudaVersion, cuuint64_t flags)
{
    SIM_CALLED(cuGetProcAddress);
    return getproc(symbol, pfn, cudaVersion, flags, NULL);
}

int simcu_proc_entry(size_t i, const char **abi_name, const char **base_name,
                     int *version, int *per_thread)
{
    if (i >= SIM_FN_COUNT)
        return -1;
    if (abi_name)
        *abi_name = procs[i].abi;
    if (base_name)
        *base_name = procs[i].base;
    if (version)
        *version = procs[i].version;
    if (per_thread)
        *per_thread = procs[i].ptds;
    return 0;
}

unsigned long simcu_call_count(const char *abi_name)
{
    for (size_t i = 0; abi_name && i < SIM_FN_COUNT; i++)
        if (strcmp(procs[i].abi, abi_name) == 0)
            return sim_call_count_at((int)i);
    return 0;
}
