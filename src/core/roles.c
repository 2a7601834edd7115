/* roles.c: what a block of memory is for (core.h's ol_role_t), from the
 * frames of its call site: the one rule, for the live library (a site's
 * Python lines, made on the capturing thread), a trace of ours and
 * PyTorch's recorder's traces alike.
 *
 * A frame is read as "file:line:function", the form both write: ours with
 * the file from its package on ("torch/nn/modules/module.py"), PyTorch's
 * recorder with the base name only ("module.py"). So every rule holds on
 * the base name and the function; a rule on a folder ("optim/") is a
 * bonus the live frames get. Frames that are not Python (a native frame,
 * "libtorch_cpu.so+0x1a2b ...", or a note such as "(no call stack)") name
 * no role: naming native frames live would cost a symbolization per new
 * site, and the one native fact the rule needs, that the allocating thread
 * is PyTorch's autograd engine, comes as a marker frame of its own
 * ("(thread pt_autograd_0)", lib/stacks.c writes it; docs/trace-format.md).
 *
 * A site's role is that of its innermost frame that names one. Innermost
 * first because the closest caller says most about what the tensor is: a
 * lazy module's parameters are made inside its first forward
 * (parameter.py's materialize under _call_impl: weights, not activations),
 * the loss inside the model's forward is forward memory, and an optimizer's
 * step reached from the job's own train() is optimizer state. A site with
 * Python frames of which none names a role is "other" (input batches, the
 * job's own buffers); one with no Python frame at all (frames off, not
 * sampled, a thread without Python and no marker) is "unknown": we say we
 * do not know rather than guess.
 *
 * The PyTorch facts each rule rests on are said at the rule. Gradients
 * cannot be told from backward temporaries by their frames (AccumulateGrad
 * keeps the buffer the engine made as the gradient), so both are
 * "backward" here; sites.c splits them by what outlives the backward pass
 * (ol_sites_role_bytes). */
#include <stdbool.h>
#include <string.h>

#include "core.h"

typedef struct text {
  const char *p;
  size_t n;
} text_t;

static bool same(text_t t, const char *word)
{
  size_t n = strlen(word);
  return t.n == n && memcmp(t.p, word, n) == 0;
}

static bool starts(text_t t, const char *prefix)
{
  size_t n = strlen(prefix);
  return t.n >= n && memcmp(t.p, prefix, n) == 0;
}

static bool ends(text_t t, const char *suffix)
{
  size_t n = strlen(suffix);
  return t.n >= n && memcmp(t.p + t.n - n, suffix, n) == 0;
}

static bool contains(text_t t, const char *part)
{
  size_t n = strlen(part);
  for (size_t i = 0; n <= t.n && i + n <= t.n; i++)
    if (memcmp(t.p + i, part, n) == 0)
      return true;
  return false;
}

static bool any_of(text_t t, const char *const *words)
{
  for (; *words; words++)
    if (same(t, *words))
      return true;
  return false;
}

/* A Python frame, "file:line:function", split from its end: the function
 * is after the last ':', the line (digits, or -1 where CPython has none)
 * before it. false: not a Python frame. */
typedef struct py_frame {
  text_t path, base, function;
} py_frame_t;

static bool line_number(const char *p, size_t n)
{
  size_t i = n > 0 && p[0] == '-';
  if (i >= n)
    return false;
  for (; i < n; i++)
    if (p[i] < '0' || p[i] > '9')
      return false;
  return true;
}

static bool split_python(const char *frame, size_t len, py_frame_t *out)
{
  const char *last = NULL, *before = NULL;
  for (size_t i = len; i-- > 0;)
    if (frame[i] == ':') {
      if (!last)
        last = frame + i;
      else {
        before = frame + i;
        break;
      }
    }
  if (!before || before == frame || !line_number(before + 1, (size_t)(last - before - 1)))
    return false;
  out->path = (text_t){frame, (size_t)(before - frame)};
  out->function = (text_t){last + 1, (size_t)(frame + len - last - 1)};
  if (out->function.n == 0)
    return false;
  out->base = out->path;
  for (size_t i = out->path.n; i-- > 0;)
    if (out->path.p[i] == '/') {
      out->base = (text_t){out->path.p + i + 1, out->path.n - i - 1};
      break;
    }
  return true;
}

/* torch.optim's files (the recorder names them by base name alone), and
 * the names PyTorch's optimizers give their kernels' Python sides:
 * _init_group makes the state (exp_avg, exp_avg_sq, momentum buffers) at
 * the first step; _multi_tensor_*, _single_tensor_* and _fused_* are the
 * step's foreach, for-loop and fused paths (their temporaries). Optimizers
 * of other packages (bitsandbytes/optim, apex/optimizers) by their folder. */
