/* oom_live.c: the diagnosis at a live job's failed allocation.
 *
 * Gathers the record oom.c classifies, at each failed attempt: the
 * device's capacity and free memory from the driver (or OOMLENS_CAPACITY),
 * what this process holds and what outlives its iterations (tracker), the
 * pool's free blocks in manage mode, and so what others hold. A failure is
 * not yet an OOM the job saw: PyTorch's cache frees its segments and asks
 * again, and only when that fails too raises its error. So the record
 * waits in the tracker for the account's verdict (core/account.c): the
 * retry served drops it (counted as recovered); anything else settles it,
 * and the tracker prints its one paragraph (ol_oom_paragraph) and keeps it
 * for the report. Where no allocator above us retries (PyTorch's cache
 * off, as `oomlens run --manage` sets, or its cudaMallocAsync backend),
 * the failure is settled at once, so the paragraph comes before the job's
 * traceback; where one does, PyTorch asks cudaMemGetInfo for its error
 * message right after giving up (intercept.c settles there), and a report
 * or the process's end settles whatever still waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib.h"
#include "prim.h"

#define PARAGRAPHS_PRINTED 5 /* one per OOM; a job that catches them in a loop is told once */

static atomic_int printed;

/* PyTorch's cudaMallocAsync backend asked for: every tensor is a
 * cudaMallocAsync, and a refusal is raised at once. */
bool ol_pytorch_async_backend(void)
{
  const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  return conf && strstr(conf, "cudaMallocAsync");
}

/* PyTorch's caching allocator turned off (as `oomlens run --manage` does),
 * read as PyTorch reads it: c10::utils::check_env, true for "1" only; "0"
 * is false, and any other value (empty, "true") is ignored with a warning,
 * the cache left on. */
bool ol_pytorch_cache_off(void)
{
  const char *no_cache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
  return no_cache && strcmp(no_cache, "1") == 0;
}

/* PyTorch's cache on with expandable segments: the cuMemCreate memory of
 * this process is PyTorch's own (else another library's: JAX's, NCCL's). */
static bool pytorch_expandable(void)
{
  const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (ol_manage_on() || ol_pytorch_cache_off() || !conf)
    return false;
  const char *at = strstr(conf, "expandable_segments:");
  return at && (strncmp(at + strlen("expandable_segments:"), "True", 4) == 0 ||
                strncmp(at + strlen("expandable_segments:"), "true", 4) == 0);
}

/* Tensors reach us only when PyTorch's cache is off or in manage mode;
 * otherwise what we see are its segments. */
static bool sees_segments_only(void)
{
  return !(ol_manage_on() || ol_pytorch_cache_off() || ol_pytorch_async_backend());
}

static void device_figures(int device, ol_oom_record_t *r)
{
  size_t free_bytes = 0, total_bytes = 0;
  r->device_free = -1;
  if (ol_prim_mem_info(&free_bytes, &total_bytes) == 0) {
    ol_capacity_clamp(device, &free_bytes, &total_bytes);
    r->capacity = total_bytes;
    r->device_free = (int64_t)free_bytes;
  } else {
    r->capacity = ol_option_size(OL_OPT_CAPACITY);
  }
  int64_t others = (int64_t)r->capacity - r->device_free - r->reserved;
  r->external = r->device_free >= 0 && others > 0 ? others : 0;
  /* Under OOMLENS_CAPACITY the smaller device's free memory stops at
   * zero, and others may hold more than the cap leaves them (held-out
   * external_late: "others hold 6.51 GiB" beside NVML's 8.51 GiB for the
   * other process): what the driver says they hold, as the clamp just
   * measured it. */
  int64_t measured = ol_capacity_outside(device);
  if (measured > r->external)
    r->external = measured;
}

/* Does an allocator above us free a cache and retry a refused request?
 * PyTorch's caching allocator does, unless it is off or replaced by its
 * cudaMallocAsync backend (which raises at the first refusal). A program
 * we know nothing of may, too: its failure then waits for what follows. */
