/* replay_cmd.c: `oomlens replay`, a trace run through an allocation policy
 * on a simulated device: peak allocated and reserved, and whether and where
 * it would run out. Exit codes: 0 when the replay ran (running out of
 * memory is an answer, not a failure), 2 for a usage or input error, 1 when
 * the host itself runs out of memory. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "input.h"
#include "commands.h"
#include "core.h"
#include "progress.h"
#include "trace_csv.h"
#include "policy.h"
#include "replay.h"

typedef struct replay_args {
  const char *trace;
  const char *policy;
  ol_policy_options_t options;
  bool json;
  bool capacity_given;
  int device; /* -1: all */
  uint64_t batch; /* 0: not given */
  bool no_sites;
} replay_args_t;

static void print_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens replay TRACE [--capacity SIZE] [--policy NAME]\n"
          "                      [--max-split-size SIZE] [--device N] [--batch N] [--no-trim]\n"
          "                      [--keep-used] [--reuse-held] [--map-unit N] [--no-sites]\n"
          "                      [--json]\n"
          "\n"
          "Replays a recorded allocation trace (oomlens's own, OOMLENS_TRACE, or the\n"
          "CSV of PyTorch's recorder; gzip'd or plain) through an allocator on a\n"
          "simulated device, and tells its peak reserved memory and whether and where\n"
          "it runs out.\n"
          "\n"
          "  --capacity SIZE        device memory (default: the device's size in an\n"
          "                         oomlens trace, else 139.8 GiB = %" PRIu64 " bytes)\n"
          "  --policy NAME          oomlens (our allocator, the default), pytorch (a model\n"
          "                         of PyTorch's caching allocator) or pytorch-expandable\n"
          "                         (the same with expandable_segments:True)\n"
          "  --max-split-size SIZE  blocks at or above it are never split (default: none)\n"
          "  --device N             only device N's events (default: all)\n"
          "  --batch N              the recorded job's batch size: an out-of-memory's\n"
          "                         advice then names the batch that fits\n"
          "  --no-trim              oomlens: never unmap free memory but to serve a request\n"
          "                         (the live OOMLENS_POOL_TRIM=0)\n"
          "  --keep-used            oomlens: trims spare memory used of late once the job\n"
          "                         has come back to what a trim unmapped (the live\n"
          "                         OOMLENS_POOL_KEEP_USED=1)\n"
          "  --reuse-held           oomlens: frees the recorded pool held beside the job's\n"
          "                         other streams go back before the next request (the\n"
          "                         live OOMLENS_POOL_REUSE_HELD=1)\n"
          "  --map-unit N           oomlens: chunks one physical allocation may hold, 1 to\n"
          "                         512 (the live OOMLENS_POOL_UNIT; default 1)\n"
          "  --no-sites             every event as if it had no call site (a job without\n"
          "                         Python frames): the diagnosis by timing alone\n"
          "  --json                 one JSON object on stdout\n"
          "\n"
          "SIZE is in bytes, or with a K, M, G or T suffix (powers of 1024), which may\n"
          "follow a fraction (1.5G). Options take their value after '=' too.\n"
          "Exit status: 0 when it ran (out of memory or not), 2 for a usage or input error.\n",
          OL_REPLAY_DEFAULT_CAPACITY);
}

static const ol_opt_t opts[] = {
  OL_VALUE("--capacity", &ol_arg_size, replay_args_t, options.capacity),
  OL_VALUE("--max-split-size", &ol_arg_size, replay_args_t, options.max_split_size),
  OL_VALUE("--policy", &ol_arg_text, replay_args_t, policy),
  OL_VALUE("--device", &ol_arg_device, replay_args_t, device),
  OL_VALUE("--batch", &ol_arg_batch, replay_args_t, batch),
  OL_FLAG("--json", replay_args_t, json),
  OL_FLAG("--no-trim", replay_args_t, options.keep_mapped),
  OL_FLAG("--keep-used", replay_args_t, options.keep_used),
  OL_FLAG("--reuse-held", replay_args_t, options.reuse_held),
  OL_VALUE("--map-unit", &ol_arg_unit, replay_args_t, options.map_unit),
  OL_FLAG("--no-sites", replay_args_t, no_sites),
  {0},
};

