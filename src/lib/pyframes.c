/* pyframes.c: the Python frames of the thread that asks for memory.
 *
 * When the job runs CPython (3.10 to 3.13), each call site also names the
 * Python lines that led to the allocation: the innermost frames and the
 * first frame of the job's own code. The hook may run with the GIL held by
 * another thread, so this file never calls into Python for anything that
 * needs the GIL, never touches a reference count and never allocates a
 * Python object. It reads memory:
 *
 * - This thread's PyThreadState comes from PyGILState_GetThisThreadState(),
 *   a pthread_getspecific on the key CPython binds each thread's state to:
 *   it needs no GIL and, unlike the "current thread state" of 3.12+, it is
 *   still set while this thread has released the GIL (PyTorch releases it
 *   around most CUDA work). The frames of this thread cannot change under
 *   us: only this thread runs them, and it is inside our hook.
 * - Structure offsets per minor version, written from CPython's headers
 *   (scripts/check_pyframes_layout.sh compiles against the installed
 *   headers and compares). Every code object and string read is checked
 *   against PyCode_Type / PyUnicode_Type first; a mismatch stops the walk.
 * - The hot path copies (code object, instruction index) pairs only. The
 *   text "file:line:function" is made when a site is first seen, still on
 *   this thread inside the hook, while the frames (which hold strong
 *   references to their code objects) keep them alive. Lines come from
 *   PyCode_Addr2Line: in 3.10-3.13 a pure read of the code object's
 *   immutable line table (3.11 may read a line cache that tracing builds;
 *   a race there gives a wrong line, never a crash). A code object freed
 *   and another allocated at the same address would share a key: the key
 *   also holds co_firstlineno, so only a look-alike is mistaken.
 * - The walk's cost is the frames it passes: a PyTorch op under a
 *   transformers forward with checkpointing sits 40 to 80 library frames
 *   above the job's own line. Past the innermost frames a frame costs its
 *   code pointer, its link and a slot of a per-thread table of code objects
 *   (whether the code is the job's, from a second table by file, and where
 *   its traceable code starts): nothing of the code object is read again
 *   (scripts/bench_capture.sh counts it; docs/measurements.md).
 * - Once the interpreter is finalizing, no frames are read: it frees other
 *   threads' states while daemon threads may still run C code. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "prim.h"

/* Where a version keeps what we read; offsets in bytes, -1 absent. */
typedef struct layout {
  int minor;
  int tstate_frame;   /* PyThreadState: the frame (3.10, 3.13) or the cframe (3.11, 3.12) */
  int cframe_current; /* _PyCFrame: current_frame; -1 when tstate_frame is the frame */
  int frame_code, frame_back, frame_instr, frame_owner;
  bool instr_is_index; /* 3.10: f_lasti, an int in code units; later a pointer */
  int code_firstlineno, code_filename, code_name, code_units, code_firsttraceable;
  int ascii_size, compact_size; /* where a compact string's characters start */
} layout_t;

/* 3.10: PyThreadState.frame -> PyFrameObject {f_back, f_code, f_lasti}.
 * 3.11: PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
 *       {f_code, previous, prev_instr, owner}; code units in co_code_adaptive.
 * 3.12: as 3.11, fields reordered; entry frames owned by the C stack.
 * 3.13: PyThreadState.current_frame; f_executable, instr_ptr. */
static const layout_t layouts[] = {
  {10, 24, -1, 32, 24, 96, -1, true, 40, 104, 112, -1, -1, 48, 72},
  {11, 56, 8, 32, 48, 56, 69, false, 72, 112, 120, 184, 168, 48, 72},
  {12, 56, 0, 0, 8, 56, 70, false, 68, 112, 120, 192, 176, 40, 56},
  {13, 72, -1, 0, 8, 56, 70, false, 68, 112, 120, 200, 184, 40, 56},
};

/* The same in all four: PyObject header, PyASCIIObject's length and state. */
#define OB_TYPE 8
#define VAR_SIZE 16
#define STR_LENGTH 16
#define STR_STATE 32
#define STATE_KIND(s) (((s) >> 2) & 7)
#define STATE_COMPACT 0x20u
#define STATE_ASCII 0x40u
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3 /* 3.12+ */

#define INNERMOST 3 /* frames kept from the top, like PyTorch's recorded traces */
#define WALK_MAX 256 /* frames looked at for the job's own, at most */
#define CLASS_SETS 512 /* code objects known, per thread, two a set: a PyTorch stack passes
                        * through hundreds of them, and each stack through the same ones */
