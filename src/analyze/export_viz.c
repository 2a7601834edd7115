/* export_viz.c: PyTorch's memory_viz snapshot, written as a pickle
 * (protocol 2) from C, the dict torch.cuda.memory._snapshot() returns:
 *   {"segments": [segment, ...], "device_traces": [[entry, ...] per device]}
 * segment: device, address, total_size, stream, segment_type, allocated_size,
 *   active_size, requested_size, segment_pool_id, is_expandable, frames,
 *   blocks: [{address, size, requested_size, state, frames}]
 * entry: action, addr, size, stream, time_us, frames (device_free for oom)
 * frame: {filename, line, name}, innermost first as PyTorch lists them.
 *
 * Only opcodes PyTorch's web viewer reads are written (its unpickler in
 * torch/utils/viz/MemoryViz.js, the page behind pytorch.org/memory_viz,
 * knows no POP or DUP; tests/unit/test_export.c checks every export against
 * its list). So nothing is pushed only to be memoized: a repeated string
 * (keys, actions) or a call site's frames list is memoized where it is
 * first used and fetched from the memo after that.
 *
 * The trace entries stream out as they are read, so devices may interleave
 * and nothing is held in memory: each device's list is made once, kept in
 * the memo, and each entry is appended to it by fetching it back and
 * storing it in the snapshot under "device_traces" for the moment (the
 * key, GET, the entry, APPEND, SETITEM): that leaves the stack as it was
 * without a POP, and the real list of lists replaces it at the end. An
 * out-of-memory entry waits for its device's next line, which may be its
 * oom_context with the device's free memory as the job saw it (the
 * library writes that line before anything else of the device). The
 * segments are the state at the end of the trace, written last; a run of
 * contiguous mapped pages (expandable segments, our pool under --manage)
 * is one segment, as in PyTorch's own snapshot.
 * time_us is the wall clock (the trace's start_unix_us plus the event's
 * offset; a PyTorch CSV's times are already the wall clock). */
#include "export_int.h"
#include "core.h"

#include <stdlib.h>
#include <string.h>

/* Pickle opcodes used here (Python's pickletools names them). */
enum {
  OP_PROTO = 0x80, OP_STOP = '.', OP_MARK = '(',
  OP_EMPTY_DICT = '}', OP_EMPTY_LIST = ']', OP_APPEND = 'a', OP_APPENDS = 'e',
  OP_SETITEMS = 'u', OP_SETITEM = 's', OP_TUPLE2 = 0x86, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
  OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG1 = 0x8a, OP_BINUNICODE = 'X',
  OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
};

#define KEYS(X)                                                                  \
  X(action) X(addr) X(size) X(stream) X(time_us) X(frames) X(device_free)        \
  X(filename) X(line) X(name) X(segments) X(device_traces) X(device) X(address)  \
  X(total_size) X(allocated_size) X(active_size) X(requested_size)               \
  X(segment_type) X(segment_pool_id) X(is_expandable) X(blocks) X(state)         \
  X(large) X(small) X(active_allocated) X(inactive)

enum {
#define KEY_ENUM(name) K_##name,
  KEYS(KEY_ENUM)
#undef KEY_ENUM
  KEY_COUNT
};

static const char *const key_text[KEY_COUNT] = {
#define KEY_TEXT(name) #name,
  KEYS(KEY_TEXT)
#undef KEY_TEXT
};

struct ex_viz {
  FILE *out;
  uint32_t *site_memo;     /* by site id: memo slot of its frames list, 0 none yet */
  size_t site_memo_cap;
  bool failed;             /* host memory ran out */
  uint32_t next_memo;
  uint32_t key_memo[KEY_COUNT];
  uint32_t action_memo[OL_TRACE_ACTION_COUNT];
  uint32_t device_list[OL_TRACE_MAX_DEVICES]; /* 0: none yet */
  int devices;                                /* highest seen + 1 */
  /* Each device's out-of-memory entry not written yet (its oom_context
   * may follow). */
  struct waiting_oom {
    bool waits;
    ol_trace_event_t ev; /* frames not kept: its site is */
    int32_t site;
    int64_t free_bytes;
  } oom[OL_TRACE_MAX_DEVICES];
};

/* ---- pickle primitives -------------------------------------------------- */

static void op(ex_viz_t *v, int code)
{
  putc(code, v->out);
}

static void le(ex_viz_t *v, uint64_t value, int bytes)
{
  for (int i = 0; i < bytes; i++)
    putc((int)((value >> (8 * i)) & 0xff), v->out);
}