/* true parsed; false: return *status (help printed, or a usage error said). */
static bool parse_args(int argc, char **argv, replay_args_t *a, int *status)
{
  static const ol_cmd_t cmd = {"replay", opts, print_help, false};
  const uint64_t unset = UINT64_MAX; /* tells a --capacity given from none */
  *a = (replay_args_t){.policy = "oomlens", .options.capacity = unset, .device = -1};
  int n;
  if (!ol_args_take(&cmd, argc, argv, a, &n, status))
    return false;
  if (n != 1) {
    *status = n == 0 ? ol_args_usage("replay", "no trace given")
                     : ol_args_usage("replay", "more than one trace given ('%s')", argv[1]);
    return false;
  }
  a->trace = argv[0];
  a->capacity_given = a->options.capacity != unset;
  if (!a->capacity_given)
    a->options.capacity = OL_REPLAY_DEFAULT_CAPACITY;
  if (a->options.capacity == 0) {
    *status = ol_args_usage("replay", "--capacity must be more than 0");
    return false;
  }
  return true;
}

static double ratio_of(const ol_replay_result_t *r)
{
  return r->peak_requested > 0 ? (double)r->stats.reserved_peak / (double)r->peak_requested : 0;
}

/* Who held the peak: every site with bytes live then, largest first, as
 * the report lists its sites (core's builder: stacks alike in the frames
 * shown are one entry); they sum to peak_allocated. false: out of memory. */
static bool peak_sites(ol_report_sites_t *list, const ol_sites_t *sites)
{
  return ol_report_sites_build(list, sites, OL_SITES_BY_AT_PEAK, ol_sites_text_frames,
                               ol_sites_count(sites));
}

/* Each entry's site is its frames joined as the report joins them. */
static void print_peak_sites(ol_buf_t *out, const ol_sites_t *sites)
{
  ol_report_sites_t list = {0};
  out->failed |= !peak_sites(&list, sites);
  ol_buf_printf(out, ", \"peak_sites\": [");
  for (size_t i = 0; i < list.count; i++) {
    const ol_report_site_t *s = &list.site[i];
    ol_buf_t name = {0};
    ol_frame_join_t j = {&name, 0};
    for (size_t f = 0; f < s->frames.count; f++)
      ol_frame_join_text(s->frames.frame[f], &j);
    out->failed |= name.failed;
    ol_buf_printf(out, "%s{\"site\": ", i ? ", " : "");
    ol_buf_json_string(out, name.data ? name.data : "");
    ol_buf_printf(out, ", \"bytes\": %" PRId64 ", \"allocations\": %" PRId64 ", \"stacks\": %d}",
                  s->bytes, s->allocations, s->stacks);
    ol_buf_free(&name);
  }
  ol_buf_printf(out, "]");
  ol_report_sites_free(&list);
}

/* A trace's site named as the library's report names one (core's namer
 * over the trace's frames). */
static void name_site(ol_buf_t *out, int32_t id, bool json, void *sites)
{
  ol_report_site_name(out, sites, ol_sites_text_frames, id, json);
}

/* Memory by role at the peak of the bytes the trace asked for, as its
 * report shows it (the sites' at-peak bytes by their roles). */
static bool peak_roles(const ol_replay_result_t *r, int64_t bytes[OL_ROLE_COUNT])
{
  bool known = false;
  if (r->account)
    ol_account_role_bytes(r->account, 0, OL_SITES_BY_AT_PEAK, &known, bytes);
  else
    memset(bytes, 0, OL_ROLE_COUNT * sizeof *bytes);
  return known;
}

static void print_json_roles(ol_buf_t *out, const ol_replay_result_t *r)
{
  int64_t bytes[OL_ROLE_COUNT];
  bool known = peak_roles(r, bytes);
  ol_buf_printf(out, ", \"roles_known\": %s, \"peak_roles\": ", known ? "true" : "false");
  ol_roles_json(out, bytes);
}

static void json_calls(ol_buf_t *out, const char *name, const ol_policy_calls_t *c)
{
  ol_buf_printf(out,
                ", \"%s\": {\"creates\": %" PRId64 ", \"maps\": %" PRId64
                ", \"unmaps\": %" PRId64 ", \"releases\": %" PRId64 ", \"mallocs\": %" PRId64
                ", \"frees\": %" PRId64 ", \"total\": %" PRId64 "}",
                name, c->creates, c->maps, c->unmaps, c->releases, c->mallocs, c->frees,
                ol_policy_calls_total(c));
}

