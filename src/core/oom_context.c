/* oom_context.c: a trace's oom_context line (core.h, "oom_context.c").
 *
 * Owns the words of `oom_context,DEVICE,WORDS` (docs/trace-format.md): what
 * an out-of-memory's record had at the live job that no event carries, so
 * that replay rebuilds the record the job classified (the account's
 * figures from the events, these from the line) and says whether it
 * agrees with the class the job gave. The library writes them
 * (lib/tracefile.c) and the trace reader parses them (analyze/trace_csv.c)
 * from this one list. Words are key=value, separated by one space; a
 * reader skips keys it does not know, so words can be added later without
 * a new version. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

void ol_oom_record_init(ol_oom_record_t *r, uint64_t request)
{
  memset(r, 0, sizeof *r);
  r->request = request;
  r->device_free = -1;
  r->free_reserved = -1;
  r->largest_free_block = -1;
  r->self_device_bytes = -1;
  r->before_first_free = -1;
  r->iteration_need = -1;
  r->first_persistent = -1;
  r->grower.id = -1;
  r->grower_role = OL_ROLE_unknown;
  r->grower_reading = OL_GROWER_KEPT;
  r->held_since_last = -1;
  r->past_repeat = (ol_recent_more_t){.held = -1};
  r->since_last_by_calls = false;
  r->since_last_by_repeat = false;
  r->step_repeat_held = -1;
  r->grower_per_step = false;
  r->framework_allocated = -1;
}

/* The numeric words: key, and where the record keeps it. */
typedef struct number_key {
  const char *key;
  size_t offset;
  bool is_unsigned;
} number_key_t;

#define SIGNED_KEY(key, field) {key, offsetof(ol_oom_record_t, field), false}
#define UNSIGNED_KEY(key, field) {key, offsetof(ol_oom_record_t, field), true}
static const number_key_t numbers[] = {
  UNSIGNED_KEY("request", request),
  UNSIGNED_KEY("capacity", capacity),
  SIGNED_KEY("free", device_free),
  SIGNED_KEY("external", external),
  SIGNED_KEY("free_reserved", free_reserved),
  SIGNED_KEY("largest_free_block", largest_free_block),
  SIGNED_KEY("self_device_bytes", self_device_bytes),
  SIGNED_KEY("batch", batch_given), /* the user's: the reader's own restarts decide (ol_oom_set_batch) */
  SIGNED_KEY("framework_limit", framework_limit),
  SIGNED_KEY("framework_allocated", framework_allocated),
  SIGNED_KEY("vmm_reserved", vmm_reserved),
};
#undef SIGNED_KEY
#undef UNSIGNED_KEY
#define NUMBER_KEYS (sizeof numbers / sizeof *numbers)

static int64_t *signed_at(ol_oom_record_t *r, const number_key_t *k)
{
  return (int64_t *)(void *)((char *)r + k->offset);
}

static uint64_t *unsigned_at(ol_oom_record_t *r, const number_key_t *k)
{
  return (uint64_t *)(void *)((char *)r + k->offset);
}

/* A process name as one word: what is not a letter, digit or . _ + - is '_'. */
static void put_name(ol_buf_t *out, const char *name)
{
  char word[sizeof ((ol_oom_record_t *)0)->others[0].name];
  size_t n = 0;
  for (; name[n] && n < sizeof word - 1; n++) {
    char c = name[n];
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '+' || c == '-';
    word[n] = plain ? c : '_';
  }
  word[n] = '\0';
  ol_buf_printf(out, "%s", word);
}

void ol_oom_context_text(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t cause)
{
  ol_oom_record_t copy = *r; /* read through the same table the parser writes through */
  for (size_t i = 0; i < NUMBER_KEYS; i++) {
    if (numbers[i].is_unsigned)
      ol_buf_printf(out, "%s%s=%" PRIu64, i ? " " : "", numbers[i].key,
                    *unsigned_at(&copy, &numbers[i]));
    else
      ol_buf_printf(out, "%s%s=%" PRId64, i ? " " : "", numbers[i].key,
                    *signed_at(&copy, &numbers[i]));
  }
  ol_buf_printf(out, " segments_only=%d managed=%d", r->segments_only, r->managed);
  if (r->no_block_held)
    ol_buf_printf(out, " no_block_held=1");
  if (r->vmm_not_framework)
    ol_buf_printf(out, " vmm_not_framework=1");
  if (r->other_count > 0) {
    ol_buf_printf(out, " others=");
    for (int i = 0; i < r->other_count && i < OL_OOM_SITES; i++) {
      ol_buf_printf(out, "%s%" PRIu32 ":%" PRId64 ":", i ? ";" : "", r->others[i].pid,
                    r->others[i].bytes);
      put_name(out, r->others[i].name);
    }
  }
  if (cause < OL_OOM_CLASS_COUNT)
    ol_buf_printf(out, " class=%s", ol_oom_class_name(cause));
}

/* ---- reading ------------------------------------------------------------- */

typedef struct span {
  const char *p;
  size_t n;
} span_t;

static bool span_is(span_t s, const char *text)
{
  return s.n == strlen(text) && memcmp(s.p, text, s.n) == 0;
}