static void put_int(ex_viz_t *v, int64_t value)
{
  if (value >= 0 && value < 256) {
    op(v, OP_BININT1);
    le(v, (uint64_t)value, 1);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    op(v, OP_BININT);
    le(v, (uint64_t)(uint32_t)(int32_t)value, 4);
  } else {
    op(v, OP_LONG1); /* 8 bytes of two's complement hold any int64 */
    putc(8, v->out);
    le(v, (uint64_t)value, 8);
  }
}

/* Addresses and sizes above 2^63 do not fit 8 signed bytes: 9 do. */
static void put_uint(ex_viz_t *v, uint64_t value)
{
  if (value <= INT64_MAX) {
    put_int(v, (int64_t)value);
    return;
  }
  op(v, OP_LONG1);
  putc(9, v->out);
  le(v, value, 8);
  putc(0, v->out);
}

/* Length of a valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_length(const unsigned char *p, size_t n)
{
  size_t len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3
             : (p[0] >> 3) == 30 ? 4 : 0;
  if (len == 0 || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  return len;
}

/* Python decodes BINUNICODE strictly: a byte that is not UTF-8 becomes '?'. */
static void put_str(ex_viz_t *v, const char *text, size_t n)
{
  op(v, OP_BINUNICODE);
  le(v, n, 4);
  const unsigned char *p = (const unsigned char *)text;
  size_t i = 0;
  while (i < n) {
    size_t len = utf8_length(p + i, n - i);
    if (len == 0) {
      putc('?', v->out);
      i++;
    } else {
      fwrite(p + i, 1, len, v->out);
      i += len;
    }
  }
}

static uint32_t memo_put(ex_viz_t *v)
{
  uint32_t slot = v->next_memo++;
  if (slot < 256) {
    op(v, OP_BINPUT);
    le(v, slot, 1);
  } else {
    op(v, OP_LONG_BINPUT);
    le(v, slot, 4);
  }
  return slot;
}

static void memo_get(ex_viz_t *v, uint32_t slot)
{
  if (slot < 256) {
    op(v, OP_BINGET);
    le(v, slot, 1);
  } else {
    op(v, OP_LONG_BINGET);
    le(v, slot, 4);
  }
}

/* A repeated string: written and memoized the first time (*slot 0), from
 * the memo after that. */
static void remembered_string(ex_viz_t *v, uint32_t *slot, const char *text)
{
  if (*slot) {
    memo_get(v, *slot);
    return;
  }
  put_str(v, text, strlen(text));
  *slot = memo_put(v);
}

static void key(ex_viz_t *v, int k)
{
  remembered_string(v, &v->key_memo[k], key_text[k]);
}

/* ---- frames ------------------------------------------------------------- */

static bool all_digits(const char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] < '0' || p[i] > '9')
      return false;
  return n > 0 && n < 10;
}

/* A native frame's " (file.c:42)" at the end of p: the file's extent and
 * the line; false when it has none. */
static bool source_suffix(const char *p, size_t n, const char **file, size_t *file_len, int *line)
{
  if (n < 6 || p[n - 1] != ')')
    return false;
  const char *colon = NULL, *open = NULL;
  for (const char *c = p + n - 2; c > p && !open; c--) {
    if (*c == ':' && !colon)
      colon = c;
    if (*c == '(' && c[-1] == ' ')
      open = c;
  }
  if (!open || !colon || colon < open || !all_digits(colon + 1, (size_t)(p + n - 1 - colon - 1)))
    return false;
  *file = open + 1;
  *file_len = (size_t)(colon - open - 1);
  *line = atoi(colon + 1);
  return *file_len > 0;
}

static void put_named_frame(ex_viz_t *v, const char *file, size_t file_len, int line,
                            const char *name, size_t name_len)
{
  key(v, K_filename);
  put_str(v, file, file_len);
  key(v, K_line);
  put_int(v, line);
  key(v, K_name);
  put_str(v, name, name_len);
}

/* "file:line:function" (Python), else "module+0xoffset function
 * (file.c:42)" (native: the source line where debug info gave one, the
 * module otherwise). */