static bool allocator_may_retry(void)
{
  return !ol_pytorch_cache_off() && !ol_pytorch_async_backend();
}

/* Whether PyTorch's CUDA library is in the process (asked of the loader,
 * without loading it). */
static bool pytorch_loaded(void)
{
  void *c10 = ol_prim_dlopen_loaded("libc10_cuda.so");
  if (c10)
    ol_prim_dlclose(c10);
  return c10 != NULL;
}

/* PyTorch's caching allocator, its cache on: when it gives up it asks what
 * is free (cudaMemGetInfo) for its message and then throws
 * c10::OutOfMemoryError, whose message says what its cache held (the
 * library sees the throw: intercept.c). Known once found; asked again
 * until then (a library may ask what is free before PyTorch is loaded). */
bool ol_oom_framework_will_say(void)
{
  static atomic_bool found;
  if (atomic_load(&found))
    return true;
  bool now = sees_segments_only() && pytorch_loaded();
  atomic_store(&found, now);
  return now;
}

/* PyTorch with its cache off (as `oomlens run --manage` sets) checks a
 * refused cudaMalloc as it checks any CUDA call: the job gets
 * torch.AcceleratorError ("CUDA error: out of memory"), not
 * torch.OutOfMemoryError, which a handler for the latter misses (every
 * OOM of the held-out sets under --manage on the H200, 2026-12-03). Its
 * cudaMallocAsync backend raises OutOfMemoryError. Asked once. */
static bool pytorch_raises_cuda_error(void)
{
  static atomic_int known = -1;
  int now = atomic_load(&known);
  if (now >= 0)
    return now == 1;
  bool raises = ol_pytorch_cache_off() && !ol_pytorch_async_backend() && pytorch_loaded();
  atomic_store(&known, raises ? 1 : 0);
  return raises;
}

void ol_oom_paragraph(int device, const ol_oom_record_t *r, ol_oom_class_t cause,
                      const ol_sites_t *sites)
{
  int n = atomic_fetch_add(&printed, 1);
  if (n > PARAGRAPHS_PRINTED)
    return;
  if (n == PARAGRAPHS_PRINTED) {
    ol_log_info("device %d: further out-of-memory errors are counted and diagnosed in the "
                "report only", device);
    return;
  }
  ol_buf_t text = {0};
  ol_oom_explain(&text, r, cause, sites ? ol_report_stack_namer : NULL, (void *)sites);
  if (!text.failed && text.data)
    ol_log_info("device %d: %s", device, text.data);
  ol_buf_free(&text);
  if (n == 0 && pytorch_raises_cuda_error())
    ol_log_info("PyTorch raises this out-of-memory as torch.AcceleratorError (\"CUDA error: "
                "out of memory\"), not torch.OutOfMemoryError: its cache is off "
                "(PYTORCH_NO_CUDA_MEMORY_CACHING, as --manage sets), so code that catches "
                "OutOfMemoryError misses it; with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "
                "added, --manage gives OutOfMemoryError");
}

/* A process's short name, as ps shows it; "" when /proc will not say. */
static void process_name(uint32_t pid, char name[16])
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/comm", pid);
  name[0] = '\0';
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  if (fgets(name, 16, f))
    name[strcspn(name, "\n")] = '\0';
  fclose(f);
}

/* A process's parent, from /proc/PID/stat (its name, in parentheses, may
 * hold spaces and parentheses: the fields follow the last ')'); 0 when
 * /proc will not say. */
static uint32_t parent_of(uint32_t pid)
{
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  size_t got = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[got] = '\0';
  const char *end = strrchr(line, ')');
  unsigned ppid = 0;
  if (!end || sscanf(end + 1, " %*c %u", &ppid) != 1)
    return 0;
  return ppid;
}

/* Whether pid was started by this process, or by one it started (a
 * DataLoader worker, a spawn context's resource tracker's child). */
