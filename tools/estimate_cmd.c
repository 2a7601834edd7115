/* estimate_cmd.c: `oomlens estimate`, the pre-flight estimate of a training
 * job's peak device memory (src/analyze/estimate.c holds the model): the
 * breakdown, whether it fits with the headroom, the largest batch that does,
 * and the field guides' remedies re-estimated when it does not; and its
 * command line, parsed here into the model's input. Exit codes: 0 when an
 * estimate was given (not fitting is an answer), 2 for a usage or input
 * error. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "estimate.h"
#include "core.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void print_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens estimate [--params N] [--batch B] [--seq L] [--hidden H]\n"
          "                        [--layers N] [--heads A] [--vocab V] [options]\n"
          "\n"
          "Estimates a training job's peak device memory before it runs: weights, master\n"
          "weights, gradients, optimizer states, activations, logits and workspace;\n"
          "whether it fits the card with the headroom; the largest batch that does; and\n"
          "what mixed precision, checkpointing, gradient accumulation, an 8-bit\n"
          "optimizer, ZeRO or offload would bring it to.\n"
          "\n"
          "  --params N             parameters (124M, 7B); default: from the shape\n"
          "  --batch B              samples per GPU per step (default 1)\n"
          "  --seq L --hidden H --layers N   a transformer's shape (for activations)\n"
          "  --heads A --vocab V    attention heads (eager attention), vocabulary (logits)\n"
          "  --precision P          fp32 | fp16 | bf16 | mixed-bf16 (default) | mixed-fp16\n"
          "                         (mixed: fp32 master weights, half-precision compute)\n"
          "  --optimizer O          sgd | momentum | adam | adamw (default) | adam8bit\n"
          "  --checkpointing C      none (default) | full\n"
          "  --attention A          flash (default: flash/SDPA kernels) | eager (L*L kept)\n"
          "  --gelu G               fused (default) | eager (tanh GELU as Python ops, as\n"
          "                         Hugging Face's gelu_new in GPT-2)\n"
          "  --zero S --gpus G      ZeRO stage 0-3 over G GPUs (default 0, 1)\n"
          "  --offload              optimizer states and master weights on the CPU\n"
          "  --capacity SIZE        device memory (default 139.8 GiB, the H200)\n"
          "  --headroom F           fraction kept free, 0.2 or 20%% (default 0.2)\n"
          "  --measured-persistent BYTES --measured-per-sample BYTES\n"
          "                         calibrate: replace the model's persistent and\n"
          "                         per-sample bytes with measured ones\n"
          "  --from-peak BYTES --at-batch B\n"
          "                         calibrate per-sample bytes from one measured peak\n"
          "                         allocated at batch B (persistent from the model)\n"
          "  --json                 one JSON object on stdout\n"
          "\n"
          "Counts take a K, M or B suffix (thousands, millions, billions); sizes bytes or\n"
          "K, M, G, T (powers of 1024, \"24G\", \"139.8G\"). Peak allocated is what\n"
          "torch.cuda.max_memory_allocated() would say; the total adds the workspace\n"
          "outside the allocator (CUDA context, library workspaces, NCCL).\n"
          "Exit status: 0 when it estimated (fitting or not), 2 for a usage error.\n");
}

static double gib(uint64_t bytes)
{
  return (double)bytes / GIB;
}

static void print_line(const char *what, uint64_t bytes, const char *note)
{
  printf("  %-28s %8.2f GiB  %15" PRIu64 "%s%s\n", what, gib(bytes), bytes, note ? "  " : "",
         note ? note : "");
}

static void print_job(const ol_estimate_input_t *in)
{
  printf("job: %s, %s, batch %" PRIu64, ol_precision_name(in->precision),
         ol_optimizer_name(in->optimizer), in->batch);
  if (in->seq)
    printf(" x %" PRIu64, in->seq);
  if (in->hidden)
    printf(", hidden %" PRIu64 ", %" PRIu64 " layers", in->hidden, in->layers);
  printf(", checkpointing %s, attention %s", in->checkpointing ? "full" : "none",
         in->eager_attention ? "eager" : "flash");
  if (in->zero || in->gpus > 1)
    printf(", ZeRO %u over %" PRIu64 " GPUs", in->zero, in->gpus);
  printf("%s\n", in->offload ? ", optimizer offloaded" : "");
}

static void print_breakdown(const ol_estimate_input_t *in, const ol_estimate_t *e)
{
  const char *measured = e->calibrated_persistent ? "(model; replaced by the measured figure)"
                                                  : NULL;
  print_line("weights", e->weights, measured);
  print_line("master weights (fp32)", e->master, measured);
  print_line("gradients", e->gradients, measured);
  print_line("optimizer states", e->optimizer, measured);
  print_line("persistent", e->persistent, e->calibrated_persistent ? "measured" : NULL);
  if (e->activations_known && !e->calibrated_per_sample) {
    print_line("layers, per sample", e->layers_per_sample, NULL);
    print_line("logits and loss, per sample", e->logits_per_sample, NULL);
    print_line("embeddings, per sample", e->other_per_sample, NULL);
  }
  if (e->activations_known)
    print_line("activations per sample", e->per_sample,
               e->calibrated_per_sample ? "measured" : NULL);
  char what[64];
  snprintf(what, sizeof what, "activations, batch %" PRIu64, in->batch);
  print_line(what, e->activations, e->activations_known ? NULL : "unknown: no shape given");
  print_line("optimizer step temporaries", e->step_transient, NULL);
  print_line("peak allocated", e->peak_allocated, NULL);
  print_line("workspace (outside)", e->workspace, NULL);
  print_line("total", e->total, NULL);
}

static void print_verdict(const ol_estimate_input_t *in, const ol_estimate_t *e)
{
  printf("capacity %.2f GiB, %.0f%% headroom: %.2f GiB usable; %s (%.0f%% of capacity)\n",
         gib(in->capacity), in->headroom * 100, gib(e->usable),
         e->fits ? "fits" : "does NOT fit", 100.0 * (double)e->total / (double)in->capacity);
  if (!e->activations_known)
    printf("largest batch: unknown (give the shape, or --measured-per-sample)\n");
  else if (e->max_batch == 0)
    printf("largest batch that fits with the headroom: none, not even 1\n");
  else
    printf("largest batch that fits with the headroom: %" PRIu64 "\n", e->max_batch);
}

static void print_advice(const ol_estimate_t *e, const ol_estimate_advice_t *advice, size_t n)
{
  if (n == 0)
    return;
  printf("what would bring it down (total%s):\n",
         e->activations_known ? "; largest batch that fits" : "");
  for (size_t i = 0; i < n; i++) {
    printf("  - %-62s %8.2f GiB, %s", advice[i].what, gib(advice[i].total),
           advice[i].fits ? "fits" : "does not fit");
    if (e->activations_known)
      printf("; batch %" PRIu64, advice[i].max_batch);
    printf("\n");
  }
}

static void json_number(ol_buf_t *b, const char *name, uint64_t v)
{
  ol_buf_printf(b, ", \"%s\": %" PRIu64, name, v);
}

static void print_json(const ol_estimate_input_t *in, const ol_estimate_t *e,
                       const ol_estimate_advice_t *advice, size_t n)
{
  ol_buf_t b = {0};
  ol_buf_printf(&b, "{\"oomlens_estimate\": 1, \"precision\": \"%s\", \"optimizer\": \"%s\"",
                ol_precision_name(in->precision), ol_optimizer_name(in->optimizer));
  json_number(&b, "batch", in->batch);
  json_number(&b, "capacity", in->capacity);
  ol_buf_printf(&b, ", \"headroom\": %.4f", in->headroom);
  const struct {
    const char *name;
    uint64_t v;
  } fields[] = {{"weights", e->weights},       {"master", e->master},
                {"gradients", e->gradients},   {"optimizer", e->optimizer},
                {"persistent", e->persistent}, {"per_sample", e->per_sample},
                {"layers_per_sample", e->layers_per_sample},
                {"embeddings_per_sample", e->other_per_sample},
                {"logits_per_sample", e->logits_per_sample},
                {"activations", e->activations}, {"step_transient", e->step_transient},
                {"peak_allocated", e->peak_allocated}, {"workspace", e->workspace},
                {"total", e->total},           {"usable", e->usable},
                {"max_batch", e->max_batch}};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    json_number(&b, fields[i].name, fields[i].v);
  ol_buf_printf(&b, ", \"fits\": %s, \"activations_known\": %s, \"calibrated\": %s",
                e->fits ? "true" : "false", e->activations_known ? "true" : "false",
                e->calibrated_persistent || e->calibrated_per_sample ? "true" : "false");
  ol_buf_printf(&b, ", \"advice\": [");
  for (size_t i = 0; i < n; i++) {
    ol_buf_printf(&b, "%s{\"what\": ", i ? ", " : "");
    ol_buf_json_string(&b, advice[i].what);
    ol_buf_printf(&b, ", \"total\": %" PRIu64 ", \"max_batch\": %" PRIu64 ", \"fits\": %s}",
                  advice[i].total, advice[i].max_batch, advice[i].fits ? "true" : "false");
  }
  ol_buf_printf(&b, "]}\n");
  if (b.data && !b.failed)
    fputs(b.data, stdout);
  ol_buf_free(&b);
}

/* ---- the command line ------------------------------------------------------ */