/* The driver calls, all of them and those of the steady state. */
static void print_json_calls(ol_buf_t *out, const ol_replay_result_t *r)
{
  ol_replay_steady_t st;
  ol_replay_steady(r, &st);
  json_calls(out, "driver_calls", &r->stats.calls);
  ol_buf_printf(out, ", \"steady_state\": {\"iterations\": %" PRIu64 ", \"of\": %" PRIu64,
                st.iterations, st.of);
  json_calls(out, "calls", &st.calls);
  json_calls(out, "worst_iteration", &st.worst);
  ol_buf_printf(out, "}, \"followed\": {\"held_frees\": %" PRIu64 ", \"driver_allocs\": %" PRIu64
                "}", r->held_frees, r->driver_allocs);
}

static int print_json(const replay_args_t *a, const ol_replay_result_t *r)
{
  ol_buf_t out = {0};
  ol_buf_printf(&out, "{\"trace\": ");
  ol_buf_json_string(&out, a->trace);
  ol_buf_printf(&out, ", \"policy\": ");
  ol_buf_json_string(&out, a->policy);
  ol_buf_printf(&out,
                ", \"capacity\": %" PRIu64 ", \"max_split_size\": %" PRIu64
                ", \"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64
                ", \"unknown_frees\": %" PRIu64 ", \"trace_ooms\": %" PRIu64
                ", \"peak_allocated\": %" PRId64 ", \"peak_reserved\": %" PRId64
                ", \"ratio\": %.4f, \"policy_peak_allocated\": %" PRId64
                ", \"segments\": %" PRId64 ", \"oom\": ",
                a->options.capacity, a->options.max_split_size, r->events, r->allocs, r->frees,
                r->unknown_frees, r->trace_ooms, r->peak_requested, r->stats.reserved_peak,
                ratio_of(r), r->stats.allocated_peak, r->stats.segments);
  if (!r->oom) {
    ol_buf_printf(&out, "null");
  } else {
    const ol_replay_oom_t *o = &r->oom_at;
    ol_buf_printf(&out,
                  "{\"event_index\": %" PRIu64 ", \"line\": %" PRIu64 ", \"size\": %" PRIu64
                  ", \"recorded\": %s, \"allocated\": %" PRId64 ", \"reserved\": %" PRId64
                  ", \"free_reserved\": %" PRId64 ", \"largest_free_block\": %" PRId64
                  ", \"class\": \"%s\", \"diagnosis\": ",
                  o->event_index, o->line, o->size, o->recorded ? "true" : "false",
                  o->stats.allocated, o->stats.reserved, o->stats.free_reserved,
                  o->stats.largest_free_block, ol_oom_class_name(o->cause));
    ol_oom_json(&out, &o->record, o->cause, name_site, r->sites);
    ol_buf_printf(&out, "}");
  }
  ol_buf_printf(&out, ", \"recorded_ooms\": %" PRIu64 ", \"recovered_allocs\": %" PRIu64
                ", \"recorded_oom\": ", r->recorded_ooms, r->recovered_allocs);
  if (!r->recorded) {
    ol_buf_printf(&out, "null");
  } else {
    const ol_replay_recorded_t *o = &r->recorded_oom;
    ol_buf_printf(&out,
                  "{\"line\": %" PRIu64 ", \"size\": %" PRIu64 ", \"context\": %s"
                  ", \"class\": \"%s\", \"job_class\": ",
                  o->line, o->size, o->has_context ? "true" : "false",
                  ol_oom_class_name(o->cause));
    if (o->job_cause < OL_OOM_CLASS_COUNT)
      ol_buf_printf(&out, "\"%s\"", ol_oom_class_name(o->job_cause));
    else
      ol_buf_printf(&out, "null");
    ol_buf_printf(&out, ", \"policy_fits\": %s, \"diagnosis\": ", r->oom ? "false" : "true");
    ol_oom_json(&out, &o->record, o->cause, name_site, r->sites);
    ol_buf_printf(&out, "}");
  }
  print_json_calls(&out, r);
  print_peak_sites(&out, r->sites);
  print_json_roles(&out, r);
  ol_buf_printf(&out, ", \"trace_note\": ");
  if (r->note[0])
    ol_buf_json_string(&out, r->note);
  else
    ol_buf_printf(&out, "null");
  ol_buf_printf(&out, "}\n");
  int status = OL_EXIT_OK;
  if (out.failed) {
    fputs("oomlens replay: out of host memory\n", stderr);
    status = OL_EXIT_FAILURE;
  } else {
    fwrite(out.data, 1, out.len, stdout);
  }
  ol_buf_free(&out);
  return status;
}