#define FILE_SLOTS 64  /* files whose ownership is known, per thread: far fewer than code
                        * objects, and a miss reads a path */

typedef void *(*tstate_fn)(void);
typedef int (*addr2line_fn)(void *, int);
typedef int (*flag_fn)(void);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const layout_t *layout;
static tstate_fn this_thread_state;
static addr2line_fn addr2line;
static flag_fn finalizing; /* Py_IsFinalizing: other threads' states may be freed */
static const void *code_type, *unicode_type;
static char version_text[32];
static uintptr_t interpreter_lo[4], interpreter_hi[4]; /* its executable segments */
static int interpreter_segments;
static const char *state = "none";
static atomic_bool broken; /* frames did not look like CPython's: stop reading them */
static atomic_uint_fast64_t with_python, without_python;

/* Per thread, per code object seen: what the walk needs of it, read once
 * (the walk's cost is the frames it passes, 40 to 80 under a Hugging Face
 * model with checkpointing: on a hit a frame costs a few loads of its own
 * and none of its code object). Two ways a set, the one last learnt first:
 * two code objects of one stack that share a set would otherwise evict
 * each other on every walk. A code object freed and another made at its
 * address keeps the first one's answers until evicted, as it would share
 * its key (above); so does a file's string. */
typedef struct class_slot {
  uintptr_t code;
  int32_t first_traceable; /* co_firsttraceable in code units (3.11+), else 0 */
  bool own;                /* the job's own code, not a library's */
} class_slot_t;
static _Thread_local class_slot_t classes[CLASS_SETS][2];

/* Per thread, per co_filename string seen: whether it is the job's own. A
 * module's code objects share their file's string, so a code object seen
 * first costs a look-up here, not a path read. */
typedef struct file_slot {
  uintptr_t name;
  bool own;
} file_slot_t;
static _Thread_local file_slot_t files[FILE_SLOTS];

static uintptr_t word_at(uintptr_t p, int offset)
{
  uintptr_t v;
  memcpy(&v, (const void *)(p + (uintptr_t)offset), sizeof v);
  return v;
}

static uint32_t u32_at(uintptr_t p, int offset)
{
  uint32_t v;
  memcpy(&v, (const void *)(p + (uintptr_t)offset), sizeof v);
  return v;
}

/* "3.11.7" from Py_Version (3.11+) or Py_GetVersion's text (3.10). */
static int find_minor(void)
{
  const unsigned long *hex = ol_prim_python_symbol("Py_Version");
  const char *(*text)(void) = (const char *(*)(void))ol_prim_python_symbol("Py_GetVersion");
  const char *full = text ? text() : NULL;
  int major = 0, minor = 0, micro = 0;
  if (hex) {
    major = (int)(*hex >> 24 & 0xff), minor = (int)(*hex >> 16 & 0xff), micro = (int)(*hex >> 8 & 0xff);
  } else if (!full || sscanf(full, "%d.%d.%d", &major, &minor, &micro) < 2) {
    return -1;
  }
  snprintf(version_text, sizeof version_text, "%d.%d.%d", major, minor, micro);
  /* A free-threaded build lays its objects out differently. */
  if (major != 3 || (full && strstr(full, "free-threading")))
    return -1;
  return minor;
}

/* The executable segments of the object that holds CPython (libpython, or
 * the python executable itself), to cut native stacks where Python takes
 * over: above that point the Python frames say it better, and the
 * interpreter's own return addresses change as it specializes code. */