/* Digits with an optional fraction, then the rest in *end. */
static bool parse_decimal(const char *text, double *value, const char **end)
{
  if (!isdigit((unsigned char)text[0]))
    return false;
  const char *p = text;
  while (isdigit((unsigned char)*p))
    p++;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p))
      return false;
    while (isdigit((unsigned char)*p))
      p++;
  }
  errno = 0;
  *value = strtod(text, NULL);
  *end = p;
  return errno == 0 && isfinite(*value);
}

/* value * multiplier as a whole number that fits in 63 bits. */
static bool whole(double value, double multiplier, uint64_t *out)
{
  double v = value * multiplier;
  if (v >= 9.2e18)
    return false;
  double rounded = floor(v + 0.5);
  if (fabs(v - rounded) > 1e-6 * (v > 1 ? v : 1))
    return false; /* "1.5" items, "0.3K": not a whole count */
  *out = (uint64_t)rounded;
  return true;
}

bool ol_estimate_parse_count(const char *text, uint64_t *out)
{
  double value;
  const char *end;
  if (!text || !parse_decimal(text, &value, &end))
    return false;
  double multiplier = 1;
  switch (*end) {
  case 'k': case 'K': multiplier = 1e3; end++; break;
  case 'm': case 'M': multiplier = 1e6; end++; break;
  case 'b': case 'B': multiplier = 1e9; end++; break;
  default: break;
  }
  return *end == '\0' && whole(value, multiplier, out);
}