static const char *bytes_text(int64_t bytes, char *buf, size_t cap)
{
  ol_format_bytes(buf, cap, bytes);
  return buf;
}

static void print_oom(const ol_replay_result_t *r)
{
  const ol_replay_oom_t *o = &r->oom_at;
  char b1[32], b2[32], b3[32], b4[32], b5[32];
  printf("out of memory:    yes, at event %" PRIu64 " (line %" PRIu64 "): %s requested%s\n",
         o->event_index, o->line, bytes_text((int64_t)o->size, b1, sizeof b1),
         o->recorded ? " (where the recorded run ran out too)" : "");
  printf("  at that moment: %s allocated, %s reserved, %s reserved but free,\n"
         "                  largest free block %s\n",
         bytes_text(o->stats.allocated, b2, sizeof b2), bytes_text(o->stats.reserved, b3, sizeof b3),
         bytes_text(o->stats.free_reserved, b4, sizeof b4),
         bytes_text(o->stats.largest_free_block, b5, sizeof b5));
  /* One OOM, one diagnosis: where the policy ran out at the job's own OOM
   * for the same reason, the recorded paragraph above is the one to read
   * (its figures count what the job's device held outside the allocator;
   * a second paragraph from the replayed device differed in them). */
  if (r->recorded && o->recorded && o->line == r->recorded_oom.line &&
      o->cause == r->recorded_oom.cause) {
    printf("  why:            as for the recorded OOM above (%s)\n", ol_oom_class_name(o->cause));
    return;
  }
  ol_buf_t why = {0};
  ol_oom_explain(&why, &o->record, o->cause, name_site, r->sites);
  if (!why.failed && why.data)
    printf("  why:            %s\n", why.data);
  ol_buf_free(&why);
}

/* The out-of-memory the recorded job saw, diagnosed as its report did. */
static void print_recorded(const ol_replay_result_t *r)
{
  const ol_replay_recorded_t *o = &r->recorded_oom;
  char b1[32];
  printf("recorded OOM:     the job ran out at line %" PRIu64 ": %s requested", o->line,
         bytes_text((int64_t)o->size, b1, sizeof b1));
  if (r->recorded_ooms > 1)
    printf(" (the last of %" PRIu64 " it saw)", r->recorded_ooms);
  printf("\n");
  ol_buf_t why = {0};
  ol_oom_explain(&why, &o->record, o->cause, name_site, r->sites);
  if (!why.failed && why.data)
    printf("  why:            %s\n", why.data);
  ol_buf_free(&why);
  if (!o->has_context)
    printf("  note:           the trace does not say what the device held outside the "
           "allocator at that moment (no oom_context line: PyTorch's recorder, or an oomlens "
           "trace before format 2); diagnosed on the replayed device, nothing held outside\n");
  else if (o->job_cause < OL_OOM_CLASS_COUNT && o->job_cause != o->cause)
    printf("  note:           the job's own report said %s; this build says %s\n",
           ol_oom_class_name(o->job_cause), ol_oom_class_name(o->cause));
}

/* The policy served the whole trace although the job ran out: say so, and
 * whether it still would with what the job's device held outside. The
 * replayed device holds nothing outside the allocator, so where the peak
 * and what was held outside pass what the job had, "would fit" is not
 * said: that is not shown (held-out varlen_logits_leak at its 6.42G cap:
 * 6.19 GiB reserved beside 0.61 GiB held outside, and the line said it
 * would fit). */
static void print_would_fit(const replay_args_t *a, const ol_replay_result_t *r)
{
  const ol_replay_recorded_t *o = &r->recorded_oom;
  char b1[32], b2[32], b3[32], b4[32];
  bool outside = o->has_context && o->record.external > 0;
  int64_t needed = r->stats.reserved_peak + (outside ? o->record.external : 0);
  bool beside = !outside || (uint64_t)needed <= o->record.capacity;
  printf("this policy:      %sthe %s policy served every request on %s%s, peak reserved %s\n",
         beside ? "would fit: " : "", a->policy,
         bytes_text((int64_t)a->options.capacity, b1, sizeof b1),
         beside ? "" : " with nothing held outside it",
         bytes_text(r->stats.reserved_peak, b2, sizeof b2));
  if (!outside)
    return;
  printf("                  with the %s the job's device held outside the allocator: %s, "
         "which %s the %s the job had", bytes_text(o->record.external, b3, sizeof b3),
         bytes_text(needed, b4, sizeof b4), beside ? "fits in" : "is more than",
         bytes_text((int64_t)o->record.capacity, b1, sizeof b1));
  if (!beside) /* what the policy itself may use: replay it there */
    printf(": not shown to fit (--capacity %" PRId64 " replays it on what was left)",
           (int64_t)o->record.capacity - o->record.external);
  printf("\n");
}

