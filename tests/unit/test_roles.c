/* test_roles.c: the role rule (core/roles.c) on real frame texts, and
 * memory by role counted from the recorded traces of tests/data.
 *
 * The frames below are copied from the six traces of tests/data (PyTorch's
 * recorder: base names) and from what the library writes (lib/pyframes.c:
 * the path from its package on; lib/stacks.c: native frames, notes, the
 * autograd thread's marker). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "core.h"
#include "pytorch_model.h"
#include "replay.h"
#include "report_view.h"

#define MiB (1ll << 20)

static ol_role_t role_of(const char *frames)
{
  return ol_role_of_frames(frames, strlen(frames));
}

typedef struct role_case {
  const char *frames;
  ol_role_t role;
} role_case_t;

static const role_case_t cases[] = {
  /* weights: Module.to/.cuda through _apply's convert lambda */
  {"module.py:1097:<lambda>;module.py:965:_apply;module.py:934:_apply;workloads.py:9:gpt2",
   OL_ROLE_weights},
  {"module.py:1097:<lambda>;module.py:1035:_apply;module.py:934:_apply;workloads.py:40:resnet50",
   OL_ROLE_weights},
  {"torch/nn/modules/module.py:1097:<lambda>;torch/nn/modules/module.py:965:_apply;train.py:9:main",
   OL_ROLE_weights},
  {"torch/nn/modules/linear.py:106:__init__;train.py:5:build", OL_ROLE_weights},
  /* an LSTM's flat weights, made by RNNBase._apply's own override when the
   * module is moved (held-out rnn_batch: 96 MiB read as "other") */
  {"torch/nn/modules/rnn.py:285:flatten_parameters;torch/nn/modules/rnn.py:228:_init_flat_weights;"
   "torch/nn/modules/rnn.py:304:_apply;train.py:7:main", /* four frames kept: not the .cuda() */
   OL_ROLE_weights},
  {"transformers/modeling_utils.py:812:_load_state_dict_into_meta_model;"
   "transformers/modeling_utils.py:5000:_load_pretrained_model;train.py:3:main",
   OL_ROLE_weights},
  /* a checkpoint read onto the device (held-out checkpoint_load's frames,
   * and the recorder's base names); safetensors' load_file */
  {"torch/_utils.py:106:_to;torch/storage.py:289:to;torch/serialization.py:668:_deserialize;"
   "train.py:57:resume", OL_ROLE_weights},
  {"_utils.py:106:_to;storage.py:289:to;serialization.py:668:_deserialize;train.py:57:resume",
   OL_ROLE_weights},
  {"safetensors/torch.py:313:load_file;train.py:12:main", OL_ROLE_weights},
  /* another GPU library's pool in the same process (held-out cupy_pool's
   * frames on the H200), and JAX's: theirs, whatever the functions are
   * called; Keras 3 and Triton run on torch's tensors, so not theirs */
  {"cupy/_creation/basic.py:34:empty;cupy/random/_generator.py:105:_generate_normal;"
   "cupy/random/_generator.py:548:standard_normal;oom_cases.py:1021:cupy_pool",
   OL_ROLE_library},
  {"cupy_backends/cuda/api/runtime.py:1:malloc;train.py:3:features", OL_ROLE_library},
  {"jax/_src/array.py:900:_array_forward;train.py:3:main", OL_ROLE_library},
  {"keras/src/backend/torch/core.py:200:convert_to_tensor;train.py:3:main", OL_ROLE_other},
  {"site-packages/mycupy/ops.py:10:forward;train.py:3:main", OL_ROLE_activations},
  /* a lazy module's parameters, made inside its first forward: the
   * innermost frame that names a role wins */
  {"torch/nn/parameter.py:80:materialize;torch/nn/modules/lazy.py:200:_infer_parameters;"
   "torch/nn/modules/module.py:1790:_call_impl;train.py:20:step",
   OL_ROLE_weights},
  /* optimizer state and the step's temporaries */
  {"adam.py:182:_init_group;adam.py:238:step;optimizer.py:81:_use_grad;workloads.py:15:gpt2",
   OL_ROLE_optimizer},
  {"adam.py:178:_init_group;adam.py:238:step;optimizer.py:81:_use_grad;workloads.py:15:gpt2",
   OL_ROLE_optimizer},
  {"adam.py:791:_multi_tensor_adam;adam.py:971:adam;optimizer.py:151:maybe_fallback;"
   "workloads.py:15:gpt2", OL_ROLE_optimizer},
  {"sgd.py:455:_multi_tensor_sgd;sgd.py:306:sgd;sgd.py:127:step;workloads.py:47:resnet50",
   OL_ROLE_optimizer},
  {"bitsandbytes/optim/optimizer.py:287:step;train.py:30:main", OL_ROLE_optimizer},
  /* an optimizer's load_state_dict is its state, not weights */
  {"torch/optim/optimizer.py:900:_process_value_according_to_param_policy;"
   "torch/optim/optimizer.py:950:load_state_dict;train.py:8:resume", OL_ROLE_optimizer},
  /* the backward pass */
  {"__init__.py:231:_make_grads;__init__.py:374:backward;_tensor.py:631:backward;"
   "workloads.py:15:gpt2", OL_ROLE_backward},
  {"(thread pt_autograd_0)", OL_ROLE_backward},
  {"train.py:33:engine_work;threading.py:982:run;(thread pt_autograd_0)", OL_ROLE_backward},
  {"libtorch_cuda.so+0x1a2b c10::cuda::CUDACachingAllocator::malloc (CUDACachingAllocator.cpp:12);"
   "(thread pt_autograd_1)", OL_ROLE_backward},
  /* activation checkpointing's recompute, on the engine's thread: the
   * forward it reruns is innermost */
  {"torch/nn/modules/linear.py:125:forward;torch/utils/checkpoint.py:300:recompute_fn;"
   "(thread pt_autograd_0)", OL_ROLE_activations},
  /* the forward pass */
  {"activations.py:66:forward;module.py:1790:_call_impl;module.py:1779:_wrapped_call_impl;"
   "workloads.py:14:gpt2", OL_ROLE_activations},
  {"functional.py:2935:layer_norm;normalization.py:229:forward;module.py:1790:_call_impl;"
   "workloads.py:14:gpt2", OL_ROLE_activations},
  {"loss_utils.py:59:ForCausalLMLoss;modeling_gpt2.py:702:forward;generic.py:939:wrapper;"
   "workloads.py:14:gpt2", OL_ROLE_activations},
  {"functional.py:3504:cross_entropy;workloads.py:46:resnet50;workloads.py:101:main;"
   "workloads.py:123:<module>", OL_ROLE_activations},
  {"cache_utils.py:147:update;cache_utils.py:1397:update;modeling_gpt2.py:196:forward;"
   "workloads.py:14:gpt2", OL_ROLE_activations},
  {"sdpa_attention.py:158:sdpa_attention_forward;modeling_gpt2.py:211:forward;"
   "module.py:1790:_call_impl;workloads.py:14:gpt2", OL_ROLE_activations},
  {"conv.py:548:_conv_forward;conv.py:553:forward;module.py:1790:_call_impl;"
   "workloads.py:46:resnet50", OL_ROLE_activations},
  {"functional.py:835:_max_pool2d;_jit_internal.py:636:fn;pooling.py:224:forward;"
   "workloads.py:46:resnet50", OL_ROLE_activations},
  {"modeling_gpt2.py:577:forward;output_capturing.py:286:wrapper;generic.py:1068:wrapper;"
   "workloads.py:14:gpt2", OL_ROLE_activations},
  /* DDP's Reducer making its gradient buckets (held-out ddp_batch's frames),
   * and rebuilding them before the second forward; not what _pre_forward's
   * deeper calls make (the inputs moved), nor DDP's broadcast at __init__ */
  {"torch/nn/parallel/distributed.py:1255:_ddp_init_helper;"
   "torch/nn/parallel/distributed.py:896:__init__;oom_cases.py:2737:ddp_batch",
   OL_ROLE_gradients},
  {"libc10_cuda.so+0x1a2b;distributed.py:1255:_ddp_init_helper;distributed.py:896:__init__",
   OL_ROLE_gradients},
  {"torch/nn/parallel/distributed.py:1610:_pre_forward;"
   "torch/nn/parallel/distributed.py:1690:forward;torch/nn/modules/module.py:1790:_call_impl",
   OL_ROLE_gradients},
  {"torch/distributed/utils.py:120:to_map;torch/distributed/utils.py:170:_to_kwargs;"
   "torch/nn/parallel/distributed.py:1640:_pre_forward;torch/nn/parallel/distributed.py:1690:forward",
   OL_ROLE_activations},
  {"torch/distributed/utils.py:326:_sync_params_and_buffers;"
   "torch/distributed/utils.py:315:_sync_module_states;torch/nn/parallel/distributed.py:883:__init__;"
   "oom_cases.py:2737:ddp_batch", OL_ROLE_other},
  /* FSDP's parameters (held-out fsdp_batch and fsdp2_batch's frames): the
   * first API's flat parameters, the second's shards and gathered wholes */
  {"torch/distributed/fsdp/_flat_param.py:894:flatten_tensors;"
   "torch/distributed/fsdp/_flat_param.py:902:flatten_tensors_into_flat_param;"
   "torch/distributed/fsdp/_flat_param.py:779:_init_flat_param_and_metadata;"
   "oom_cases.py:2788:fsdp_batch", OL_ROLE_weights},
  {"torch/distributed/fsdp/_fully_shard/_fsdp_param.py:390:_init_sharded_param;"
   "torch/utils/_contextlib.py:124:decorate_context;"
   "torch/distributed/fsdp/_fully_shard/_fsdp_param.py:245:__init__;oom_cases.py:2810:fsdp2_batch",
   OL_ROLE_weights},
  {"torch/distributed/fsdp/_fully_shard/_fsdp_param.py:477:init_all_gather_outputs;"
   "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:378:wait_for_unshard;"
   "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:450:pre_forward;"
   "oom_cases.py:2815:fsdp2_batch", OL_ROLE_weights},
  {"_flat_param.py:894:flatten_tensors;_flat_param.py:779:_init_flat_param_and_metadata",
   OL_ROLE_weights}, /* the recorder's base names */
  /* Python frames that name no role: other */
  {"workloads.py:44:resnet50;workloads.py:101:main;workloads.py:123:<module>", OL_ROLE_other},
  {"workloads.py:67:frag;workloads.py:162:main;workloads.py:184:<module>", OL_ROLE_other},
  {"grad_scaler.py:356:unscale_;grad_scaler.py:473:step;workloads.py:47:resnet50;"
   "workloads.py:101:main", OL_ROLE_other},
  {"workloads.py:12:gpt2;workloads.py:101:main;workloads.py:123:<module>", OL_ROLE_other},
  {"model.py:20:__init__;train.py:5:main", OL_ROLE_other}, /* a job's own __init__ */
  {"py_sites.py:20:device_alloc;py_sites.py:30:build_weights;py_sites.py:38:two_sites",
   OL_ROLE_other},
  /* no Python frame: unknown */
  {"", OL_ROLE_unknown},
  {"(not sampled: OOMLENS_STACK_SAMPLE)", OL_ROLE_unknown},
  {"(no call stack)", OL_ROLE_unknown},
  {"(thread worker_3)", OL_ROLE_unknown},
  {"cuda_prog+0x29f2 cuda_prog_weights;cuda_prog+0x1de6 main;libc.so.6+0x27304 __libc_start_main",
   OL_ROLE_unknown},
  {"liboomlens_test.so+0x10 ns::forward(int) (layer.cpp:42);0x7f00dead", OL_ROLE_unknown},
};

