/* run_corpus.c: a main() for the libFuzzer targets of this folder, so that
 * the normal build (gcc, no libFuzzer) runs each target over its seed
 * corpus as a test, and the sanitizer pass of scripts/test.sh does the same
 * under ASan and UBSan. Arguments: files, or folders whose files are read.
 * Each input gets a buffer of exactly its size, so that reading past it is
 * seen by ASan and valgrind as it would be under libFuzzer. */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
    fclose(f);
    return 1;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *data = malloc(size ? size : 1);
  int bad = !data || fread(data, 1, size, f) != size;
  fclose(f);
  if (!bad)
    LLVMFuzzerTestOneInput(data, size);
  free(data);
  return bad;
}

static int run_path(const char *path, int *count)
{
  DIR *d = opendir(path);
  if (!d) {
    (*count)++;
    return run_file(path);
  }
  int bad = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    (*count)++;
    bad |= run_file(sub);
  }
  closedir(d);
  return bad;
}

int main(int argc, char **argv)
{
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  int bad = 0, count = 0;
  for (int i = 1; i < argc; i++)
    bad |= run_path(argv[i], &count);
  printf("%d inputs\n", count);
  return bad || count == 0;
}