static bool optimizer(const py_frame_t *f)
{
  static const char *const files[] = {
    "optimizer.py", "adam.py", "adamw.py", "sgd.py", "adagrad.py", "adadelta.py", "adamax.py",
    "asgd.py", "lbfgs.py", "nadam.py", "radam.py", "rmsprop.py", "rprop.py", "sparse_adam.py",
    "_adafactor.py", "_functional.py", NULL};
  return any_of(f->base, files) || contains(f->path, "optim/") ||
         contains(f->path, "optimizers/") || same(f->function, "_init_group") ||
         starts(f->function, "_multi_tensor_") || starts(f->function, "_single_tensor_") ||
         starts(f->function, "_fused_");
}

/* Weights are made by moving a module (.to, .cuda, .half... all go through
 * Module._apply, whose innermost frame is its convert lambda), by loading a
 * state dict (Module.load_state_dict/_load_from_state_dict; transformers'
 * _load_state_dict_into_meta_model, accelerate's set_module_tensor_to_device),
 * or by creating parameters on the device: torch/nn/parameter.py (lazy
 * modules' materialize), torch/nn/init.py, reset_parameters, transformers'
 * _init_weights, and a torch.nn module's __init__ (the live path shows the
 * folder; a job's own __init__ may as well make a data buffer, so not
 * every __init__). A checkpoint read onto the device is weights too:
 * torch.load with map_location on the device makes every tensor under
 * torch/serialization.py (its innermost frames, storage.py's to and
 * _utils.py's _to, name nothing), and safetensors' load_file and
 * safe_open under its folder. A checkpoint may hold optimizer state as
 * well; both are state, which is what the diagnosis asks (held-out
 * checkpoint_load on the H200: the weights and a second copy loaded with
 * map_location='cuda' under a 3G cap, read as "other"). FSDP's
 * parameters are weights too: its first API flattens a module's into flat
 * parameters (torch/distributed/fsdp/_flat_param.py), its second makes
 * each parameter's shard and, for a layer's forward, the gathered whole
 * (_fully_shard/_fsdp_param.py); both files also make a gradient's copy
 * now and then, which is state as well (held-out fsdp_batch and
 * fsdp2_batch: GPT-2's weights under FSDP read as "other", the state as
 * 0 B). */
static bool weights(const py_frame_t *f)
{
  static const char *const module_moves[] = {"_apply", "to", "cuda", "xpu", "to_empty", NULL};
  static const char *const makers[] = {"reset_parameters", "_init_weights", "init_weights",
                                       "initialize_parameters", "from_pretrained",
                                       "set_module_tensor_to_device", NULL};
  /* a module's own override of them too (RNNBase._apply flattens an
   * LSTM's weights into one buffer as it moves them) */
  bool module_file = same(f->base, "module.py") || contains(f->path, "nn/modules/");
  return (module_file && any_of(f->function, module_moves)) ||
         contains(f->function, "load_state_dict") ||
         contains(f->function, "load_from_state_dict") || any_of(f->function, makers) ||
         same(f->base, "parameter.py") || same(f->base, "init.py") ||
         same(f->base, "serialization.py") || contains(f->path, "safetensors/") ||
         same(f->base, "_flat_param.py") || same(f->base, "_fsdp_param.py") ||
         (same(f->function, "__init__") && contains(f->path, "nn/modules/"));
}

/* The backward pass as Python sees it: Tensor.backward (_tensor.py),
 * torch.autograd.backward and its _make_grads (the seed gradient), the
 * engine's entry _engine_run_backward, and a custom autograd Function's
 * backward, which the engine's thread runs. Not the whole torch/autograd
 * folder: a custom Function's apply (function.py) runs in the forward. */
static bool backward(const py_frame_t *f)
{
  static const char *const names[] = {"backward", "_engine_run_backward", "run_backward",
                                      "_make_grads", NULL};
  return any_of(f->function, names);
}

/* The forward pass: a module's forward (and helpers named *_forward, such
 * as conv's _conv_forward or transformers' sdpa_attention_forward), the
 * call machinery (Module._call_impl, _wrapped_call_impl), and
 * torch.nn.functional's ops, which are what a forward (a loss computed
 * outside the model included) is made of. */
static bool activations(const py_frame_t *f)
{
  static const char *const names[] = {"forward", "_call_impl", "_wrapped_call_impl", NULL};
  return any_of(f->function, names) || ends(f->function, "_forward") ||
         same(f->base, "functional.py");
}

