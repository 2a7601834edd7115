/* stacks.c: call stacks, as call-site keys.
 *
 * Where did the job ask for this memory? At each allocation the hook takes
 * the thread's Python frames (pyframes.c) and its native stack: libunwind
 * (opened at run time, so a machine without it just has no native frames)
 * walks it, frames inside oomlens itself are dropped so a site starts at
 * the caller, and the depth is bounded (OOMLENS_STACK_DEPTH), because
 * unwinding is the cost of a profiler. The key holds raw values only: code
 * objects and return addresses. Python frames become text when a site is
 * first seen (ol_stacks_label, on the capturing thread); native frames are
 * named only when a report is written.
 *
 * Two things keep the cost down. OOMLENS_STACK_SAMPLE takes stacks for a
 * byte-weighted sample (tcmalloc's scheme: a countdown of bytes drawn from
 * an exponential distribution), so big allocations, which make the peak,
 * are nearly always taken and small ones rarely; the rest are counted,
 * exactly, under one "not sampled" site, so a device's sites still sum to
 * its peak. And a per-thread cache maps a key seen before to its site id
 * (two slots a set, so two sites of one loop that share a set do not evict
 * each other), so a repeated stack skips the interning under the tracker's
 * lock.
 *
 * Call sites are taken in two ways. OOMLENS_STACKS=1: Python and native
 * frames, every allocation unless OOMLENS_STACK_SAMPLE says otherwise.
 * Manage mode's default (OOMLENS_ROLES=1, with OOMLENS_STACKS off): Python
 * frames only, for a byte-weighted sample of one in OOMLENS_STACK_SAMPLE
 * bytes, 1 MiB when that is 0. In manage mode every tensor reaches the
 * hook (GPT-2: over a thousand a step), so the capture must cost next to
 * nothing; native unwinding is most of a stack's cost, and the roles
 * (core/roles.c) are read from Python frames. A mean of 1 MiB takes nearly
 * every tensor that can decide an out-of-memory (one of 16 MiB is missed
 * with probability e^-16) and few of the small ones (a 64 KiB tensor one
 * time in 16), which sum to little: what no sample took is counted under
 * the "not sampled" site, unknown by role.
 *
 * A thread PyTorch named "pt_autograd_N" is its autograd engine's (its
 * device threads run the backward pass and hold no Python frames): the key
 * carries that, and the site's frames end with the marker frame
 * "(thread pt_autograd_N)", so a trace carries what the role rule read
 * (docs/trace-format.md). The name is read once per thread. */
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "prim.h"

#define MAX_SEGMENTS 8
#define CACHE_SETS 128 /* two slots each: a model's forward has hundreds of sites */
#define HEADER_PYTHON(h) ((size_t)((h) & 0xffff))
#define HEADER_NATIVE(h) ((size_t)((h) >> 16 & 0xffff))
#define HEADER_UNSAMPLED ((uintptr_t)1 << 32)
#define HEADER_AUTOGRAD_SHIFT 33 /* bits 33-47: an autograd thread's N + 1, 0 none */
#define HEADER_AUTOGRAD(h) ((size_t)((h) >> HEADER_AUTOGRAD_SHIFT & 0x7fff))
#define ROLES_SAMPLE_DEFAULT ((uint64_t)1 << 20)
#define AUTOGRAD_PREFIX "pt_autograd_"

typedef struct range {
  uintptr_t lo, hi;
} range_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int (*backtrace_fn)(void **, int);
static range_t own[MAX_SEGMENTS];
static int own_count;
static pthread_key_t cache_key;
static bool cache_key_ok;
static atomic_uint generation = 1; /* bumped when the tracker forgets its sites */
static atomic_uint_fast64_t seed_counter;

/* Per thread: the sampling countdown and its random state, and the cache
 * of keys already interned (allocated on first use). */
typedef struct cache_slot {
  uint64_t hash;
  unsigned generation;
  int32_t device, site;
  uint32_t words;
  uintptr_t key[OL_SITE_WORDS];
} cache_slot_t;

typedef struct thread_state {
  int64_t until_sample; /* bytes */
  uint64_t random;
  cache_slot_t *cache;
  bool cache_failed;
  bool named;        /* the thread's name was read */
  uintptr_t autograd; /* its header bits (HEADER_AUTOGRAD), 0: not an autograd thread */
} thread_state_t;

static _Thread_local thread_state_t thread;

