/* check_run.h: the one main() every Check test executable shares, and the
 * scratch folders its tests write in. */
#ifndef OL_CHECK_RUN_H
#define OL_CHECK_RUN_H

#include <check.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every test executable works in one folder of its own under TMPDIR (or
 * /tmp), made before its suite runs and removed, whatever is in it, once
 * the suite has run: by the runner's own process, so a test that fails or
 * dies (Check then skips its checked teardown) leaves nothing behind. Its
 * path reaches every test, the harness and the programs they start through
 * the environment. */
#define OL_TEST_SCRATCH_ENV "OL_TEST_SCRATCH"

static inline int ol_test_remove_entry(const char *path, const struct stat *st, int flag,
                                       struct FTW *ftw)
{
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* path and all below it; false if anything stayed. */
static inline bool ol_test_remove_tree(const char *path)
{
  return nftw(path, ol_test_remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

/* Room for a scratch folder's path (the root is short: TMPDIR or /tmp). */
#define OL_TEST_DIR_MAX 256

/* A fresh folder NAME-XXXXXX in the executable's scratch folder. */
static inline void ol_test_make_dir(char *dir, size_t cap, const char *name)
{
  const char *root = getenv(OL_TEST_SCRATCH_ENV);
  snprintf(dir, cap, "%s/%s-XXXXXX", root && *root ? root : "/tmp", name);
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* A whole file, NUL-terminated (len: its size, may be NULL); the caller
 * frees it. Fails the test when the file cannot be read. */
static inline char *ol_test_read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *data = malloc((size_t)size + 1);
  ck_assert_ptr_nonnull(data);
  ck_assert_uint_eq(fread(data, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  data[size] = '\0';
  if (len)
    *len = (size_t)size;
  return data;
}

/* Writes text as the whole of path; fails the test when it cannot. */
static inline void ol_test_write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  ck_assert_msg(f, "cannot create %s", path);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

/* path holds exactly want. */
static inline void ol_test_assert_file_text(const char *path, const char *want)
{
  char *got = ol_test_read_file(path, NULL);
  ck_assert_msg(strcmp(got, want) == 0, "%s holds:\n%s", path, got);
  free(got);
}

/* Runs the suite, prints Check's summary, and turns failures into the exit
 * status meson reads. */
static inline int ol_run_suite(Suite *suite)
{
  const char *tmp = getenv("TMPDIR");
  char root[PATH_MAX];
  snprintf(root, sizeof root, "%s/oomlens-tests-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) {
    perror("cannot make the tests' scratch folder");
    return EXIT_FAILURE;
  }
  setenv(OL_TEST_SCRATCH_ENV, root, 1);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  if (!ol_test_remove_tree(root)) {
    fprintf(stderr, "could not remove the tests' scratch folder %s\n", root);
    failed++;
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