START_TEST(role_of_real_frames)
{
  const role_case_t *c = &cases[_i];
  ol_role_t got = role_of(c->frames);
  ck_assert_msg(got == c->role, "%s: %s, not %s", c->frames, ol_role_name(got),
                ol_role_name(c->role));
}
END_TEST

/* What an optimizer's frames say beside their role. update: its foreach
 * update made the request (held-out foreach_step: Adam's, whose
 * temporaries come beside the state); not its state's making, its fused
 * update or a forward. buffers: its first step's _init_group makes that
 * many buffers for each trained parameter (held-out optim_switch_state:
 * AdamW's moments, half made when it ran out): Adam's family two, RMSprop
 * one, SGD's _init_group none (its momentum comes in the update), nor a
 * file of the job's own called adam.py. state: SGD's update, which makes
 * its momentum buffers itself (held-out sgd_momentum_step). */
START_TEST(optimizer_frames_fold)
{
  static const struct {
    const char *frames;
    bool update;
    int buffers;
    bool state;
  } frames[] = {
    {"torch/optim/adam.py:791:_multi_tensor_adam;torch/optim/adam.py:971:adam;"
     "torch/optim/optimizer.py:151:maybe_fallback;oom_cases.py:30:learn", true, 0, false},
    {"adamw.py:500:_multi_tensor_adamw;adamw.py:300:adamw", true, 0, false}, /* base names */
    {"torch/optim/adam.py:178:_init_group;torch/optim/adam.py:238:step;"
     "torch/optim/optimizer.py:81:_use_grad;oom_cases.py:30:learn", false, 2, false},
    {"/opt/venv/lib/python3.12/site-packages/torch/optim/adamw.py:120:_init_group;x.py:1:f",
     false, 2, false},
    {"adam.py:182:_init_group;adam.py:238:step", false, 2, false}, /* the recorder's */
    {"torch/optim/nadam.py:90:_init_group", false, 2, false},
    {"torch/optim/rmsprop.py:80:_init_group;torch/optim/rmsprop.py:150:step", false, 1, false},
    {"torch/optim/sgd.py:40:_init_group;torch/optim/sgd.py:80:step", false, 0, false},
    {"mytrainer/adam.py:10:_init_group;train.py:3:main", false, 0, false},
    {"torch/optim/adam.py:700:_fused_adam;torch/optim/adam.py:971:adam", false, 0, false},
    {"torch/optim/sgd.py:455:_multi_tensor_sgd;torch/optim/sgd.py:306:sgd;"
     "torch/optim/sgd.py:127:step", true, 0, true},
    {"sgd.py:380:_single_tensor_sgd;sgd.py:306:sgd", false, 0, true},
    {"torch/nn/modules/linear.py:134:forward;train.py:3:main", false, 0, false},
    {"", false, 0, false},
  };
  for (size_t i = 0; i < sizeof frames / sizeof *frames; i++) {
    ol_role_fold_t fold = ol_role_fold_of_frames(frames[i].frames, strlen(frames[i].frames));
    ck_assert_msg(fold.update == frames[i].update && fold.state_buffers == frames[i].buffers &&
                    fold.update_makes_state == frames[i].state,
                  "%s", frames[i].frames);
  }
}
END_TEST

