/* pytorch_model.h: a model of PyTorch's CUDA caching allocator (torch 2.x,
 * c10/cuda/CUDACachingAllocator.cpp) as two policies of policy.h:
 *
 *   "pytorch"             the default: cudaMalloc'd segments, small and
 *                         large pools, best fit, splitting, max_split_size,
 *                         release of cached segments and retry at the cap;
 *   "pytorch-expandable"  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True:
 *                         one growing segment per stream and pool, mapped in
 *                         2 MiB (small) or 20 MiB (large) pages.
 *
 * The capacity plays the part of set_per_process_memory_fraction's cap (or
 * the device's memory): a segment that would take reserved memory past it
 * fails as cudaMalloc would. Reserved counts segments (or mapped pages),
 * allocated counts the blocks handed out, as torch.cuda.memory_stats does.
 * Addresses are the model's own, handed out from a simulated address space.
 *
 * Not modelled: roundup_power2_divisions and garbage_collection_threshold
 * (both off by default), record_stream and its CUDA events (a block is
 * reusable at free_completed, which is when the trace says PyTorch reused
 * it), CUDA graph private pools, and where the driver places segments
 * (best fit breaks ties by address, so with other addresses a different one
 * of two equal blocks may be chosen: on gpt2, resnet50, frag and oom_params
 * the segments held match PyTorch's after every event (tested); on
 * gpt2_varlen and oom_activations they differ by a segment at times, and
 * the peaks still match). */
#ifndef OL_PYTORCH_MODEL_H
#define OL_PYTORCH_MODEL_H

#include "policy.h"

/* PyTorch's constants, in bytes. */
#define OL_PT_MIN_BLOCK ((uint64_t)512)           /* every size is rounded to this */
#define OL_PT_SMALL_SIZE ((uint64_t)1 << 20)      /* largest request of the small pool */
#define OL_PT_SMALL_BUFFER ((uint64_t)2 << 20)    /* small pool segment (and page) */
#define OL_PT_MIN_LARGE_ALLOC ((uint64_t)10 << 20) /* below it a large request gets ... */
#define OL_PT_LARGE_BUFFER ((uint64_t)20 << 20)   /* ... a 20 MiB segment (and page) */
#define OL_PT_ROUND_LARGE ((uint64_t)2 << 20)     /* larger segments round up to this */

extern const ol_policy_ops_t ol_policy_pytorch, ol_policy_pytorch_expandable;

/* For the tests: PyTorch's round_size() and get_allocation_size(). */
uint64_t ol_pt_round_size(uint64_t size);
uint64_t ol_pt_segment_size(uint64_t rounded);

#endif
