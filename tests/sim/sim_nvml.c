/* sim_nvml.c - a test double of libnvidia-ml.so.1: the few NVML calls
 * oomlens makes at an out-of-memory to tell who holds a device's memory.
 *
 * Devices are found by the PCI bus id the fake driver gives them
 * (0000:XX:00.0, device XX - 0x10). The processes on every device are this
 * process, holding what the fake driver counts as used on that device less
 * what it holds for others (SIMCU_EXTERNAL, or simcu_set_external), and
 * those of SIMNVML_PROCS="pid:bytes[,pid:bytes...]" (K/M/G suffixes), so a
 * test can put another process's memory on the device. NVML's own ABI
 * (types and return codes) is written here from its documentation. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_FOUND = 6,
       NVML_ERROR_INSUFFICIENT_SIZE = 7 };
typedef struct nvml_device *nvmlDevice_t;
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define MAX_PROCS 16

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_t *infos);

nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *device)
{
    unsigned int domain, number, slot, function;
    if (!bus || !device || sscanf(bus, "%x:%x:%x.%x", &domain, &number, &slot, &function) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (number < 0x10 || number >= 0x10 + 8)
        return NVML_ERROR_NOT_FOUND;
    *device = (nvmlDevice_t)(uintptr_t)(number - 0x10 + 1);
    return NVML_SUCCESS;
}

static unsigned long long parse_bytes(const char *s, char **end)
{
    unsigned long long v = strtoull(s, end, 10);
    const char *units = "KMGT";
    const char *u = **end ? strchr(units, **end) : NULL;
    if (u) {
        v <<= 10 * (u - units + 1);
        (*end)++;
    }
    return v;
}

static int env_processes(nvmlProcessInfo_t *out, int max)
{
    const char *s = getenv("SIMNVML_PROCS");
    int n = 0;
    while (s && *s && n < max) {
        char *end;
        unsigned long pid = strtoul(s, &end, 10);
        if (*end != ':')
            break;
        out[n].pid = (unsigned int)pid;
        out[n].usedGpuMemory = parse_bytes(end + 1, &end);
        out[n].gpuInstanceId = out[n].computeInstanceId = 0xffffffffu;
        n++;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_t *infos)
{
    if (!device || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlProcessInfo_t all[MAX_PROCS];
    int n = 0, index = (int)(uintptr_t)device - 1;
    size_t (*used)(int) = (size_t (*)(int))dlsym(RTLD_DEFAULT, "simcu_used_bytes");
    /* the driver's figure now: a test may set it while the job runs */
    size_t (*held)(int) = (size_t (*)(int))dlsym(RTLD_DEFAULT, "simcu_external_bytes");
    const char *external = getenv("SIMCU_EXTERNAL");
    char *end;
    unsigned long long others = held ? held(index) : external ? parse_bytes(external, &end) : 0;
    unsigned long long ours = used ? used(index) : 0;
    all[n++] = (nvmlProcessInfo_t){(unsigned int)getpid(), ours > others ? ours - others : 0,
                                   0xffffffffu, 0xffffffffu};
    n += env_processes(all + n, MAX_PROCS - n);
    if (*count < (unsigned int)n || !infos) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(infos, all, (size_t)n * sizeof *all);
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}