/* One frame alone: a Python frame that names nothing is other, anything
 * else that names nothing is unknown; CPython's "no line" (-1) reads. */
START_TEST(role_of_one_frame)
{
  const char *f = "torch/nn/modules/module.py:-1:_apply";
  ck_assert_int_eq(ol_role_of_frame(f, strlen(f)), OL_ROLE_weights);
  f = "train.py:12:main";
  ck_assert_int_eq(ol_role_of_frame(f, strlen(f)), OL_ROLE_other);
  f = "train.py:x:forward"; /* not a line number: not a Python frame */
  ck_assert_int_eq(ol_role_of_frame(f, strlen(f)), OL_ROLE_unknown);
  f = "train.py:12:";
  ck_assert_int_eq(ol_role_of_frame(f, strlen(f)), OL_ROLE_unknown);
  /* only the len bytes count: the frame as it lies in a site's key */
  f = "linear.py:125:forward;adam.py:1:_init_group";
  ck_assert_int_eq(ol_role_of_frame(f, strlen("linear.py:125:forward")), OL_ROLE_activations);
  ck_assert_str_eq(ol_role_name(OL_ROLE_optimizer), "optimizer");
  ck_assert_str_eq(ol_role_name(OL_ROLE_COUNT), "?");
  ck_assert_str_eq(ol_role_meaning(OL_ROLE_gradients), "gradients");
}
END_TEST