/* The report's text list "Call sites holding memory at the peak". */
static bool print_top_sites(const ol_replay_result_t *r)
{
  ol_report_sites_t list = {0};
  bool ok = peak_sites(&list, r->sites);
  ol_buf_t out = {0};
  if (list.count)
    ol_buf_printf(&out, "held at the peak, by call site:\n");
  for (size_t i = 0; i < list.count && i < OL_REPORT_SITES_SHOWN; i++) {
    char b[32];
    ol_buf_printf(&out, "  %10s  ", bytes_text(list.site[i].bytes, b, sizeof b));
    ol_report_frames_text(&out, &list.site[i].frames, OL_REPORT_FRAMES_SHOWN);
    ol_buf_printf(&out, "\n");
  }
  ok = ok && !out.failed;
  if (ok && out.data)
    fputs(out.data, stdout);
  ol_buf_free(&out);
  ol_report_sites_free(&list);
  return ok;
}

/* One line, the roles holding bytes at the peak; said not known when no
 * frames of the trace named a role. */
static void print_text_roles(const ol_replay_result_t *r)
{
  int64_t bytes[OL_ROLE_COUNT];
  ol_buf_t line = {0};
  if (peak_roles(r, bytes))
    ol_roles_line(&line, bytes);
  printf("peak by role:     %s\n", line.data && !line.failed ? line.data
                                     : "not known (no frames of the trace name a role)");
  ol_buf_free(&line);
}

/* The requests the job was refused are not in its peak: it never held
 * them (the policy tried each, to say whether it would have fitted; its
 * own figures, --json's policy_peak_allocated, count those it served). */
static void print_refused(const ol_replay_result_t *r)
{
  printf("refused:          %" PRIu64 " request(s) the job was refused: never held, "
         "not in its peak\n", r->trace_ooms);
}

/* "3 creates, 3 maps" and so on, the kinds a policy makes (none: "none"). */
static void calls_text(ol_buf_t *out, const ol_policy_calls_t *c)
{
  const struct { const char *what; int64_t n; } kinds[] = {
    {"cuMemCreate", c->creates}, {"cuMemMap", c->maps},    {"cuMemUnmap", c->unmaps},
    {"cuMemRelease", c->releases}, {"cudaMalloc", c->mallocs}, {"cudaFree", c->frees},
  };
  int said = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].n)
      ol_buf_printf(out, "%s%" PRId64 " %s", said++ ? ", " : "", kinds[i].n, kinds[i].what);
  if (!said)
    ol_buf_printf(out, "none");
}

/* What the policy would ask of the driver, and how much of it in the
 * iterations after warm-up (what a job pays every step). */
static void print_text_calls(const ol_replay_result_t *r)
{
  ol_replay_steady_t st;
  ol_replay_steady(r, &st);
  ol_buf_t line = {0};
  calls_text(&line, &r->stats.calls);
  printf("driver calls:     %s\n", line.data && !line.failed ? line.data : "?");
  ol_buf_free(&line);
  if (!st.iterations) {
    printf("steady state:     not known (fewer than 2 iterations found)\n");
    return;
  }
  ol_buf_t sum = {0}, worst = {0};
  calls_text(&sum, &st.calls);
  calls_text(&worst, &st.worst);
  printf("steady state:     the last %" PRIu64 " of %" PRIu64 " iterations: %s; the worst "
         "iteration: %s\n", st.iterations, st.of, sum.data && !sum.failed ? sum.data : "?",
         worst.data && !worst.failed ? worst.data : "?");
  ol_buf_free(&sum);
  ol_buf_free(&worst);
}

