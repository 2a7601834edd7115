/* check_run.h: the one main() every Check test executable shares. */
#ifndef OL_CHECK_RUN_H
#define OL_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* Runs the suite, prints Check's summary, and turns failures into the exit
 * status meson reads. */
static inline int ol_run_suite(Suite *suite)
{
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