/* ---- memory by role from the recorded traces ---------------------------- */

/* GPT-2 124M (124,439,808 parameters, fp32) trained with AdamW: at the
 * peak its weights are exactly the parameters' bytes (the recorder's
 * blocks are rounded to 512 bytes, which these sizes already are), the
 * optimizer twice that (exp_avg and exp_avg_sq) plus the step's
 * temporaries, which at the peak (the backward) are none. The backward
 * pass's allocations have no frames in PyTorch's recorder (the engine's
 * threads run no Python): unknown, which is most of the rest with the
 * activations. Every byte at the peak has a role row. */
START_TEST(gpt2_trace_by_role)
{
  ol_report_t v;
  ol_error_t err;
  ck_assert_msg(ol_view_load(&v, OL_TEST_DATA_DIR "/gpt2.csv.gz", &err) == 0, "%s", err.text);
  const ol_report_device_t *d = &v.devices[0];
  const int64_t params = 124439808ll * 4;
  ck_assert(d->roles_known);
  ck_assert_int_eq(d->roles_at_peak[OL_ROLE_weights], params);
  ck_assert_int_eq(d->roles_at_peak[OL_ROLE_optimizer], 2 * params);
  ck_assert_int_gt(d->roles_at_peak[OL_ROLE_activations], 15 * 1024 * MiB);
  ck_assert_int_gt(d->roles_at_peak[OL_ROLE_unknown], 6 * 1024 * MiB);
  ck_assert_int_eq(d->roles_at_peak[OL_ROLE_gradients], 0); /* none seen: no frames */
  int64_t sum = 0;
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    sum += d->roles_at_peak[i];
  ck_assert_int_eq(sum, d->stats.allocated_bytes[OL_POOL_ALL].peak);
  ol_report_free(&v);
}
END_TEST

