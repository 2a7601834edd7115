/* test_sim_nodriver.c - the fake cudart on a machine with no libcuda.so.1:
 * its dlopen finds nothing, and every call that needs the driver says
 * cudaErrorInsufficientDriver, as the real cudart does. The executable
 * finds the fake cudart through its RUNPATH; the fake driver lies next to
 * it but cudart has no RUNPATH, so only LD_LIBRARY_PATH could reveal it.
 */
/* cudaGetDriverEntryPoint is deprecated, and tested on purpose: PyTorch
 * and the interposer still use it. */
#define CUDA_ENABLE_DEPRECATED 1
#include <check.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cudart's dlopen found a libcuda.so.1 after all (a real driver is
 * installed here): then there is nothing this test can check. */
static bool driver_loaded(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        dlclose(h);
        fprintf(stderr, "a libcuda.so.1 is installed: nothing to check\n");
    }
    return h != NULL;
}

START_TEST(test_no_driver)
{
    void *p = &p;
    cudaError_t e = cudaMalloc(&p, 16);
    if (driver_loaded())
        return;
    ck_assert_int_eq(e, cudaErrorInsufficientDriver);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInsufficientDriver);
    ck_assert_int_eq(cudaFree(NULL), cudaErrorInsufficientDriver);
    int n = -1;
    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
    ck_assert_int_eq(n, 0);
    int v = -1;
    ck_assert_int_eq(cudaDriverGetVersion(&v), cudaSuccess);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(cudaRuntimeGetVersion(&v), cudaSuccess);
    ck_assert_int_eq(v, 13000);
    void *fn = NULL;
    ck_assert_int_eq(cudaGetDriverEntryPoint("cuInit", &fn, cudaEnableDefault, NULL),
                     cudaErrorInsufficientDriver);
    size_t f, t;
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaErrorInsufficientDriver);
}
END_TEST

/* The LD_LIBRARY_PATH `path` without its folders that hold a libcuda.so.1;
 * NULL if none did. */
static char *without_driver_dirs(const char *path)
{
    char *out = calloc(1, strlen(path) + 1), *copy = strdup(path), *save = NULL;
    bool dropped = false;
    for (char *dir = strtok_r(copy, ":", &save); out && dir;
         dir = strtok_r(NULL, ":", &save)) {
        char file[4096];
        snprintf(file, sizeof file, "%s/libcuda.so.1", dir);
        if (access(file, F_OK) == 0) {
            dropped = true;
            continue;
        }
        if (*out)
            strcat(out, ":");
        strcat(out, dir);
    }
    free(copy);
    if (!dropped) {
        free(out);
        return NULL;
    }
    return out;
}

int main(int argc, char **argv)
{
    (void)argc;
    /* meson test puts the build folder, fake driver included, on
     * LD_LIBRARY_PATH, and ld.so reads it only at start-up: start again
     * without that folder. */
    const char *path = getenv("LD_LIBRARY_PATH");
    char *clean = path ? without_driver_dirs(path) : NULL;
    if (clean) {
        setenv("LD_LIBRARY_PATH", clean, 1);
        free(clean);
        execv(argv[0], argv);
        perror("execv");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("sim-nodriver");
    TCase *tc = tcase_create("nodriver");
    tcase_add_test(tc, test_no_driver);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
