/* throw_prog.c: loads libthrowing.so (throwing.cc, beside this program)
 * with RTLD_LOCAL, as Python loads PyTorch, so that the C++ runtime is
 * not in the global scope, and runs its scenario.
 *
 * Scenario pieces loads libc10_cuda.so (fake_c10.c, beside this program)
 * first, so that PyTorch looks loaded, its cache on.
 *
 * usage: throw_prog fraction|device|pieces|other */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (argc != 2 || n <= 0) {
    fprintf(stderr, "usage: throw_prog fraction|device|pieces|other\n");
    return 2;
  }
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (strcmp(argv[1], "pieces") == 0) {
    strcpy(slash ? slash + 1 : path, "libc10_cuda.so");
    if (!dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      fprintf(stderr, "throw_prog: %s\n", dlerror());
      return 2;
    }
  }
  strcpy(slash ? slash + 1 : path, "libthrowing.so");
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int (*run)(const char *) = lib ? (int (*)(const char *))dlsym(lib, "throwing_main") : NULL;
  if (!run) {
    fprintf(stderr, "throw_prog: %s\n", dlerror());
    return 2;
  }
  return run(argv[1]);
}