static bool parse_count(const char *text, void *field, const void *data)
{
  return ol_estimate_parse_count(text, field);
}

static bool parse_precision(const char *text, void *field, const void *data)
{
  for (int p = 0; p < OL_PREC_COUNT; p++)
    if (strcmp(text, ol_precision_name((ol_precision_t)p)) == 0) {
      *(ol_precision_t *)field = (ol_precision_t)p;
      return true;
    }
  return false;
}

static bool parse_optimizer(const char *text, void *field, const void *data)
{
  for (int o = 0; o < OL_OPTIM_COUNT; o++)
    if (strcmp(text, ol_optimizer_name((ol_optimizer_t)o)) == 0) {
      *(ol_optimizer_t *)field = (ol_optimizer_t)o;
      return true;
    }
  return false;
}

/* One of two words (data: their names, off first) into a bool. */
static bool parse_either(const char *text, void *field, const void *data)
{
  const char *const *names = data;
  for (int i = 0; i < 2; i++)
    if (strcmp(text, names[i]) == 0) {
      *(bool *)field = i;
      return true;
    }
  return false;
}

static bool parse_zero(const char *text, void *field, const void *data)
{
  if (text[0] < '0' || text[0] > '3' || text[1])
    return false;
  *(unsigned *)field = (unsigned)(text[0] - '0');
  return true;
}

/* A fraction kept free: "0.2" or "20%", at least 0 and below 1. */
static bool parse_headroom(const char *text, void *field, const void *data)
{
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno)
    return false;
  if (*end == '%') {
    v /= 100;
    end++;
  }
  if (*end || !(v >= 0 && v < 1))
    return false;
  *(double *)field = v;
  return true;
}

/* Every bad value reads "bad value '...' for --flag". */
static const ol_arg_type_t count_type = {
  "value", "expected a count, with K, M or B for thousands, millions, billions", parse_count};
static const ol_arg_type_t bytes_type = {
  "value", "expected bytes or a K, M, G, T size (powers of 1024) such as 24G or 139.8G",
  ol_arg_parse_size};
static const ol_arg_type_t precision_type = {
  "value", "expected fp32, fp16, bf16, mixed-bf16 or mixed-fp16", parse_precision};
static const ol_arg_type_t optimizer_type = {
  "value", "expected sgd, momentum, adam, adamw or adam8bit", parse_optimizer};
static const ol_arg_type_t either_type = {"value", NULL, parse_either};
static const ol_arg_type_t zero_type = {"value", "expected 0, 1, 2 or 3", parse_zero};
static const ol_arg_type_t headroom_type = {
  "value", "expected a fraction below 1, such as 0.2 or 20%", parse_headroom};

static const char *const checkpoint_names[] = {"none", "full"};
static const char *const attention_names[] = {"flash", "eager"};
static const char *const gelu_names[] = {"fused", "eager"};