/* Decimal digits alone, no overflow. */
static bool parse_unsigned(span_t s, uint64_t *out)
{
  uint64_t v = 0;
  if (s.n == 0 || s.n > 20)
    return false;
  for (size_t i = 0; i < s.n; i++) {
    unsigned d = (unsigned)((unsigned char)s.p[i] - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

/* The same with a '-' allowed first, within int64_t. */
static bool parse_signed(span_t s, int64_t *out)
{
  bool negative = s.n > 1 && s.p[0] == '-';
  span_t digits = {s.p + negative, s.n - negative};
  uint64_t v;
  if (!parse_unsigned(digits, &v) || v > (uint64_t)INT64_MAX + negative)
    return false;
  *out = negative ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* The span up to the first sep, taken off *rest. */
static span_t take_until(span_t *rest, char sep)
{
  const char *at = memchr(rest->p, sep, rest->n);
  size_t n = at ? (size_t)(at - rest->p) : rest->n;
  span_t head = {rest->p, n};
  rest->p += at ? n + 1 : n;
  rest->n -= at ? n + 1 : n;
  return head;
}

/* "PID:BYTES:NAME;..." (at most OL_OOM_SITES kept). */
static bool parse_others(span_t value, ol_oom_record_t *r)
{
  r->other_count = 0;
  while (value.n > 0) {
    span_t one = take_until(&value, ';'), pid = take_until(&one, ':'),
           bytes = take_until(&one, ':');
    uint64_t p;
    int64_t b;
    if (!parse_unsigned(pid, &p) || p > UINT32_MAX || !parse_signed(bytes, &b))
      return false;
    if (r->other_count == OL_OOM_SITES)
      continue;
    int i = r->other_count++;
    r->others[i].pid = (uint32_t)p;
    r->others[i].bytes = b;
    size_t n = one.n < sizeof r->others[i].name - 1 ? one.n : sizeof r->others[i].name - 1;
    memcpy(r->others[i].name, one.p, n);
    r->others[i].name[n] = '\0';
  }
  return true;
}

static bool parse_class(span_t value, ol_oom_class_t *cause)
{
  for (int c = 0; c < OL_OOM_CLASS_COUNT; c++) {
    if (span_is(value, ol_oom_class_name((ol_oom_class_t)c))) {
      *cause = (ol_oom_class_t)c;
      return true;
    }
  }
  return false;
}

static bool parse_flag(span_t value, bool *out)
{
  if (!span_is(value, "0") && !span_is(value, "1"))
    return false;
  *out = value.p[0] == '1';
  return true;
}

/* One key=value word; false: a known key with a bad value. */
static bool parse_word(span_t key, span_t value, ol_oom_record_t *r, ol_oom_class_t *cause)
{
  for (size_t i = 0; i < NUMBER_KEYS; i++) {
    if (!span_is(key, numbers[i].key))
      continue;
    if (numbers[i].is_unsigned)
      return parse_unsigned(value, unsigned_at(r, &numbers[i]));
    return parse_signed(value, signed_at(r, &numbers[i]));
  }
  if (span_is(key, "segments_only"))
    return parse_flag(value, &r->segments_only);
  if (span_is(key, "managed"))
    return parse_flag(value, &r->managed);
  if (span_is(key, "no_block_held"))
    return parse_flag(value, &r->no_block_held);
  if (span_is(key, "vmm_not_framework"))
    return parse_flag(value, &r->vmm_not_framework);
  if (span_is(key, "others"))
    return parse_others(value, r);
  if (span_is(key, "class"))
    return parse_class(value, cause);
  return true; /* a key of a later version: skipped */
}

bool ol_oom_context_parse(const char *text, size_t len, ol_oom_record_t *r, ol_oom_class_t *cause)
{
  ol_oom_record_init(r, 0);
  *cause = OL_OOM_CLASS_COUNT;
  span_t rest = {text, len};
  while (rest.n > 0) {
    span_t word = take_until(&rest, ' ');
    if (word.n == 0)
      continue;
    span_t key = take_until(&word, '=');
    if (!parse_word(key, word, r, cause))
      return false;
  }
  return true;
}

void ol_oom_context_apply(ol_oom_record_t *r, const ol_oom_record_t *context)
{
  r->capacity = context->capacity;
  r->device_free = context->device_free;
  r->external = context->external;
  r->free_reserved = context->free_reserved;
  r->largest_free_block = context->largest_free_block;
  r->self_device_bytes = context->self_device_bytes;
  r->framework_limit = context->framework_limit;
  r->framework_allocated = context->framework_allocated;
  r->no_block_held = context->no_block_held;
  r->vmm_reserved = context->vmm_reserved;
  r->vmm_not_framework = context->vmm_not_framework;
  r->segments_only = context->segments_only;
  r->managed = context->managed;
  if (context->batch_given > 0) /* the job's OOMLENS_BATCH; replay's --batch wins (replay.c) */
    ol_oom_set_batch(r, context->batch_given);
  r->other_count = context->other_count;
  memcpy(r->others, context->others, sizeof r->others);
}