static void put_frame(ex_viz_t *v, const char *p, size_t n)
{
  const char *last = NULL, *before = NULL, *file;
  size_t file_len;
  int line;
  for (const char *c = p; c < p + n; c++)
    if (*c == ':') {
      before = last;
      last = c;
    }
  op(v, OP_EMPTY_DICT);
  op(v, OP_MARK);
  const char *space = memchr(p, ' ', n);
  if (before && all_digits(before + 1, (size_t)(last - before - 1))) {
    put_named_frame(v, p, (size_t)(before - p), atoi(before + 1), last + 1,
                    (size_t)(p + n - last - 1));
  } else if (space && source_suffix(p, n, &file, &file_len, &line)) {
    const char *name = file - 2 > space ? space + 1 : p; /* no function: the module */
    size_t name_len = file - 2 > space ? (size_t)(file - 2 - name) : (size_t)(space - p);
    put_named_frame(v, file, file_len, line, name, name_len);
  } else {
    size_t module_len = space ? (size_t)(space - p) : n;
    put_named_frame(v, p, module_len, 0, space ? space + 1 : "",
                    space ? (size_t)(p + n - space - 1) : 0);
  }
  op(v, OP_SETITEMS);
}

/* The memo slot of a site's frames list, 0 none yet; NULL when there is no
 * room to remember it (then the list is built each time). */
static uint32_t *memo_of(ex_viz_t *v, int32_t site)
{
  if (site < 0)
    return NULL;
  if ((size_t)site >= v->site_memo_cap) {
    size_t cap = v->site_memo_cap ? v->site_memo_cap : 256;
    while (cap <= (size_t)site)
      cap *= 2;
    uint32_t *grown = realloc(v->site_memo, cap * sizeof *grown);
    if (!grown) {
      v->failed = true;
      return NULL;
    }
    memset(grown + v->site_memo_cap, 0, (cap - v->site_memo_cap) * sizeof *grown);
    v->site_memo = grown;
    v->site_memo_cap = cap;
  }
  return &v->site_memo[site];
}

static void put_frame_span(const char *frame, size_t len, void *viz)
{
  put_frame(viz, frame, len);
}

/* A site's frames list: built the first time, fetched from the memo after.
 * Site -1 (none): an empty list. */
static void put_frames(ex_t *x, int32_t site)
{
  ex_viz_t *v = x->viz;
  uint32_t *memo = memo_of(v, site);
  if (memo && *memo) {
    memo_get(v, *memo);
    return;
  }
  op(v, OP_EMPTY_LIST);
  op(v, OP_MARK);
  if (site >= 0) /* whole frames: memory_viz parses them, nothing is cut */
    ol_sites_text_spans(ex_sites(x), site, SIZE_MAX, put_frame_span, v);
  op(v, OP_APPENDS);
  uint32_t slot = memo_put(v);
  if (memo)
    *memo = slot;
}

/* ---- the trace entries -------------------------------------------------- */

bool ol_viz_begin(ex_t *x)
{
  ex_viz_t *v = calloc(1, sizeof *v);
  if (!v)
    return false;
  x->viz = v;
  v->out = x->out;
  v->next_memo = 1;
  op(v, OP_PROTO);
  putc(2, v->out);
  op(v, OP_EMPTY_DICT); /* the snapshot, at the bottom of the stack throughout */
  return true;
}

/* Pushes "device_traces" and the device's list (made the first time), for
 * an entry to be appended and the pair stored (append_to_device_list). */
static void device_list(ex_viz_t *v, int device)
{
  key(v, K_device_traces);
  if (v->device_list[device]) {
    memo_get(v, v->device_list[device]);
  } else {
    op(v, OP_EMPTY_LIST);
    v->device_list[device] = memo_put(v);
  }
  if (device + 1 > v->devices)
    v->devices = device + 1;
}

static void append_to_device_list(ex_viz_t *v)
{
  op(v, OP_APPEND);
  op(v, OP_SETITEM); /* snapshot["device_traces"] = the list, until the end */
}

/* What the device had free at an OOM without an oom_context: its size less
 * what the allocator reserved and what was held outside it (the trace's
 * outside line, where it has one); -1 when the trace does not know the
 * size (a PyTorch CSV), which the viewer shows as -1 bytes rather than a
 * made-up 0. */
static int64_t device_free(const ex_t *x, int device)
{
  uint64_t capacity = ol_trace_capacity(x->trace, device);
  if (capacity == 0)
    return -1;
  int64_t held = ex_stats(x, device)->reserved_bytes[OL_POOL_ALL].current;
  int64_t outside = ol_trace_outside(x->trace, device);
  if (outside > 0)
    held += outside;
  return capacity > (uint64_t)held ? (int64_t)(capacity - (uint64_t)held) : 0;
}