static int find_interpreter(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  if (info->dlpi_addr != (uintptr_t)arg)
    return 0;
  for (int i = 0; i < info->dlpi_phnum && interpreter_segments < 4; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      interpreter_lo[interpreter_segments] = info->dlpi_addr + ph->p_vaddr;
      interpreter_hi[interpreter_segments++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
  }
  return 1;
}

static void find_interpreter_segments(void *symbol)
{
  Dl_info info;
  if (symbol && dladdr(symbol, &info) && info.dli_fbase) {
    /* dladdr gives the mapping's start; dl_iterate_phdr the load bias,
     * which differ for an executable linked at a fixed address. */
    struct link_map *map = NULL;
    if (dladdr1(symbol, &info, (void **)&map, RTLD_DL_LINKMAP) && map)
      dl_iterate_phdr(find_interpreter, (void *)map->l_addr);
  }
}

static void start(void)
{
  if (!ol_option_bool(OL_OPT_PYTHON_FRAMES)) {
    state = "off";
    return;
  }
  this_thread_state = (tstate_fn)ol_prim_python_symbol("PyGILState_GetThisThreadState");
  if (!this_thread_state)
    return; /* no CPython here: "none" */
  int minor = find_minor();
  for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
    if (layouts[i].minor == minor)
      layout = &layouts[i];
  addr2line = (addr2line_fn)ol_prim_python_symbol("PyCode_Addr2Line");
  finalizing = (flag_fn)ol_prim_python_symbol(minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
  code_type = ol_prim_python_symbol("PyCode_Type");
  unicode_type = ol_prim_python_symbol("PyUnicode_Type");
  if (!layout || !addr2line || !finalizing || !code_type || !unicode_type || sizeof(void *) != 8) {
    layout = NULL;
    state = "unsupported";
    ol_log_verbose("CPython %s: no Python frames (supported: 3.10 to 3.13)",
                   version_text[0] ? version_text : "of unknown version");
    return;
  }
  find_interpreter_segments((void *)addr2line);
  state = "ok";
}

bool ol_pyframes_in_interpreter(uintptr_t pc)
{
  for (int i = 0; i < interpreter_segments; i++)
    if (pc >= interpreter_lo[i] && pc < interpreter_hi[i])
      return true;
  return false;
}

static bool ready(void)
{
  pthread_once(&once, start);
  return layout && !atomic_load_explicit(&broken, memory_order_relaxed);
}

bool ol_pyframes_available(void)
{
  return ready();
}

static bool has_type(uintptr_t obj, const void *type)
{
  return obj && (obj & 7) == 0 && word_at(obj, OB_TYPE) == (uintptr_t)type;
}

static uintptr_t innermost(uintptr_t tstate)
{
  uintptr_t p = word_at(tstate, layout->tstate_frame);
  if (p && layout->cframe_current >= 0)
    p = word_at(p, layout->cframe_current);
  return p;
}

static uintptr_t code_of(uintptr_t frame)
{
  return word_at(frame, layout->frame_code);
}

/* How far into its code the frame is, in code units; may be negative or
 * past the end for a frame not started (3.11+). */
static int64_t raw_unit(uintptr_t frame, uintptr_t code)
{
  if (layout->instr_is_index)
    return (int32_t)u32_at(frame, layout->frame_instr);
  intptr_t bytes = (intptr_t)(word_at(frame, layout->frame_instr) -
                              (code + (uintptr_t)layout->code_units));
  return bytes / 2;
}

/* The code unit the frame is at, or -1 (not started, or out of range). */
static int64_t unit_of(uintptr_t frame, uintptr_t code)
{
  int64_t unit = raw_unit(frame, code);
  if (layout->instr_is_index)
    return unit;
  return unit >= 0 && unit < (int64_t)word_at(code, VAR_SIZE) ? unit : -1;
}

/* Frames the interpreter itself would not show: C-stack entry frames
 * (3.12+), and frames pushed but not started (3.11+). */
static bool hidden(uintptr_t frame, uintptr_t code, const class_slot_t *class)
{
  if (layout->frame_owner < 0)
    return false;
  char owner = *(const char *)(frame + (uintptr_t)layout->frame_owner);
  if (owner == OWNED_BY_CSTACK)
    return true;
  return owner != OWNED_BY_GENERATOR && raw_unit(frame, code) < class->first_traceable;
}

/* A string's characters as UTF-8 (compact strings only; others "?"). */
static size_t string_text(uintptr_t obj, char *out, size_t cap)
{
  size_t n = 0;
  if (cap == 0)
    return 0;
  uint32_t st = has_type(obj, unicode_type) ? u32_at(obj, STR_STATE) : 0;
  if (!(st & STATE_COMPACT)) {
    snprintf(out, cap, "?");
    return strlen(out);
  }
  size_t length = (size_t)word_at(obj, STR_LENGTH);
  unsigned kind = STATE_KIND(st);
  uintptr_t data = obj + (uintptr_t)((st & STATE_ASCII) ? layout->ascii_size : layout->compact_size);
  for (size_t i = 0; i < length; i++) {
    uint32_t c = kind == 1 ? ((const uint8_t *)data)[i]
               : kind == 2 ? ((const uint16_t *)data)[i] : ((const uint32_t *)data)[i];
    char utf8[4];
    size_t len = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (len == 1)
      utf8[0] = (char)c;
    else {
      for (size_t k = len - 1; k > 0; k--, c >>= 6)
        utf8[k] = (char)(0x80 | (c & 0x3f));
      utf8[0] = (char)((0xf0u << (4 - len)) | c);
    }
    if (n + len >= cap)
      break;
    memcpy(out + n, utf8, len);
    n += len;
  }
  out[n] = '\0';
  return n;
}

/* Where a library's path starts to be its own: "torch/nn/..." */
static const char *library_part(const char *path)
{
  static const char *const markers[] = {"/site-packages/", "/dist-packages/"};
  for (size_t i = 0; i < 2; i++) {
    const char *at = strstr(path, markers[i]);
    if (at)
      return at + strlen(markers[i]);
  }
  const char *lib = strstr(path, "/lib/python3");
  if (lib && (lib = strchr(lib + 1 + strlen("lib/"), '/')))
    return lib + 1;
  return NULL;
}

/* The job's own code: not a package, not the standard library, not frozen. */
static bool own_path(const char *path)
{
  return !library_part(path) && strncmp(path, "<frozen", 7) != 0;
}

/* The set of an object (16-byte aligned): its address's low bits, so
 * objects made one after another (a module's code objects) take different
 * sets, folded with the bits above them: CPython's small objects live in
 * pools of a few KiB, and the low bits alone send the objects at one
 * offset of pools 8 KiB apart to one set. Small code objects of one size
 * (wrappers, a model's many forward helpers) fill enough pools on a deep
 * stack to evict each other on every walk: indexed by the low bits alone,
 * the direct-mapped table this replaced missed on most frames of a
 * 120-frame stack (160 000 instructions an allocation,
 * scripts/bench_capture.sh BENCH_DEPTH=120). A multiplicative hash spreads
 * all objects at random and collides more on a small stack. */
static size_t spread(uintptr_t object, unsigned bits)
{
  uintptr_t h = object >> 4;
  return (size_t)(h ^ h >> bits) & (((size_t)1 << bits) - 1);
}

static bool own_file(uintptr_t name)
{
  file_slot_t *slot = &files[spread(name, 6)];
  _Static_assert(FILE_SLOTS == 1 << 6, "spread(name, 6) indexes FILE_SLOTS");
  if (slot->name != name) {
    char path[512];
    string_text(name, path, sizeof path);
    slot->own = own_path(path);
    slot->name = name;
  }
  return slot->own;
}

/* A code object in neither way of its set: checked to be one, read, and
 * put first (the other way keeps the one that was first). NULL: not a
 * code object. */
static const class_slot_t *__attribute__((noinline)) learn_class(class_slot_t set[2],
                                                                  uintptr_t code)
{
  if (!has_type(code, code_type))
    return NULL;
  set[1] = set[0];
  set[0] = (class_slot_t){
    .code = code,
    .own = own_file(word_at(code, layout->code_filename)),
    .first_traceable = layout->code_firsttraceable < 0
                           ? 0
                           : (int32_t)u32_at(code, layout->code_firsttraceable)};
  return &set[0];
}

/* The slot of the code object a frame runs, or NULL when it is not one. A
 * hit reads nothing of the object: the address was checked when it was
 * learnt, and a live frame holds its code object. The frames the key
 * keeps are checked again (capture), since their code is read. */
static inline __attribute__((always_inline)) const class_slot_t *class_of(class_slot_t (*table)[2],
                                                                        uintptr_t code)
{
  class_slot_t *set = table[spread(code, 9)];
  _Static_assert(CLASS_SETS == 1 << 9, "spread(code, 9) indexes CLASS_SETS");
  return set[0].code == code ? &set[0] : set[1].code == code ? &set[1] : learn_class(set, code);
}

/* This thread's table, found once a capture: in a shared library each
 * access to a thread-local is a call to __tls_get_addr, which the compiler
 * would otherwise make again on every frame. */
static class_slot_t (*__attribute__((noinline)) thread_classes(void))[2]
{
  return classes;
}

static uint64_t where_of(uintptr_t frame, uintptr_t code)
{
  uint32_t first = u32_at(code, layout->code_firstlineno);
  return (uint64_t)first << 32 | (uint32_t)unit_of(frame, code);
}

/* Counts and stops: the frames do not look like CPython's. */
static int unreadable(int kept)
{
  if (kept == 0 && !atomic_exchange(&broken, true))
    ol_log_warn("CPython %s frames do not look as expected; Python frames are off", version_text);
  return kept;
}

static void keep(uintptr_t frame, uintptr_t code, uintptr_t *pair)
{
  pair[0] = code;
  pair[1] = where_of(frame, code);
}

/* Past the innermost frames, the first shown frame of the job's own code,
 * or 0. This is where a deep stack's cost is (a Hugging Face forward under
 * checkpointing passes 40 to 80 library frames before the job's loop), so
 * a frame costs its code pointer, its slot and its link; whether a frame is
 * hidden, and the type check its fields' reads need, are asked of an own
 * frame alone. *bad: a frame that is not CPython's (the walk stops). */
static uintptr_t find_own(class_slot_t (*table)[2], uintptr_t frame, int walked, bool *bad)
{
  const int code_at = layout->frame_code, back_at = layout->frame_back;
  const bool code_always = layout->minor < 13; /* 3.13 frames may run something that is not code */
  for (; frame && walked < WALK_MAX; walked++, frame = word_at(frame, back_at)) {
    uintptr_t code = word_at(frame, code_at);
    const class_slot_t *class = class_of(table, code);
    bool is_code = class && (!class->own || has_type(code, code_type));
    if (!is_code && code_always) {
      *bad = true;
      return 0;
    }
    if (is_code && class->own && !hidden(frame, code, class))
      return frame;
  }
  return 0;
}

/* The innermost INNERMOST shown frames, then (when none of them is the
 * job's) the job's own first frame: what a site's key holds. */
int ol_pyframes_capture(uintptr_t *pairs, int max)
{
  if (!ready())
    return 0;
  /* Once the interpreter shuts down, a daemon thread's state may be freed
   * under it (by another thread): read no more frames. */
  uintptr_t tstate = finalizing() ? 0 : (uintptr_t)this_thread_state();
  uintptr_t frame = tstate ? innermost(tstate) : 0;
  class_slot_t(*table)[2] = frame ? thread_classes() : NULL;
  int kept = 0, walked = 0;
  bool have_own = false, bad = false;
  for (; frame && walked < WALK_MAX && kept < max && kept < INNERMOST; walked++) {
    uintptr_t code = code_of(frame);
    const class_slot_t *class = has_type(code, code_type) ? class_of(table, code) : NULL;
    if (!class) {
      if (layout->minor < 13) /* 3.13 frames may run something that is not code */
        return unreadable(kept);
    } else if (!hidden(frame, code, class)) {
      keep(frame, code, &pairs[2 * kept++]);
      have_own |= class->own;
    }
    frame = word_at(frame, layout->frame_back);
  }
  if (frame && !have_own && kept == INNERMOST && kept < max) {
    uintptr_t own = find_own(table, frame, walked, &bad);
    if (bad)
      return unreadable(kept);
    if (own)
      keep(own, code_of(own), &pairs[2 * kept++]);
  }
  atomic_fetch_add_explicit(kept ? &with_python : &without_python, 1, memory_order_relaxed);
  return kept;
}

/* "torch/nn/modules/linear.py:125:forward" or "train.py:42:main". */
void ol_pyframes_describe(uintptr_t code, uint64_t where, char *out, size_t cap)
{
  char path[512], name[128];
  if (!ready() || !has_type(code, code_type)) {
    snprintf(out, cap, "?");
    return;
  }
  string_text(word_at(code, layout->code_filename), path, sizeof path);
  string_text(word_at(code, layout->code_name), name, sizeof name);
  int32_t unit = (int32_t)(uint32_t)where;
  int line = addr2line((void *)code, unit < 0 ? -1 : unit * 2);
  const char *shown = library_part(path);
  if (!shown) {
    shown = strrchr(path, '/');
    shown = shown ? shown + 1 : path;
  }
  snprintf(out, cap, "%s:%d:%s", shown, line, name);
}

void ol_pyframes_status(ol_pyframes_status_t *out)
{
  pthread_once(&once, start);
  out->state = atomic_load(&broken) ? "unreadable" : state;
  out->version = version_text;
  out->with_python = atomic_load_explicit(&with_python, memory_order_relaxed);
  out->without_python = atomic_load_explicit(&without_python, memory_order_relaxed);
}
