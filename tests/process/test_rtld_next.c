/* test_rtld_next.c: a program that calls dlsym(RTLD_NEXT, ...) itself, as
 * other interposers and ASan's start-up do, keeps working under the
 * library. Regression test: the library's dlsym hook used to pass bare
 * link maps to glibc's dlsym, which crashed on any object loaded at
 * start-up (found while running the suites under ASan, docs/reliability.md).
 * The test runs this same executable again under the library. */
#include <check.h>

#include "check_run.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* What the executable does when started with "child". */
static int child_lookup(void)
{
  void *p = dlsym(RTLD_NEXT, "puts");
  printf("puts %s\n", p == (void *)puts ? "found" : "missing");
  return p == (void *)puts ? 0 : 1;
}

START_TEST(rtld_next_lookup_survives_preload)
{
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_int_gt(n, 0);
  self[n] = '\0';
  const char *argv[] = {self, "child", NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "puts found"));
}
END_TEST

static Suite *rtld_next_suite(void)
{
  Suite *s = suite_create("rtld_next");
  TCase *tc = tcase_create("lookup");
  tcase_add_checked_fixture(tc, harness_setup, harness_teardown);
  tcase_add_test(tc, rtld_next_lookup_survives_preload);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "child") == 0)
    return child_lookup();
  return ol_run_suite(rtld_next_suite());
}