/* Our own executable segments, to tell our frames from the job's. */
static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t probe = (uintptr_t)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && probe >= lo && probe < hi) {
      for (int j = 0; j < info->dlpi_phnum && own_count < MAX_SEGMENTS; j++) {
        const ElfW(Phdr) *seg = &info->dlpi_phdr[j];
        if (seg->p_type == PT_LOAD && (seg->p_flags & PF_X))
          own[own_count++] = (range_t){info->dlpi_addr + seg->p_vaddr,
                                       info->dlpi_addr + seg->p_vaddr + seg->p_memsz};
      }
      return 1;
    }
  }
  return 0;
}

/* At thread exit; a later destructor that allocates finds no cache. */
static void drop_cache(void *cache)
{
  free(cache);
  thread.cache = NULL;
  thread.cache_failed = true;
}

static void start(void)
{
  backtrace_fn = (int (*)(void **, int))ol_prim_unwinder();
  dl_iterate_phdr(find_own, (void *)(uintptr_t)&start);
  if (!backtrace_fn)
    ol_log_verbose("no libunwind.so.8: no native frames in call sites");
  cache_key_ok = pthread_key_create(&cache_key, drop_cache) == 0;
}

static bool ours(uintptr_t pc)
{
  for (int i = 0; i < own_count; i++)
    if (pc >= own[i].lo && pc < own[i].hi)
      return true;
  return false;
}

/* Whether the roles' capture runs in observe mode: only for a CPython job
 * (a native job's sites would name no role, and cost it the capture on
 * every call); asked once, at the first allocation. */
static atomic_int python_here = -1;

static bool __attribute__((noinline, cold)) learn_python(void)
{
  bool here = ol_pyframes_available();
  atomic_store_explicit(&python_here, here, memory_order_relaxed);
  return here;
}

/* Asked on every allocation: one test that the options are loaded, then
 * their values. The roles' capture (Python frames only) is on in manage
 * mode, and in observe mode for a CPython job: under PyTorch's cache the
 * hooks see only its segments, so it costs nothing there, and it is what
 * tells weights and optimizer state at the failure. */
bool ol_stacks_on(void)
{
  if (!atomic_load_explicit(&ol_options_ready, memory_order_acquire))
    ol_options_load();
  if (ol_option_values[OL_OPT_STACKS])
    return true;
  if (!ol_option_values[OL_OPT_ROLES])
    return false;
  if (ol_option_values[OL_OPT_MANAGE])
    return true;
  int here = atomic_load_explicit(&python_here, memory_order_relaxed);
  return here >= 0 ? here != 0 : learn_python();
}

/* Paused by the job through oomlens_capture(0): allocations from then on
 * are counted without a call site, until oomlens_capture(1). One relaxed
 * load on the hot path, only when capture is on. */
static atomic_bool paused;

bool ol_stacks_capturing(void)
{
  return ol_stacks_on() && !atomic_load_explicit(&paused, memory_order_relaxed);
}

bool ol_stacks_set_paused(bool pause)
{
  return atomic_exchange(&paused, pause);
}

bool ol_stacks_native_on(void)
{
  return ol_option_bool(OL_OPT_STACKS);
}

uint64_t ol_stacks_sample_bytes(void)
{
  uint64_t mean = ol_option_size(OL_OPT_STACK_SAMPLE);
  return mean == 0 && !ol_stacks_native_on() ? ROLES_SAMPLE_DEFAULT : mean;
}

bool ol_stacks_native_available(void)
{
  pthread_once(&once, start);
  return backtrace_fn != NULL;
}

/* The caller's frames, innermost first, at most max; 0 when stacks are off
 * or cannot be taken. */
int ol_stacks_capture(void **frames, int max)
{
  void *raw[OL_STACK_MAX + 16];
  pthread_once(&once, start);
  if (!backtrace_fn)
    return 0;
  int depth = (int)ol_option_size(OL_OPT_STACK_DEPTH);
  if (depth > max)
    depth = max;
  int n = backtrace_fn(raw, depth + 16 < (int)(sizeof raw / sizeof *raw) ? depth + 16
                                                                      : (int)(sizeof raw / sizeof *raw));
  int first = 0;
  while (first < n && ours((uintptr_t)raw[first]))
    first++;
  int kept = n - first < depth ? n - first : depth;
  memcpy(frames, raw + first, (size_t)(kept > 0 ? kept : 0) * sizeof *frames);
  return kept > 0 ? kept : 0;
}

