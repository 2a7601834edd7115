/* progress.h: percent done on a terminal (replay, export). */
#ifndef OL_PROGRESS_H
#define OL_PROGRESS_H

#include <stdbool.h>

typedef struct ol_progress {
  const char *what;
  bool on; /* stderr is a terminal */
  int shown;
  double last;
} ol_progress_t;

void ol_progress_start(ol_progress_t *p, const char *what);
void ol_progress_show(double fraction, void *p); /* fits ol_export_options_t.progress */
void ol_progress_end(ol_progress_t *p);

#endif
