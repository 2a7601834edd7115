/* progress.c: a one-line progress display for long commands (replay,
 * export) on a terminal: "oomlens export: 42%" rewritten in place on
 * stderr, at most a few times a second, and wiped at the end. Nothing at
 * all when stderr is not a terminal, so logs and pipes stay clean. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "progress.h"

static double seconds_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ol_progress_start(ol_progress_t *p, const char *what)
{
  p->what = what;
  p->on = isatty(STDERR_FILENO) == 1;
  p->shown = -1;
  p->last = 0;
}

void ol_progress_show(double fraction, void *arg)
{
  ol_progress_t *p = arg;
  if (!p->on)
    return;
  int percent = (int)(fraction * 100);
  double now = seconds_now();
  if (percent == p->shown || (now - p->last < 0.2 && percent < 100))
    return;
  p->shown = percent;
  p->last = now;
  fprintf(stderr, "\r%s: %3d%%", p->what, percent);
  fflush(stderr);
}

void ol_progress_end(ol_progress_t *p)
{
  if (p->on && p->shown >= 0)
    fprintf(stderr, "\r%*s\r", (int)strlen(p->what) + 6, "");
}