/* ---- sampling ------------------------------------------------------------ */

static uint64_t next_random(void)
{
  if (!thread.random) /* seeded per thread, never 0 */
    thread.random = ((uintptr_t)&thread ^ (atomic_fetch_add(&seed_counter, 1) << 40)) | 1;
  uint64_t x = thread.random;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  thread.random = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Bytes until the next sample: exponential with the given mean, so each
 * byte is equally likely to be the sampled one (no aliasing with loops). */
static int64_t draw_interval(uint64_t mean)
{
  double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
  double bytes = -log(u) * (double)mean;
  return bytes > 9e18 ? INT64_MAX : (int64_t)bytes + 1;
}

/* Whether this allocation's stack is taken (always, without sampling). */
static bool sampled(size_t size)
{
  uint64_t mean = ol_stacks_sample_bytes();
  if (mean == 0)
    return true;
  thread.until_sample -= (int64_t)(size < INT64_MAX ? size : INT64_MAX);
  if (thread.until_sample > 0)
    return false;
  thread.until_sample = draw_interval(mean);
  return true;
}

/* ---- keys ---------------------------------------------------------------- */

static uint64_t hash_words(const uintptr_t *w, size_t n)
{
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; i++) {
    h ^= w[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

/* "pt_autograd_N" as header bits (N + 1), read once per thread: PyTorch
 * names the thread when it starts, before it runs any work. */
static uintptr_t __attribute__((noinline, cold)) read_thread_name(void)
{
  char name[17] = "";
  thread.named = true;
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0 ||
      strncmp(name, AUTOGRAD_PREFIX, strlen(AUTOGRAD_PREFIX)) != 0)
    return 0;
  unsigned long n = strtoul(name + strlen(AUTOGRAD_PREFIX), NULL, 10);
  thread.autograd = (uintptr_t)(n < 0x7ffe ? n + 1 : 0x7fff) << HEADER_AUTOGRAD_SHIFT;
  return thread.autograd;
}

static uintptr_t autograd_bits(void)
{
  return thread.named ? thread.autograd : read_thread_name();
}

/* The thread's frames now, as a key. */
static void take_key(ol_site_key_t *key)
{
  int python = ol_pyframes_capture(key->words + 1, OL_PY_FRAMES_MAX);
  uintptr_t *pcs = key->words + 1 + 2 * python;
  int native = ol_stacks_native_on() ? ol_stacks_capture((void **)pcs, OL_STACK_MAX) : 0;
  for (int i = 0; python > 0 && i < native; i++)
    if (ol_pyframes_in_interpreter(pcs[i]))
      native = i; /* the Python frames say the rest */
  key->words[0] = (uintptr_t)python | (uintptr_t)native << 16 | autograd_bits();
  key->count = 1 + 2 * (size_t)python + (size_t)native;
  key->hash = hash_words(key->words, key->count);
}

void ol_stacks_site_key(size_t size, ol_site_key_t *key)
{
  if (sampled(size)) {
    uint64_t start = ol_own_clock_ns(); /* the capture's own cost (own_time.c) */
    take_key(key);
    ol_own_charge(OL_OWN_CALL_SITES, start);
    return;
  }
  key->words[0] = HEADER_UNSAMPLED;
  key->count = 1;
  key->hash = hash_words(key->words, key->count);
}

bool ol_stacks_key_unsampled(const void *key, size_t len)
{
  uintptr_t header = 0;
  if (key && len >= sizeof header)
    memcpy(&header, key, sizeof header);
  return (header & HEADER_UNSAMPLED) != 0;
}

/* A failed request's: never left to the sample (what it was for is the
 * diagnosis's to know), nor counted in it. */
void ol_stacks_request_key(ol_site_key_t *key)
{
  take_key(key);
}

/* ---- the per-thread cache of interned keys -------------------------------- */

/* The key's set of two slots, the one cached last first. */
static cache_slot_t *set_for(const ol_site_key_t *key)
{
  if (!thread.cache && !thread.cache_failed) {
    pthread_once(&once, start);
    thread.cache = cache_key_ok ? calloc(2 * CACHE_SETS, sizeof *thread.cache) : NULL;
    thread.cache_failed = !thread.cache || pthread_setspecific(cache_key, thread.cache) != 0;
    if (thread.cache_failed) {
      free(thread.cache);
      thread.cache = NULL;
    }
  }
  return thread.cache ? &thread.cache[2 * (key->hash % CACHE_SETS)] : NULL;
}

static bool slot_holds(const cache_slot_t *slot, int device, const ol_site_key_t *key)
{
  return slot->hash == key->hash && slot->device == device && slot->words == key->count &&
         slot->generation == atomic_load_explicit(&generation, memory_order_relaxed) &&
         memcmp(slot->key, key->words, key->count * sizeof *key->words) == 0;
}

int32_t ol_stacks_cached_site(int device, const ol_site_key_t *key)
{
  const cache_slot_t *set = set_for(key);
  if (set && slot_holds(&set[0], device, key))
    return set[0].site;
  if (set && slot_holds(&set[1], device, key))
    return set[1].site;
  return -1;
}

/* The slot's used part only: a key of Python frames is 9 of its words. */
static void copy_slot(cache_slot_t *to, const cache_slot_t *from)
{
  memcpy(to, from, offsetof(cache_slot_t, key) + from->words * sizeof *from->key);
}

void ol_stacks_cache_site(int device, const ol_site_key_t *key, int32_t site)
{
  cache_slot_t *set = set_for(key);
  if (!set || site < 0)
    return;
  copy_slot(&set[1], &set[0]); /* the other way keeps the one cached before */
  cache_slot_t *slot = &set[0];
  slot->hash = key->hash;
  slot->generation = atomic_load_explicit(&generation, memory_order_relaxed);
  slot->device = device;
  slot->site = site;
  slot->words = (uint32_t)key->count;
  memcpy(slot->key, key->words, key->count * sizeof *key->words);
}

void ol_stacks_forget_sites(void)
{
  atomic_fetch_add(&generation, 1);
}

/* ---- text ---------------------------------------------------------------- */

/* The Python frames of a key, one "file:line:function" a line. Only on the
 * thread that captured the key, inside its hook (the code objects are
 * alive then); empty when the key has no Python frames. */
void ol_stacks_label(const void *key, size_t len, ol_buf_t *out)
{
  uintptr_t header, pair[2];
  if (len < sizeof header)
    return;
  memcpy(&header, key, sizeof header);
  size_t python = HEADER_PYTHON(header);
  if (header & HEADER_UNSAMPLED || (1 + 2 * python) * sizeof header > len)
    return;
  for (size_t i = 0; i < python; i++) {
    char where[640];
    memcpy(pair, (const char *)key + (1 + 2 * i) * sizeof header, sizeof pair);
    ol_pyframes_describe(pair[0], pair[1], where, sizeof where);
    ol_buf_printf(out, "%s\n", where);
  }
}

/* The marker frame of an autograd thread's site (header bits N + 1). */
static size_t autograd_marker(size_t bits, char *out, size_t cap)
{
  int n = snprintf(out, cap, "(thread " AUTOGRAD_PREFIX "%zu)", bits - 1);
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* The one walk of a live site's key: its frames as text, innermost first
 * (the Python frames, one label line each, then the native ones), at most
 * max, each handed to visit; returns how many. The rules, for the report
 * (ol_stacks_site_frames) and the trace (ol_stacks_key_text) alike: a frame
 * is cut at OL_FRAME_TEXT_MAX - 1 bytes; a stack without frames, the "not
 * sampled" bucket and a key of the wrong length are one frame saying so. */
static size_t key_frames(const char *key, size_t len, const char *label, size_t max,
                         ol_frame_visit_fn visit, void *arg)
{
  uintptr_t header = 0;
  if (key && len >= sizeof header)
    memcpy(&header, key, sizeof header);
  size_t python = HEADER_PYTHON(header), native = HEADER_NATIVE(header), shown = 0;
  size_t autograd = HEADER_AUTOGRAD(header);
  const char *alone = NULL;
  if (header & HEADER_UNSAMPLED)
    alone = OL_SITE_UNSAMPLED_TEXT;
  else if (!key || len != (1 + 2 * python + native) * sizeof header)
    alone = "(unreadable key)";
  else if (python + native == 0 && !autograd)
    alone = "(no call stack)";
  if (alone) {
    if (max > 0)
      visit(alone, arg);
    return max > 0;
  }
  while (label && *label && shown < max) {
    const char *end = strchr(label, '\n');
    size_t n = end ? (size_t)(end - label) : strlen(label);
    char line[OL_FRAME_TEXT_MAX];
    snprintf(line, sizeof line, "%.*s", (int)n, label);
    visit(line, arg);
    shown++;
    label += n + (end ? 1 : 0);
  }
  for (size_t i = 0; i < native && shown < max; i++, shown++) {
    void *pc;
    char where[OL_FRAME_TEXT_MAX];
    memcpy(&pc, key + (1 + 2 * python + i) * sizeof header, sizeof pc);
    ol_stacks_describe(pc, where, sizeof where);
    visit(where, arg);
  }
  if (autograd && shown < max) { /* outermost: the thread all the frames ran on */
    char marker[48];
    autograd_marker(autograd, marker, sizeof marker);
    visit(marker, arg);
    shown++;
  }
  return shown;
}

/* The role the rule gives the frames the site's trace line will carry
 * (key_frames' walk), but for the native ones, which name no role
 * (core/roles.c) and would cost a symbolization each: the Python lines,
 * then the thread's marker. On the capturing thread, as its label. */
ol_role_fold_t ol_stacks_role(const void *key, size_t len, const char *label)
{
  ol_role_fold_t fold = OL_ROLE_FOLD_INIT;
  uintptr_t header = 0;
  if (key && len >= sizeof header)
    memcpy(&header, key, sizeof header);
  if (header & HEADER_UNSAMPLED)
    return fold;
  while (label && *label) {
    const char *end = strchr(label, '\n');
    size_t n = end ? (size_t)(end - label) : strlen(label);
    ol_role_fold_add(&fold, label, n < OL_FRAME_TEXT_MAX - 1 ? n : OL_FRAME_TEXT_MAX - 1);
    label += n + (end ? 1 : 0);
  }
  if (HEADER_AUTOGRAD(header)) {
    char marker[48];
    ol_role_fold_add(&fold, marker, autograd_marker(HEADER_AUTOGRAD(header), marker, sizeof marker));
  }
  return fold;
}

/* A trace's frames are joined by ';', so a ';' inside one becomes ':'. */
static void join_trace_frame(const char *frame, void *join)
{
  ol_frame_join_t *j = join;
  ol_buf_printf(j->out, "%s", j->count++ ? ";" : "");
  size_t start = j->out->len;
  ol_buf_printf(j->out, "%s", frame);
  for (size_t i = start; !j->out->failed && i < j->out->len; i++)
    if (j->out->data[i] == ';')
      j->out->data[i] = ':';
}

void ol_stacks_key_text(const void *key, size_t len, const char *label, ol_buf_t *out)
{
  ol_frame_join_t j = {out, 0};
  key_frames(key, len, label, SIZE_MAX, join_trace_frame, &j);
}

/* "libfoo.so+0x1a2b function (file.c:42)" for a return address, the
 * file:line where debug info has it (symbolize.c); the address minus one
 * lies in the call instruction, so the function is the caller's. */
void ol_stacks_describe(const void *frame, char *out, size_t cap)
{
  Dl_info info;
  uintptr_t pc = (uintptr_t)frame - 1;
  if (!dladdr((void *)pc, &info) || !info.dli_fname) {
    snprintf(out, cap, "0x%llx", (unsigned long long)(uintptr_t)frame);
    return;
  }
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  unsigned long long offset = (unsigned long long)(pc - (uintptr_t)info.dli_fbase);
  char name[OL_FRAME_TEXT_MAX / 2] = "", file[128];
  int line = 0;
  if (info.dli_sname && !ol_symbolize_demangle(info.dli_sname, name, sizeof name))
    snprintf(name, sizeof name, "%s", info.dli_sname);
  int n = snprintf(out, cap, "%s+0x%llx%s%s", *base ? base : "?", offset, *name ? " " : "", name);
  if (n >= 0 && (size_t)n < cap && ol_symbolize_line(frame, file, sizeof file, &line))
    snprintf(out + n, cap - (size_t)n, " (%s:%d)", file, line);
}

/* A live site's frames as text: the key's walk, with the label its
 * capturing thread gave it. */
size_t ol_stacks_site_frames(const ol_sites_t *sites, int32_t id, size_t max,
                             void (*visit)(const char *frame, void *arg), void *arg)
{
  size_t len = 0;
  const char *key = ol_sites_key_bytes(sites, id, &len);
  return key_frames(key, len, ol_sites_label(sites, id), max, visit, arg);
}