#define IN(name, type, field) OL_VALUE(name, type, ol_estimate_args_t, in.field)
#define EITHER(name, field, names, expect)                                                      \
  {name, NULL, &either_type, offsetof(ol_estimate_args_t, in.field), names, expect}
static const ol_opt_t opts[] = {
  IN("--params", &count_type, params),
  IN("--batch", &count_type, batch),
  IN("--seq", &count_type, seq),
  IN("--hidden", &count_type, hidden),
  IN("--layers", &count_type, layers),
  IN("--heads", &count_type, heads),
  IN("--vocab", &count_type, vocab),
  IN("--gpus", &count_type, gpus),
  IN("--at-batch", &count_type, at_batch),
  IN("--capacity", &bytes_type, capacity),
  IN("--measured-persistent", &bytes_type, measured_persistent),
  IN("--measured-per-sample", &bytes_type, measured_per_sample),
  IN("--from-peak", &bytes_type, from_peak),
  IN("--precision", &precision_type, precision),
  IN("--optimizer", &optimizer_type, optimizer),
  EITHER("--checkpointing", checkpointing, checkpoint_names, "expected none or full"),
  EITHER("--attention", eager_attention, attention_names, "expected flash or eager"),
  EITHER("--gelu", eager_gelu, gelu_names, "expected fused or eager"),
  IN("--zero", &zero_type, zero),
  IN("--headroom", &headroom_type, headroom),
  OL_FLAG("--offload", ol_estimate_args_t, in.offload),
  OL_FLAG("--json", ol_estimate_args_t, json),
  {0},
};
#undef IN
#undef EITHER

static const ol_cmd_t estimate_cmd = {"estimate", opts, print_help, false};

int ol_estimate_parse_args(int argc, char **argv, ol_estimate_args_t *args, ol_error_t *err)
{
  *args = (ol_estimate_args_t){0};
  ol_estimate_defaults(&args->in);
  int n;
  switch (ol_args_parse(&estimate_cmd, argc, argv, args, &n, err)) {
  case OL_ARGS_HELP:
    args->help = true;
    return 0;
  case OL_ARGS_BAD:
    return -1;
  case OL_ARGS_OK:
    break;
  }
  if (n > 0) {
    ol_fail(err, OL_EXIT_USAGE, "unexpected argument '%s'", argv[0]);
    return -1;
  }
  return 0;
}

/* The model's problems, said in this command's flags (the peak's, with its
 * figures, where it is reported). */
static const char *const flag_problem[] = {
  [OL_ESTIMATE_no_size] = "give --params, or the shape (--hidden, --layers, --seq)",
  [OL_ESTIMATE_zero_count] = "--batch, --gpus and --capacity must be at least 1",
  [OL_ESTIMATE_headroom] = "--headroom must be at least 0 and less than 1",
  [OL_ESTIMATE_zero_stage] = "--zero must be 0, 1, 2 or 3",
  [OL_ESTIMATE_no_heads] = "eager attention needs --heads",
  [OL_ESTIMATE_peak_without_batch] = "--from-peak and --at-batch go together",
  [OL_ESTIMATE_two_calibrations] = "give --measured-per-sample or --from-peak, not both",
};

int ol_cmd_estimate(int argc, char **argv)
{
  ol_estimate_args_t args;
  ol_error_t err;
  if (ol_estimate_parse_args(argc, argv, &args, &err)) {
    ol_args_usage("estimate", "%s", err.text);
    return err.status;
  }
  if (args.help) {
    print_help(stdout);
    return 0;
  }
  ol_estimate_t e;
  if (!ol_estimate(&args.in, &e, &err)) {
    if (e.problem == OL_ESTIMATE_peak_not_above_persistent)
      ol_args_usage("estimate", "--from-peak %llu is not above the persistent %llu bytes",
                    (unsigned long long)args.in.from_peak, (unsigned long long)e.persistent);
    else if (flag_problem[e.problem])
      ol_args_usage("estimate", "%s", flag_problem[e.problem]);
    else
      ol_args_usage("estimate", "%s", err.text);
    return err.status;
  }
  ol_estimate_advice_t advice[OL_ESTIMATE_MAX_ADVICE];
  size_t n = e.fits ? 0 : ol_estimate_advise(&args.in, &e, advice);
  if (args.json) {
    print_json(&args.in, &e, advice, n);
    return 0;
  }
  print_job(&args.in);
  print_breakdown(&args.in, &e);
  print_verdict(&args.in, &e);
  print_advice(&e, advice, n);
  return 0;
}
