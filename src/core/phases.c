/* phases.c: iterations found in the allocation stream itself.
 *
 * Training repeats: allocated memory climbs through a forward pass, falls
 * through the backward pass and the optimizer step, and comes back to about
 * what outlives the iteration (weights, gradients, optimizer state). A
 * zigzag detector with hysteresis turns the stream of allocated totals into
 * peaks and valleys; each valley ends an iteration and is that iteration's
 * persistent memory. No framework hook: the same code reads a live job and
 * a recorded trace. The hysteresis is a share of the highest total seen, so
 * small churn inside a layer never counts as an iteration. */
#include <string.h>

#include "core.h"

#define SWING_SHARE 10 /* a swing must exceed 1/10 of the highest total seen */
#define MIN_SWING (1ll << 20)

void ol_phases_init(ol_phases_t *p)
{
  memset(p, 0, sizeof *p);
}

static int64_t threshold(const ol_phases_t *p)
{
  int64_t t = p->highest / SWING_SHARE;
  return t > MIN_SWING ? t : MIN_SWING;
}

static void end_iteration(ol_phases_t *p, int64_t valley)
{
  p->valleys[p->iterations % OL_PHASE_VALLEYS] = valley;
  p->iterations++;
}

void ol_phases_note(ol_phases_t *p, int64_t allocated)
{
  if (allocated > p->highest)
    p->highest = allocated;
  if (!p->falling) {
    if (allocated > p->extreme)
      p->extreme = allocated;
    else if (allocated < p->extreme - threshold(p)) {
      p->falling = true; /* a peak is behind us */
      p->extreme = allocated;
    }
  } else {
    if (allocated < p->extreme)
      p->extreme = allocated;
    else if (allocated > p->extreme + threshold(p)) {
      end_iteration(p, p->extreme); /* a valley is behind us */
      p->falling = false;
      p->extreme = allocated;
    }
  }
}

/* What outlives iterations: the last valley, or, while falling towards the
 * next one, the lowest point so far if that is lower. 0 before any valley:
 * then nothing has been seen to outlive anything. */
int64_t ol_phases_persistent(const ol_phases_t *p)
{
  if (p->iterations == 0)
    return 0;
  int64_t last = p->valleys[(p->iterations - 1) % OL_PHASE_VALLEYS];
  return p->falling && p->extreme < last ? p->extreme : last;
}

/* Average growth of the valleys per iteration over the last ones kept. */
int64_t ol_phases_growth(const ol_phases_t *p)
{
  uint64_t n = p->iterations < OL_PHASE_VALLEYS ? p->iterations : OL_PHASE_VALLEYS;
  if (n < 3)
    return 0;
  int64_t newest = p->valleys[(p->iterations - 1) % OL_PHASE_VALLEYS];
  int64_t oldest = p->valleys[(p->iterations - n) % OL_PHASE_VALLEYS];
  return (newest - oldest) / (int64_t)(n - 1);
}