static void put_entry(ex_t *x, const ol_trace_event_t *ev, int32_t site, int64_t free_bytes)
{
  ex_viz_t *v = x->viz;
  device_list(v, ev->device);
  op(v, OP_EMPTY_DICT);
  op(v, OP_MARK);
  key(v, K_action);
  remembered_string(v, &v->action_memo[ev->action], ol_trace_action_name(ev->action));
  key(v, K_addr);
  put_uint(v, ev->addr);
  key(v, K_size);
  put_uint(v, ev->size);
  key(v, K_stream);
  put_uint(v, ev->stream);
  key(v, K_time_us);
  put_uint(v, ol_trace_start_unix_us(x->trace) + ev->time_us);
  key(v, K_frames);
  put_frames(x, site);
  if (ev->action == OL_TRACE_OOM) {
    key(v, K_device_free);
    put_int(v, free_bytes);
  }
  op(v, OP_SETITEMS);
  append_to_device_list(v);
  x->result->written++;
}

static void write_waiting_oom(ex_t *x, int device)
{
  struct waiting_oom *w = &x->viz->oom[device];
  if (!w->waits)
    return;
  w->waits = false;
  put_entry(x, &w->ev, w->site, w->free_bytes);
}

void ol_viz_event(ex_t *x, const ol_trace_event_t *ev, int32_t site)
{
  write_waiting_oom(x, ev->device);
  if (ev->action != OL_TRACE_OOM) {
    put_entry(x, ev, site, 0);
    return;
  }
  struct waiting_oom *w = &x->viz->oom[ev->device];
  w->waits = true;
  w->ev = *ev;
  w->ev.frames = NULL;
  w->ev.frames_len = 0;
  w->site = site;
  w->free_bytes = device_free(x, ev->device);
}

void ol_viz_context(ex_t *x, const ol_trace_event_t *ev)
{
  struct waiting_oom *w = &x->viz->oom[ev->device];
  if (w->waits && ev->context && ev->context->device_free >= 0)
    w->free_bytes = ev->context->device_free;
  write_waiting_oom(x, ev->device);
}

/* ---- the segments at the end -------------------------------------------- */

typedef struct live_list {
  ol_record_t *items;
  size_t count;
} live_list_t;

static void collect(const ol_record_t *live, void *arg)
{
  live_list_t *list = arg;
  list->items[list->count++] = *live;
}