/* Another GPU library in the same process, which allocates through its
 * own allocator and keeps its own cache, by its package's folder: CuPy's
 * memory pool keeps what its arrays freed (held-out cupy_pool on the H200:
 * 8 GiB of features made with CuPy before the training, read as the
 * batch's memory), JAX/XLA preallocates most of the device, Numba, RAPIDS
 * (RMM, cuDF, cuML), TensorFlow, PyCUDA and DALI have pools of their own.
 * Not keras/ (Keras 3 runs on torch's tensors) nor triton/ (its kernels'
 * buffers come from torch). Only live frames carry folders; PyTorch's
 * recorder, base names alone, never names one. */
static bool library(const py_frame_t *f)
{
  /* each with a leading '/': the package is the path's start or follows one */
  static const char *const packages[] = {"/cupy/",  "/cupyx/",  "/cupy_backends/", "/jax/",
                                         "/jaxlib/", "/numba/", "/rmm/",           "/cudf/",
                                         "/cuml/",  "/cugraph/", "/tensorflow/",  "/pycuda/",
                                         "/nvidia/dali/", NULL};
  for (const char *const *p = packages; *p; p++)
    if (starts(f->path, *p + 1) || contains(f->path, *p))
      return true;
  return false;
}

/* "(thread pt_autograd_N)": PyTorch names its autograd engine's device
 * threads so; what they allocate is the backward pass. */
static bool autograd_marker(text_t t)
{
  return starts(t, "(thread pt_autograd_") && ends(t, ")");
}

ol_role_t ol_role_of_frame(const char *frame, size_t len)
{
  text_t t = {frame, len};
  py_frame_t f;
  if (autograd_marker(t))
    return OL_ROLE_backward;
  if (!split_python(frame, len, &f))
    return OL_ROLE_unknown;
  if (library(&f)) /* first: its frames are its own, whatever they are called */
    return OL_ROLE_library;
  if (optimizer(&f)) /* before weights: an optimizer's load_state_dict is its state */
    return OL_ROLE_optimizer;
  if (weights(&f))
    return OL_ROLE_weights;
  if (backward(&f))
    return OL_ROLE_backward;
  if (activations(&f))
    return OL_ROLE_activations;
  return OL_ROLE_other;
}

/* An optimizer's update of many tensors at once (PyTorch's foreach path:
 * _multi_tensor_adam and its kin), which holds temporaries as large as a
 * group of the state while it runs (held-out foreach_step: the moments'
 * square roots, as large as the weights, where the state itself fit). */
static bool multi_tensor_update(const char *frame, size_t len)
{
  py_frame_t f;
  return split_python(frame, len, &f) && starts(f.function, "_multi_tensor_") && optimizer(&f);
}

/* SGD's update makes its momentum buffers itself (a clone of each
 * gradient, in its first step), where the Adam family's _init_group makes
 * its moments before the update: in SGD's first step what its update
 * asks for may be state, not temporaries (held-out sgd_momentum_step). */
static bool sgd_update(const char *frame, size_t len)
{
  py_frame_t f;
  return split_python(frame, len, &f) && same(f.base, "sgd.py") &&
         (same(f.function, "_multi_tensor_sgd") || same(f.function, "_single_tensor_sgd"));
}

/* DistributedDataParallel's Reducer keeps the gradients in buckets of its
 * own for their all-reduce (a second copy of them, or, with
 * gradient_as_bucket_view, the gradients themselves), made in C++ right
 * under the Python line that builds the Reducer (_ddp_init_helper) and,
 * once, the line of _pre_forward that rebuilds them before the second
 * forward. Only as the innermost Python frame: _pre_forward's deeper
 * calls (the inputs moved to the device, the buffers' broadcast) are not
 * buckets (held-out ddp_batch on the H200: 474.7 MiB of buckets read as
 * "other", outside the state). */
static bool ddp_buckets(const char *frame, size_t len)
{
  py_frame_t f;
  return split_python(frame, len, &f) && same(f.base, "distributed.py") &&
         (same(f.function, "_ddp_init_helper") || same(f.function, "_pre_forward"));
}

/* An optimizer making its state at its first step: the buffers its
 * _init_group makes for each parameter with a gradient, each as large as
 * the parameter (zeros_like): Adam, AdamW (adam.py's in torch 2), NAdam,
 * RAdam and Adamax two moments (AMSGrad a third), Adadelta two, RMSprop
 * one (more with momentum or centered). These are the least it keeps: 0
 * for any other frame, and for optimizers whose _init_group makes no
 * per-parameter buffer (SGD makes its momentum in the step; Adagrad at
 * construction; Adafactor factors its moments). */