/* The weights at load (a 2.7B-parameter model in fp32 under an 8 GiB cap):
 * replay's out-of-memory sees every live byte as weights. */
START_TEST(oom_params_replay_is_all_weights)
{
  ol_policy_options_t options = {.capacity = 8ull << 30};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(OL_TEST_DATA_DIR "/oom_params.csv.gz", &ol_policy_pytorch,
                               &options, &r, &err) == 0, "%s", err.text);
  ck_assert(r.oom);
  const ol_oom_record_t *rec = &r.oom_at.record;
  ck_assert(rec->roles_known);
  ck_assert_int_gt(rec->role_bytes[OL_ROLE_weights], 7 * 1024 * MiB);
  ck_assert_int_eq(rec->role_bytes[OL_ROLE_weights], rec->allocated);
  ol_replay_result_free(&r);
}
END_TEST

/* The batch-8 forward of GPT-2 that does not fit 12 GiB: at replay's
 * out-of-memory, weights and optimizer state are the model's (2 GB of
 * 12), the rest the forward's activations. */
START_TEST(oom_activations_replay_by_role)
{
  ol_policy_options_t options = {.capacity = 12ull << 30};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(OL_TEST_DATA_DIR "/oom_activations.csv.gz", &ol_policy_pytorch,
                               &options, &r, &err) == 0, "%s", err.text);
  ck_assert(r.oom);
  const ol_oom_record_t *rec = &r.oom_at.record;
  const int64_t params = 124439808ll * 4;
  ck_assert(rec->roles_known);
  ck_assert_int_eq(rec->role_bytes[OL_ROLE_weights], params);
  ck_assert_int_eq(rec->role_bytes[OL_ROLE_optimizer], 2 * params);
  ck_assert_int_gt(rec->role_bytes[OL_ROLE_activations], 4 * rec->role_bytes[OL_ROLE_optimizer]);
  int64_t sum = 0;
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    sum += rec->role_bytes[i];
  ck_assert_int_eq(sum, rec->allocated);
  ol_replay_result_free(&r);
}
END_TEST

/* ---- the gradients' split, on a table ------------------------------------ */