static bool started_by(uint32_t pid, uint32_t self)
{
  for (int depth = 0; depth < 16 && pid > 1; depth++) {
    pid = parent_of(pid);
    if (pid == self)
      return true;
  }
  return false;
}

/* Who holds the device's memory besides our allocations, per NVML: this
 * process in all (context and libraries included), the others largest
 * first (those beyond the list counted), and which of them this process
 * started. Nothing when NVML is not there. */
static void who_else_holds(int device, ol_oom_record_t *r)
{
  ol_gpu_process_t procs[64];
  int n = ol_prim_device_processes(device, procs, 64);
  uint32_t self = (uint32_t)getpid();
  for (int i = 0; i < n; i++) {
    if (procs[i].pid == self) {
      r->self_device_bytes = procs[i].bytes;
      continue;
    }
    int at = r->other_count < OL_OOM_SITES ? r->other_count++ : OL_OOM_SITES;
    if (at == OL_OOM_SITES) { /* the smallest listed or this one drops off the list */
      bool listed = procs[i].bytes > r->others[OL_OOM_SITES - 1].bytes;
      r->others_unlisted++;
      r->others_unlisted_bytes = ol_sat_add(
        r->others_unlisted_bytes, listed ? r->others[OL_OOM_SITES - 1].bytes : procs[i].bytes);
    }
    while (at > 0 && r->others[at - 1].bytes < procs[i].bytes) {
      if (at < OL_OOM_SITES)
        r->others[at] = r->others[at - 1];
      at--;
    }
    if (at < OL_OOM_SITES) {
      r->others[at].pid = procs[i].pid;
      r->others[at].bytes = procs[i].bytes;
    }
  }
  for (int i = 0; i < r->other_count; i++) {
    process_name(r->others[i].pid, r->others[i].name);
    r->others[i].child = started_by(r->others[i].pid, self);
  }
}

/* The framework's own limit is the device this process has: what it may
 * reserve, all its own (the context and other processes are outside it). */
static void against_framework_limit(ol_oom_record_t *r, uint64_t limit)
{
  r->framework_limit = (int64_t)limit;
  r->capacity = limit;
  r->device_free = r->reserved < (int64_t)limit ? (int64_t)limit - r->reserved : 0;
  r->external = 0;
  r->self_device_bytes = -1;
}

/* PyTorch's figures, where the message gave them: its free reserved memory
 * (the cache's blocks, inside segments we see whole) and its tensors; its
 * cache searched those free blocks and none held the request. */
static void take_framework_word(ol_oom_record_t *r, const void *arg)
{
  const ol_framework_oom_t *oom = arg;
  if (oom->free_reserved < 0)
    return;
  r->free_reserved = oom->free_reserved;
  r->framework_allocated = oom->allocated;
  r->no_block_held = true;
}

void ol_oom_framework_word(int device, const ol_framework_oom_t *oom)
{
  ol_track_oom_amend(device, take_framework_word, oom);
  ol_track_oom_settle(device);
}

void ol_oom_at_failure(int device, uint64_t request, uint64_t framework_limit)
{
  ol_oom_record_t r;
  ol_oom_record_init(&r, request);
  ol_track_oom_figures(device, &r);
  device_figures(device, &r);
  if (framework_limit > 0 && framework_limit <= INT64_MAX)
    against_framework_limit(&r, framework_limit);
  if (r.capacity == 0)
    return; /* nothing to compare with: counted, not diagnosed */
  ol_manage_free_blocks(device, &r.free_reserved, &r.largest_free_block);
  if (r.external > 0)
    who_else_holds(device, &r);
  r.segments_only = sees_segments_only();
  r.managed = ol_manage_on();
  r.vmm_not_framework = !pytorch_expandable();
  ol_oom_set_batch(&r, (int64_t)ol_option_size(OL_OPT_BATCH));
  ol_track_oom_pending(device, &r, ol_oom_classify(&r));
  if (r.framework_limit > 0 || !allocator_may_retry()) /* a framework's refusal is its last word */
    ol_track_oom_settle(device);
}