static int by_place(const void *a, const void *b)
{
  const ol_record_t *x = a, *y = b;
  if (x->device != y->device)
    return x->device < y->device ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

static bool sorted_live(const ol_records_t *map, live_list_t *out)
{
  out->count = 0;
  size_t live = ol_records_count(map);
  out->items = malloc((live ? live : 1) * sizeof *out->items);
  if (!out->items)
    return false;
  ol_records_each(map, collect, out);
  qsort(out->items, out->count, sizeof *out->items, by_place);
  return true;
}

/* Whether mapped range b carries on where a ends, on a's device and stream. */
static bool continues(const ol_record_t *a, const ol_record_t *b)
{
  return a->kind && b->kind && a->device == b->device && a->stream == b->stream &&
         a->key + a->size == b->key;
}

/* PyTorch's snapshot shows an expandable segment as one segment per run of
 * contiguous mapped pages (its tensors may span the pages of several map
 * calls), so the ranges a trace mapped one by one become those runs; the
 * frames are the run's first range's. segs is sorted by place. */
static void join_mapped_runs(live_list_t *segs)
{
  size_t kept = 0;
  for (size_t i = 0; i < segs->count; i++) {
    if (kept > 0 && continues(&segs->items[kept - 1], &segs->items[i]))
      segs->items[kept - 1].size += segs->items[i].size;
    else
      segs->items[kept++] = segs->items[i];
  }
  segs->count = kept;
}

/* The segment holding block b, or -1: the last one starting at or before it. */
static long holder(const live_list_t *segs, const ol_record_t *b)
{
  size_t lo = 0, hi = segs->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (by_place(&segs->items[mid], b) <= 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  const ol_record_t *s = &segs->items[lo - 1];
  bool inside = s->device == b->device && b->key - s->key < s->size;
  return inside ? (long)(lo - 1) : -1;
}

/* A live block (its site's frames), or an inactive gap (block NULL). */
static void put_block(ex_t *x, uint64_t addr, uint64_t size, const ol_record_t *block)
{
  ex_viz_t *v = x->viz;
  op(v, OP_EMPTY_DICT);
  op(v, OP_MARK);
  key(v, K_address);
  put_uint(v, addr);
  key(v, K_size);
  put_uint(v, size);
  key(v, K_requested_size);
  put_uint(v, block ? size : 0);
  key(v, K_state);
  key(v, block ? K_active_allocated : K_inactive);
  key(v, K_frames);
  if (block) {
    put_frames(x, block->site);
  } else {
    op(v, OP_EMPTY_LIST);
  }
  op(v, OP_SETITEMS);
}

/* Blocks [first, last) lie in seg, by address; the gaps are inactive. */
static void put_segment(ex_t *x, const ol_record_t *seg, const ol_record_t *blocks, size_t count)
{
  ex_viz_t *v = x->viz;
  uint64_t used = 0;
  for (size_t i = 0; i < count; i++)
    used += blocks[i].size;
  op(v, OP_EMPTY_DICT);
  op(v, OP_MARK);
  key(v, K_device);
  put_int(v, seg->device);
  key(v, K_address);
  put_uint(v, seg->key);
  key(v, K_total_size);
  put_uint(v, seg->size);
  key(v, K_allocated_size);
  put_uint(v, used);
  key(v, K_active_size);
  put_uint(v, used);
  key(v, K_requested_size);
  put_uint(v, used);
  key(v, K_stream);
  put_uint(v, seg->stream);
  key(v, K_segment_type);
  key(v, seg->size > OL_SMALL_SIZE ? K_large : K_small);
  key(v, K_segment_pool_id);
  put_int(v, 0);
  put_int(v, 0);
  op(v, OP_TUPLE2);
  key(v, K_is_expandable);
  op(v, seg->kind ? OP_NEWTRUE : OP_NEWFALSE); /* a VMM mapping: an expandable segment */
  key(v, K_frames);
  put_frames(x, seg->site);
  key(v, K_blocks);
  op(v, OP_EMPTY_LIST);
  op(v, OP_MARK);
  uint64_t at = seg->key, end = seg->key + seg->size;
  for (size_t i = 0; i < count; i++) {
    if (blocks[i].key > at)
      put_block(x, at, blocks[i].key - at, NULL);
    put_block(x, blocks[i].key, blocks[i].size, &blocks[i]);
    if (blocks[i].key + blocks[i].size > at)
      at = blocks[i].key + blocks[i].size;
  }
  if (end > at)
    put_block(x, at, end - at, NULL);
  op(v, OP_APPENDS);
  op(v, OP_SETITEMS);
}

/* Every live segment with its blocks; a block outside any segment the
 * trace showed (a CSV recorded after its segment was made) is a segment of
 * its own. */
static void put_segments(ex_t *x, const live_list_t *segs, const live_list_t *blocks)
{
  ex_viz_t *v = x->viz;
  key(v, K_segments);
  op(v, OP_EMPTY_LIST);
  op(v, OP_MARK);
  size_t b = 0;
  for (size_t s = 0; s <= segs->count; s++) {
    /* Blocks before segment s that no segment holds, then s's own. */
    while (b < blocks->count && (s == segs->count || by_place(&blocks->items[b], &segs->items[s]) < 0)) {
      if (holder(segs, &blocks->items[b]) < 0)
        put_segment(x, &blocks->items[b], &blocks->items[b], 1);
      b++;
    }
    if (s == segs->count)
      break;
    size_t first = b;
    while (b < blocks->count && holder(segs, &blocks->items[b]) == (long)s)
      b++;
    put_segment(x, &segs->items[s], blocks->items + first, b - first);
  }
  op(v, OP_APPENDS);
  op(v, OP_SETITEM);
}

bool ol_viz_end(ex_t *x)
{
  ex_viz_t *v = x->viz;
  for (int d = 0; d < OL_TRACE_MAX_DEVICES; d++)
    write_waiting_oom(x, d);
  live_list_t segs = {0}, blocks = {0};
  bool ok = sorted_live(&x->segments, &segs) && sorted_live(&x->account->blocks, &blocks);
  if (ok) {
    join_mapped_runs(&segs);
    put_segments(x, &segs, &blocks);
    key(v, K_device_traces);
    op(v, OP_EMPTY_LIST);
    op(v, OP_MARK);
    for (int d = 0; d < v->devices; d++) {
      if (v->device_list[d])
        memo_get(v, v->device_list[d]);
      else
        op(v, OP_EMPTY_LIST);
    }
    op(v, OP_APPENDS);
    op(v, OP_SETITEM);
    op(v, OP_STOP);
  }
  free(segs.items);
  free(blocks.items);
  return ok && !v->failed;
}

void ol_viz_free(ex_t *x)
{
  if (x->viz)
    free(x->viz->site_memo);
  free(x->viz);
  x->viz = NULL;
}