/* A backward site's bytes live when an optimizer site next grows are
 * gradients; what it makes and frees before that are temporaries. */
START_TEST(gradients_are_what_the_step_sees)
{
  ol_sites_t *s = ol_sites_new();
  int32_t bwd = ol_sites_intern(s, "b", 1), opt = ol_sites_intern(s, "o", 1);
  ol_sites_set_role(s, bwd, OL_ROLE_backward);
  ol_sites_set_role(s, opt, OL_ROLE_optimizer);
  int64_t out[OL_ROLE_COUNT];
  ol_sites_add(s, bwd, 100); /* gradients */
  ol_sites_add(s, bwd, 30);  /* a temporary */
  ck_assert(ol_sites_role_bytes(s, OL_SITES_BY_CURRENT, 130, out));
  ck_assert_int_eq(out[OL_ROLE_backward], 130); /* no step yet: temporaries */
  ol_sites_add(s, bwd, -30);
  ol_sites_add(s, opt, 10); /* the step begins */
  ol_sites_add(s, bwd, 50); /* the next backward: a temporary above the gradients */
  ol_sites_role_bytes(s, OL_SITES_BY_CURRENT, 160, out);
  ck_assert_int_eq(out[OL_ROLE_gradients], 100);
  ck_assert_int_eq(out[OL_ROLE_backward], 50);
  ck_assert_int_eq(out[OL_ROLE_optimizer], 10);
  ck_assert_int_eq(out[OL_ROLE_unknown], 0);
  ol_sites_t *copy = ol_sites_copy(s); /* a report's copy splits alike */
  ol_sites_role_bytes(copy, OL_SITES_BY_CURRENT, 200, out);
  ck_assert_int_eq(out[OL_ROLE_gradients], 100);
  ck_assert_int_eq(out[OL_ROLE_unknown], 40); /* bytes of no site */
  ck_assert_int_eq(ol_sites_role(copy, opt), OL_ROLE_optimizer);
  ol_sites_free(copy);
  ol_sites_free(s);
}
END_TEST

/* A table whose sites all lack frames: not known, all unknown. */
START_TEST(no_frames_no_roles)
{
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  ol_trace_event_t ev = {.action = OL_TRACE_ALLOC, .addr = 0x1000, .size = 4096};
  ck_assert(ol_account_apply(&a, &ev, NULL));
  bool known = true;
  int64_t out[OL_ROLE_COUNT];
  ol_account_role_bytes(&a, 0, OL_SITES_BY_CURRENT, &known, out);
  ck_assert(!known);
  ck_assert_int_eq(out[OL_ROLE_unknown], 4096);
  ev = (ol_trace_event_t){.action = OL_TRACE_ALLOC, .addr = 0x2000, .size = 512,
                          .frames = "adam.py:1:_init_group", .frames_len = 21};
  ck_assert(ol_account_apply(&a, &ev, NULL));
  ol_account_role_bytes(&a, 0, OL_SITES_BY_CURRENT, &known, out);
  ck_assert(known);
  ck_assert_int_eq(out[OL_ROLE_optimizer], 512);
  ol_account_free(&a);
}
END_TEST

static Suite *roles_suite(void)
{
  Suite *s = suite_create("roles");
  TCase *rule = tcase_create("rule");
  tcase_add_loop_test(rule, role_of_real_frames, 0, (int)(sizeof cases / sizeof *cases));
  tcase_add_test(rule, role_of_one_frame);
  tcase_add_test(rule, optimizer_frames_fold);
  suite_add_tcase(s, rule);
  TCase *bytes = tcase_create("bytes");
  tcase_set_timeout(bytes, 120);
  tcase_add_test(bytes, gpt2_trace_by_role);
  tcase_add_test(bytes, oom_params_replay_is_all_weights);
  tcase_add_test(bytes, oom_activations_replay_by_role);
  tcase_add_test(bytes, gradients_are_what_the_step_sees);
  tcase_add_test(bytes, no_frames_no_roles);
  suite_add_tcase(s, bytes);
  return s;
}

int main(void)
{
  return ol_run_suite(roles_suite());
}
