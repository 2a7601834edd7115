/* trace_actions.c: the names of trace actions, shared by the trace reader
 * (src/analyze) and the trace writer (the preloaded library, which must not
 * need zlib). */
#include <string.h>

#include "core.h"

/* Names with their lengths, so that matching compares lengths first. */
#define ACTION(name) {name, sizeof name - 1}
static const struct {
  const char *name;
  size_t len;
} actions[OL_TRACE_ACTION_COUNT] = {
  [OL_TRACE_ALLOC] = ACTION("alloc"),
  [OL_TRACE_FREE_REQUESTED] = ACTION("free_requested"),
  [OL_TRACE_FREE_COMPLETED] = ACTION("free_completed"),
  [OL_TRACE_SEGMENT_ALLOC] = ACTION("segment_alloc"),
  [OL_TRACE_SEGMENT_FREE] = ACTION("segment_free"),
  [OL_TRACE_SEGMENT_MAP] = ACTION("segment_map"),
  [OL_TRACE_SEGMENT_UNMAP] = ACTION("segment_unmap"),
  [OL_TRACE_OOM] = ACTION("oom"),
  [OL_TRACE_OOM_CONTEXT] = ACTION("oom_context"), /* a line of its own, never an event's action */
  [OL_TRACE_POOL_HELD] = ACTION("pool_held"),   /* so are these two */
  [OL_TRACE_POOL_FREED] = ACTION("pool_freed"),
};
#undef ACTION

bool ol_trace_action_is_line(ol_trace_action_t action)
{
  return action == OL_TRACE_OOM_CONTEXT || action == OL_TRACE_POOL_HELD ||
         action == OL_TRACE_POOL_FREED;
}

const char *ol_trace_action_name(ol_trace_action_t action)
{
  return (unsigned)action < OL_TRACE_ACTION_COUNT ? actions[action].name : "?";
}

bool ol_trace_action_parse(const char *p, size_t n, ol_trace_action_t *out)
{
  for (int a = 0; a < OL_TRACE_ACTION_COUNT; a++) {
    if (actions[a].len == n && memcmp(actions[a].name, p, n) == 0) {
      *out = (ol_trace_action_t)a;
      return true;
    }
  }
  return false;
}