static uint8_t state_buffers(const char *frame, size_t len)
{
  static const char *const two[] = {"adam.py", "adamw.py", "nadam.py", "radam.py", "adamax.py",
                                    "adadelta.py", NULL};
  static const char *const one[] = {"rmsprop.py", NULL};
  py_frame_t f;
  /* torch.optim's own files; PyTorch's recorder gives base names alone */
  if (!split_python(frame, len, &f) || !same(f.function, "_init_group") ||
      !(contains(f.path, "torch/optim/") || f.path.n == f.base.n))
    return 0;
  return any_of(f.base, two) ? 2 : any_of(f.base, one) ? 1 : 0;
}

void ol_role_fold_add(ol_role_fold_t *fold, const char *frame, size_t len)
{
  if (!fold->update && multi_tensor_update(frame, len)) /* any frame: not only up to the named */
    fold->update = true;
  if (!fold->update_makes_state && sgd_update(frame, len))
    fold->update_makes_state = true;
  if (!fold->state_buffers)
    fold->state_buffers = state_buffers(frame, len);
  if (fold->named)
    return;
  if (fold->role == OL_ROLE_unknown && ddp_buckets(frame, len)) { /* the first Python frame */
    fold->role = OL_ROLE_gradients;
    fold->named = true;
    return;
  }
  ol_role_t role = ol_role_of_frame(frame, len);
  if (role == OL_ROLE_unknown)
    return;
  if (role == OL_ROLE_other) {
    fold->role = OL_ROLE_other;
    return;
  }
  fold->role = role;
  fold->named = true;
}

static void fold_span(const char *frame, size_t len, void *fold)
{
  ol_role_fold_add(fold, frame, len);
}

ol_role_fold_t ol_role_fold_of_frames(const char *text, size_t len)
{
  ol_role_fold_t fold = OL_ROLE_FOLD_INIT;
  ol_frames_text_each(text, len, SIZE_MAX, fold_span, &fold);
  return fold;
}

ol_role_t ol_role_of_frames(const char *text, size_t len)
{
  return ol_role_fold_of_frames(text, len).role;
}

const char *ol_role_name(ol_role_t role)
{
  static const char *const names[] = {
#define OL_ROLE_NAME(name, what) #name,
    OL_ROLES(OL_ROLE_NAME)
#undef OL_ROLE_NAME
  };
  return (unsigned)role < OL_ROLE_COUNT ? names[role] : "?";
}

const char *ol_role_meaning(ol_role_t role)
{
  static const char *const meanings[] = {
#define OL_ROLE_MEANING(name, what) what,
    OL_ROLES(OL_ROLE_MEANING)
#undef OL_ROLE_MEANING
  };
  return (unsigned)role < OL_ROLE_COUNT ? meanings[role] : "?";
}

/* {"weights": N, ...}: every role, in the list's order. */
void ol_roles_json(ol_buf_t *out, const int64_t bytes[OL_ROLE_COUNT])
{
  ol_buf_printf(out, "{");
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    ol_buf_printf(out, "%s\"%s\": %lld", i ? ", " : "", ol_role_name((ol_role_t)i),
                  (long long)bytes[i]);
  ol_buf_printf(out, "}");
}

/* "weights 474.70 MiB, optimizer 949.40 MiB, ...": the roles that hold
 * bytes, largest first, in one line (a paragraph's, replay's). */
void ol_roles_line(ol_buf_t *out, const int64_t bytes[OL_ROLE_COUNT])
{
  bool shown[OL_ROLE_COUNT] = {false};
  for (int n = 0; n < OL_ROLE_COUNT; n++) {
    int best = -1;
    for (int i = 0; i < OL_ROLE_COUNT; i++)
      if (!shown[i] && bytes[i] > 0 && (best < 0 || bytes[i] > bytes[best]))
        best = i;
    if (best < 0)
      break;
    char text[32];
    ol_format_bytes(text, sizeof text, bytes[best]);
    ol_buf_printf(out, "%s%s %s", n ? ", " : "", ol_role_name((ol_role_t)best), text);
    shown[best] = true;
  }
}

bool ol_role_is_state(ol_role_t role)
{
  return role == OL_ROLE_weights || role == OL_ROLE_gradients || role == OL_ROLE_optimizer;
}

bool ol_role_parse(const char *name, ol_role_t *out)
{
  for (int i = 0; name && i < OL_ROLE_COUNT; i++)
    if (strcmp(name, ol_role_name((ol_role_t)i)) == 0) {
      *out = (ol_role_t)i;
      return true;
    }
  return false;
}