static int print_text(const replay_args_t *a, const ol_replay_result_t *r)
{
  char b1[32], b2[32], b3[32];
  printf("trace:            %s\n", a->trace);
  printf("policy:           %s on %s (%" PRIu64 " bytes)", a->policy,
         bytes_text((int64_t)a->options.capacity, b1, sizeof b1), a->options.capacity);
  if (a->options.max_split_size)
    printf(", max split size %s", bytes_text((int64_t)a->options.max_split_size, b1, sizeof b1));
  printf("\nevents:           %" PRIu64 " (%" PRIu64 " allocations, %" PRIu64 " frees",
         r->events, r->allocs, r->frees);
  if (r->unknown_frees)
    printf(", %" PRIu64 " frees of unknown addresses skipped", r->unknown_frees);
  printf(")\npeak allocated:   %s (%" PRId64 " bytes, what the job held)\n",
         bytes_text(r->peak_requested, b2, sizeof b2), r->peak_requested);
  if (r->trace_ooms)
    print_refused(r);
  printf("peak reserved:    %s (%" PRId64 " bytes)\n",
         bytes_text(r->stats.reserved_peak, b3, sizeof b3), r->stats.reserved_peak);
  printf("ratio:            %.4f (peak reserved / peak allocated)\n", ratio_of(r));
  if (r->note[0])
    printf("trace note:       %s\n", r->note);
  print_text_calls(r);
  if (r->held_frees || r->driver_allocs)
    printf("live pool:        followed: %" PRIu64 " frees held behind its fences, %" PRIu64
           " allocations left to the driver\n", r->held_frees, r->driver_allocs);
  if (r->recovered_allocs)
    printf("recovered:        %" PRIu64 " failed allocation(s) the job's allocator recovered "
           "by its retry (not OOMs)\n", r->recovered_allocs);
  if (r->recorded)
    print_recorded(r);
  if (r->oom)
    print_oom(r);
  else
    printf("out of memory:    no\n");
  if (r->recorded && !r->oom)
    print_would_fit(a, r);
  print_text_roles(r);
  if (print_top_sites(r))
    return OL_EXIT_OK;
  fputs("oomlens replay: out of host memory\n", stderr);
  return OL_EXIT_FAILURE;
}

/* The device's size an oomlens trace names (before its first event on
 * that device); 0 if it names none or cannot be read (the replay itself
 * then reports why). */
static uint64_t capacity_in_trace(const char *path, int device)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(path, &err);
  if (!t)
    return 0;
  ol_trace_event_t ev;
  uint64_t capacity = 0;
  int want = device < 0 ? 0 : device;
  while (ol_trace_format(t) == OL_TRACE_FORMAT_OOMLENS && ol_trace_next(t, &ev, &err) == 1)
    if (ev.device == want) {
      capacity = ol_trace_capacity(t, want);
      break;
    }
  ol_trace_close(t);
  return capacity;
}

int ol_cmd_replay(int argc, char **argv)
{
  replay_args_t a;
  int status;
  if (!parse_args(argc, argv, &a, &status))
    return status;
  const ol_policy_ops_t *ops = ol_policy_find(a.policy);
  if (!ops)
    return ol_args_usage("replay", "unknown policy '%s' (oomlens, pytorch, pytorch-expandable)",
                         a.policy);
  ol_error_t err;
  char copy[64];
  const char *readable = ol_input_rereadable(a.trace, copy, sizeof copy, &err);
  if (!readable)
    return ol_args_fail("replay", &err);
  if (!a.capacity_given) {
    uint64_t named = capacity_in_trace(readable, a.device);
    if (named)
      a.options.capacity = named;
  }
  ol_replay_result_t result;
  ol_progress_t progress;
  ol_progress_start(&progress, "oomlens replay");
  ol_replay_extras_t extras = {.device = a.device, .batch = a.batch, .no_sites = a.no_sites,
                               .progress = ol_progress_show, .progress_arg = &progress};
  int rc = ol_replay_file_with(readable, ops, &a.options, &extras, &result, &err);
  ol_progress_end(&progress);
  if (rc != 0)
    return ol_args_fail("replay", &err);
  if (result.note[0]) /* also on stderr, where a script reading stdout sees it */
    fprintf(stderr, "oomlens replay: %s: %s\n", a.trace, result.note);
  status = OL_EXIT_OK;
  if (a.json)
    status = print_json(&a, &result);
  else
    status = print_text(&a, &result);
  ol_replay_result_free(&result);
  return status;
}
