/* estimate_cmd.c: `oomlens estimate`, the pre-flight estimate of a training
 * job's peak device memory (src/estimate.c holds the model): the
 * breakdown, whether it fits with the headroom, the largest batch that does,
 * and the field guides' remedies re-estimated when it does not. Exit codes:
 * 0 when an estimate was given (not fitting is an answer), 2 for a usage or
 * input error. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "ol.h"

#define EXIT_USAGE 2
#define GIB (1024.0 * 1024.0 * 1024.0)

int ol_cmd_estimate(int argc, char **argv);

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

int ol_cmd_estimate(int argc, char **argv)
{
  ol_estimate_args_t args;
  ol_error_t err;
  if (ol_estimate_parse_args(argc, argv, &args, &err)) {
    fprintf(stderr, "oomlens estimate: %s (see oomlens estimate --help)\n", err.text);
    return err.status;
  }
  if (args.help) {
    print_help(stdout);
    return 0;
  }
  ol_estimate_t e;
  if (!ol_estimate(&args.in, &e, &err)) {
    fprintf(stderr, "oomlens estimate: %s (see oomlens estimate --help)\n", err.text);
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
