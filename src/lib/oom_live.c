/* oom_live.c: the diagnosis at a live job's failed allocation.
 *
 * Gathers the record oom.c classifies: the device's capacity and free
 * memory from the driver (or OOMLENS_CAPACITY), what this process holds and
 * what outlives its iterations (tracker), the pool's free blocks in manage
 * mode, and so what others hold. Prints one paragraph on stderr (a few per
 * process: a framework may retry after releasing its cache, so the first
 * failures are often not the last word) and keeps the last for the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib.h"
#include "prim.h"

#define PARAGRAPHS_PRINTED 3

static atomic_int printed;

/* Tensors reach us only when PyTorch's cache is off or in manage mode;
 * otherwise what we see are its segments. */
static bool sees_segments_only(void)
{
  const char *no_cache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
  const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  bool tensors = ol_manage_on() || (no_cache && strcmp(no_cache, "0") != 0) ||
                 (conf && strstr(conf, "cudaMallocAsync"));
  return !tensors;
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
}

typedef struct explain_args {
  ol_buf_t *out;
  const ol_oom_record_t *record;
  ol_oom_class_t cause;
} explain_args_t;

static void explain_with_sites(const ol_sites_t *sites, void *arg)
{
  explain_args_t *a = arg;
  ol_oom_explain(a->out, a->record, a->cause, ol_report_stack_namer, (void *)sites);
}

/* The paragraph, naming the record's sites when stacks are on. */
static void explain_now(ol_buf_t *out, int device, const ol_oom_record_t *r, ol_oom_class_t cause)
{
  explain_args_t args = {out, r, cause};
  if (!ol_track_sites(device, explain_with_sites, &args))
    ol_oom_explain(out, r, cause, NULL, NULL);
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

/* Who holds the device's memory besides our allocations, per NVML: this
 * process in all (context and libraries included), the others largest
 * first. Nothing when NVML is not there. */
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
  for (int i = 0; i < r->other_count; i++)
    process_name(r->others[i].pid, r->others[i].name);
}

void ol_oom_at_failure(int device, uint64_t request)
{
  ol_oom_record_t r = {.request = request, .free_reserved = -1, .largest_free_block = -1};
  ol_track_oom_figures(device, &r);
  device_figures(device, &r);
  if (r.capacity == 0)
    return; /* nothing to compare with */
  ol_manage_free_blocks(device, &r.free_reserved, &r.largest_free_block);
  if (r.external > 0)
    who_else_holds(device, &r);
  r.segments_only = sees_segments_only();
  r.managed = ol_manage_on();
  r.batch = (int64_t)ol_option_size(OL_OPT_BATCH);
  ol_oom_class_t cause = ol_oom_classify(&r);
  ol_track_oom_diagnosis(device, &r, cause);
  if (atomic_fetch_add(&printed, 1) >= PARAGRAPHS_PRINTED)
    return;
  ol_buf_t text = {0};
  explain_now(&text, device, &r, cause);
  if (!text.failed && text.data)
    ol_log_info("device %d: %s", device, text.data);
  ol_buf_free(&text);
}
