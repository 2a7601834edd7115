/* report_text.c: the text report's pieces, from figures alone.
 *
 * The table follows the rows and columns of PyTorch's
 * torch.cuda.memory_summary(), one per device, so people read it the way
 * they already read theirs. Pure: the live writer (lib/report.c) and
 * `oomlens report` (analyze/report_view.c) both print through these, so a
 * report read back prints as the library wrote it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core.h"

#define RULE "|===========================================================================|\n"
#define LINE "|---------------------------------------------------------------------------|\n"


static void format_cell(char *out, size_t cap, int64_t value, bool bytes)
{
  if (bytes)
    ol_format_bytes(out, cap, value);
  else
    snprintf(out, cap, "%lld", (long long)value);
}

static void text_row(ol_buf_t *out, const char *title, const ol_stat_t *stat, bool bytes)
{
  char cells[4][32];
  format_cell(cells[0], sizeof cells[0], stat->current, bytes);
  format_cell(cells[1], sizeof cells[1], stat->peak, bytes);
  format_cell(cells[2], sizeof cells[2], stat->allocated, bytes);
  format_cell(cells[3], sizeof cells[3], stat->freed, bytes);
  ol_buf_printf(out, "| %-21s | %10s | %10s | %10s | %10s |\n", title, cells[0], cells[1],
                cells[2], cells[3]);
}

static void text_pool_rows(ol_buf_t *out, const char *title, const ol_stat_t stat[], bool bytes)
{
  text_row(out, title, &stat[OL_POOL_ALL], bytes);
  text_row(out, "      from large pool", &stat[OL_POOL_LARGE], bytes);
  text_row(out, "      from small pool", &stat[OL_POOL_SMALL], bytes);
  ol_buf_printf(out, LINE);
}

void ol_report_text_device(ol_buf_t *out, int device, const ol_device_stats_t *dev)
{
  char title[80], left[40], right[40];
  snprintf(title, sizeof title, "oomlens CUDA memory summary, device ID %d", device);
  snprintf(left, sizeof left, "CUDA OOMs: %lld", (long long)dev->num_ooms);
  snprintf(right, sizeof right, "failed allocations: %lld", (long long)dev->failed_allocs);
  ol_buf_printf(out, RULE "| %-73s |\n" LINE, title);
  ol_buf_printf(out, "| %-35s | %-35s |\n" RULE, left, right);
  ol_buf_printf(out, "| %-21s | %-10s | %-10s | %-10s | %-10s |\n" LINE, "Metric", "Cur Usage",
                "Peak Usage", "Tot Alloc", "Tot Freed");
#define OL_TEXT_ROWS(field, row_title, bytes) text_pool_rows(out, row_title, dev->field, bytes);
  OL_STAT_FIELDS(OL_TEXT_ROWS)
#undef OL_TEXT_ROWS
  text_row(out, "Oversize allocations", &dev->oversize_allocations, false);
  ol_buf_printf(out, LINE);
  text_row(out, "Oversize GPU segments", &dev->oversize_segments, false);
  ol_buf_printf(out, LINE);
  text_row(out, "VMM mapped memory", &dev->vmm_mapped_bytes, true);
  text_row(out, "VMM address space", &dev->va_reserved_bytes, true);
  text_row(out, "Freed, awaiting fence", &dev->pending_bytes, true);
  ol_buf_printf(out, RULE);
}

void ol_report_text_origins(ol_buf_t *out, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, "Where the reserved memory came from (current / peak):\n");
#define OL_TEXT_ORIGIN(name, what)                                                  \
  {                                                                                 \
    char cur[32], peak[32];                                                         \
    ol_format_bytes(cur, sizeof cur, dev->origin_bytes[OL_ORIGIN_##name].current);  \
    ol_format_bytes(peak, sizeof peak, dev->origin_bytes[OL_ORIGIN_##name].peak);   \
    ol_buf_printf(out, "  %-8s %12s / %-12s %s\n", #name, cur, peak, what);         \
  }
  OL_ORIGINS(OL_TEXT_ORIGIN)
#undef OL_TEXT_ORIGIN
}

void ol_report_text_stacks_note(ol_buf_t *out, const ol_report_stacks_t *s)
{
  ol_pyframes_status_t py = s->py;
  uint64_t sample = s->sample;
  ol_buf_printf(out, "Call sites: native frames %s",
                s->native ? "by libunwind" : "unavailable (no libunwind.so.8)");
  if (sample)
    ol_buf_printf(out, ", stacks for a sample of one in %llu bytes",
                  (unsigned long long)sample);
  ol_buf_printf(out, "; Python frames: ");
  if (!strcmp(py.state, "ok"))
    ol_buf_printf(out, "CPython %s, in %llu of %llu stacks taken (the others: threads "
                       "without Python)\n", py.version, (unsigned long long)py.with_python,
                  (unsigned long long)(py.with_python + py.without_python));
  else if (!strcmp(py.state, "off"))
    ol_buf_printf(out, "off (OOMLENS_PYTHON_FRAMES=0)\n");
  else if (!strcmp(py.state, "none"))
    ol_buf_printf(out, "none (no CPython in this process)\n");
  else if (!strcmp(py.state, "unsupported"))
    ol_buf_printf(out, "none (CPython %s is not supported: 3.10 to 3.13)\n",
                  py.version[0] ? py.version : "of unknown version");
  else
    ol_buf_printf(out, "stopped (CPython %s frames did not look as expected)\n", py.version);
}

void ol_report_text_sites_title(ol_buf_t *out, bool by_total)
{
  ol_buf_printf(out, "%s\n", by_total ? "Call sites by total allocated:"
                                      : "Call sites holding memory at the peak:");
}

void ol_report_text_site_figures(ol_buf_t *out, int64_t bytes, int64_t allocations)
{
  char text[32];
  ol_format_bytes(text, sizeof text, bytes);
  ol_buf_printf(out, "  %10s  %6lld allocs  ", text, (long long)allocations);
}

void ol_report_text_calls(ol_buf_t *out, const ol_device_stats_t *dev, ol_site_namer_t namer,
                          void *arg)
{
  ol_buf_printf(out, "Calls seen:\n");
#define OL_TEXT_CALL(field, what) \
  ol_buf_printf(out, "  %-16s %12lld  %s\n", #field, (long long)dev->field, what);
  OL_CALL_FIELDS(OL_TEXT_CALL)
#undef OL_TEXT_CALL
  if (dev->mem_total > 0) {
    char free_text[32], total_text[32];
    ol_format_bytes(free_text, sizeof free_text, dev->mem_free);
    ol_format_bytes(total_text, sizeof total_text, dev->mem_total);
    ol_buf_printf(out, "Device memory at the last cuMemGetInfo: %s free of %s\n", free_text,
                  total_text);
  }
  if (dev->num_ooms > 0) {
    char request[32];
    ol_format_bytes(request, sizeof request, dev->last_oom_request);
    ol_buf_printf(out, "Last out-of-memory request: %s\n", request);
    if (dev->last_oom.capacity > 0) {
      ol_oom_explain(out, &dev->last_oom, dev->last_oom_class, namer, arg);
      ol_buf_printf(out, "\n");
    }
  }
}

void ol_report_text_header(ol_buf_t *out, const ol_report_context_t *ctx, const char *version,
                           const char *mode, bool tracking_failed, int device_count,
                           const ol_report_stacks_t *stacks)
{
  time_t when = (time_t)ctx->time_unix;
  struct tm tm;
  char stamp[64];
  gmtime_r(&when, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
  ol_buf_printf(out, "oomlens %s memory report (%s mode)\n", version, mode);
  ol_buf_printf(out, "pid %ld, rank %s, written at %s (%s)\n", ctx->pid, ctx->rank, ctx->reason,
                stamp);
  ol_buf_printf(out, "command: %s\n", ctx->command);
  if (tracking_failed)
    ol_buf_printf(out, "warning: tracking stopped early (out of host memory); "
                       "figures stop at that point\n");
  if (stacks)
    ol_report_text_stacks_note(out, stacks);
  if (device_count == 0)
    ol_buf_printf(out, "\nNo device memory was allocated through CUDA in this process.\n");
}
