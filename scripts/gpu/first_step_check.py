"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=first_step_check.py sh .gpu/run.sh): a first-step OOM's
batch figure (docs/diagnosis.md, "A first step's figure") on jobs the
corpus does not hold, against the truth found by bisection.

Each job below runs once at a batch too large for the cap, under `oomlens
run --manage --capacity CAP --batch B`, for one step: its report's
first_step (how far the forward got), the figure (about LOW to HIGH, at
most BOUND). Then the largest batch whose two steps fit under the same cap
is bisected (between 1 and the bound, which the truth is never above).
Prints one FIRST_STEP line a job and writes $OUT/first_step_check.json and
$OUT/first_step_check.md (the table for docs/measurements.md).

OOMLENS_FS_JOBS=name,name picks jobs (name:batch one of a name's batches;
bert_batch: the corpus's case, run
by oom_cases.py, to bisect the truth its manifest lacks);
OOMLENS_FS_NO_BISECT=1 skips the bisection; OOMLENS_FS_TRACE=1 writes
the trace of each job's run out to $OUT/trace-NAME-BATCH.trace (replayed
here by other builds); OOMLENS_FS_BUDGET_S (default
540) is the whole script's time: a job is started only within it, and a
bisection that would run past it stops, keeping the bracket it reached
(`truth` stays unset, `bracket` [fits, runs out]). The jobs run from this file: python3 first_step_check.py --job
NAME --batch N --steps N."""
import argparse, contextlib, json, os, time

import oomlens_run

HERE = os.path.abspath(__file__)
OUT = os.environ.get('OUT', '.')

# name, cap, the batch that runs out: models of families and shapes the
# estimate was not built on (the corpus holds GPT-2 at 1024 and ResNet-50).
JOBS = [
    dict(name='gpt2_seq512', cap='8G', batch=24),
    dict(name='gpt2_medium', cap='16G', batch=12),
    dict(name='llama_small', cap='12G', batch=16),
    dict(name='bert_classify', cap='8G', batch=128),
    dict(name='vit_base', cap='8G', batch=256),
    dict(name='resnet18', cap='4G', batch=512),
    # the corpus's bert_batch, run by oom_cases.py: its truth is not bisected
    # yet (its figure is the bound "at most 26"; the manifest has no truth)
    dict(name='bert_batch', cap='8G', batch=96, corpus=True),
    # session 35: forwards that do not end at the end of one stack. Two
    # encoder-decoders whose decoder (target 512 tokens beside a source of
    # 128) is the heavier, so that the batch runs out past the encoder;
    # and a siamese encoder (BERT run on two inputs a step), out in its
    # second pass.
    dict(name='t5_long_target', cap='8G', batch=64),
    dict(name='bart_long_target', cap='12G', batch=48),
    dict(name='siamese_bert', cap='8G', batch=16),
    # session 35: language models whose vocabulary is large beside their
    # width (Llama 3's 128,256 tokens), so that the first step runs out at
    # the head's logits: the estimate after the stack, on other models
    # than GPT-2; in fp32, and with bf16 weights (the loss's fp32 upcast)
    dict(name='llama_big_vocab', cap='12G', batch=16),
    dict(name='llama_big_vocab_bf16', cap='8G', batch=24),
    # a small LLM's shape (Qwen2-0.5B: 24 layers of 896, vocabulary
    # 151,936, tied), fine-tuned in bf16 at sequence 512: its layers hold
    # most of the weights, and the step runs out at the 16-bit logits
    dict(name='qwen_small_bf16', cap='12G', batch=16),
    # the same at batch 15 (5 fits, bisected at 16): its layers fit, their
    # 16-bit logits do not
    dict(name='qwen_small_bf16_at_head', cap='12G', batch=15),
    # Llama 3.2-1B's shape in bf16 (16 layers of 2048, vocabulary 128,256,
    # tied), sequence 512: its layers fit at batch 27 under 24G, its
    # 16-bit logits do not
    dict(name='llama1b_bf16_at_head', cap='24G', batch=27),
    # qwen_small_bf16's model in fp32 under bf16 autocast: its weights
    # fp32, its logits 16-bit (autocast's copies of the weights tell it)
    dict(name='qwen_small_autocast', cap='16G', batch=18),
    # the corpus's ckpt_batch (GPT-2 under bf16 autocast, checkpointing),
    # bisected under half and 0.4 of its cap: its 12G trace replayed there
    # runs out at its 16-bit logits (the autocast reading's evidence)
    dict(name='ckpt_batch', cap='6G', batch=48, corpus=True),
    dict(name='ckpt_batch', cap='4915M', batch=48, corpus=True),
    # session 36: language models out inside their stack, whose logits the
    # figure reads ahead (first_step.c's logits_ahead): families and heads
    # the rule was not built on. Pythia-160m's shape (GPT-NeoX, its head
    # untied) in fp32; a Mistral-like model (untied, GQA) in bf16; Qwen2-1.5B's
    # shape (28 layers of 1536, tied) in bf16; BERT-large's shape as a
    # masked LM (its head a transform and the decoder's bias) at sequence
    # 128; GPT-2 large's shape under bf16 autocast; and a head that makes
    # no logits (GPT-2 classifying sequences: nothing is read ahead).
    dict(name='pythia_160m', cap='12G', batch=20),
    dict(name='mistral_small_bf16', cap='8G', batch=40),
    dict(name='qwen_1_5b_bf16', cap='24G', batch=36),
    dict(name='bert_large_mlm', cap='12G', batch=128),
    dict(name='gpt2_large_autocast', cap='24G', batch=22),
    dict(name='gpt2_classify', cap='8G', batch=16),
    # session 37: heads and losses that the read-ahead counts as a plain
    # cross-entropy over logits the model makes (docs/diagnosis.md names
    # them as its risk): Gemma 2's shape, whose logits are soft-capped
    # (divided, tanh, multiplied: more tensors of their size; tied,
    # vocabulary 256,000, bf16, eager attention); a Llama trained by a
    # loop's own loss (its logits kept, shifted by a copy, upcast); GPT-2
    # with label smoothing, its logits kept.
    dict(name='gemma2_softcap_bf16', cap='40G', batch=24),
    dict(name='llama_own_loss_bf16', cap='16G', batch=32),
    dict(name='gpt2_smooth_loss', cap='12G', batch=16),
    # session 37, after the forward's layers were counted where they repeat
    # every k layers (first_step.c's layers_a_period): GPT-Neo 125M's shape
    # (its layers alternating global and local attention, fp32) and Gemma
    # 3's (five sliding-window layers to one global, 262,144 tokens, bf16)
    dict(name='gpt_neo', cap='12G', batch=16),
    dict(name='gemma3_bf16', cap='40G', batch=40),
    # ModernBERT-base's shape as a masked LM: global attention every third
    # layer, local (128 tokens) in the others, fp32, sequence 1024
    dict(name='modernbert_mlm', cap='12G', batch=64),
    # session 38: a mixture of experts (Mixtral's shape, small: 16 layers of
    # 1024, 8 experts, 2 a token, bf16): each layer's expert asks follow how
    # many tokens its router sent to each expert, so no two layers' asks
    # repeat exactly
    dict(name='mixtral_small_bf16', cap='16G', batch=16),
    # the same at a batch whose forward runs out inside the stack, and
    # Phi-3's shape (fused query-key-value and gate-up projections, one
    # tensor each where Llama asks for three and two), bf16, small
    dict(name='mixtral_small_bf16', cap='16G', batch=24),
    dict(name='phi3_small_bf16', cap='12G', batch=32),
    # session 41: families the read-ahead was not built on, listed before
    # they ran. BLOOM-560m's shape (ALiBi: a bias of heads by tokens by
    # tokens a layer; vocabulary 250,880, tied), fp32; a Falcon of the
    # first architecture (attention and MLP in parallel, fused query-key-
    # value), fp32; OPT-350m's shape, whose embedding (512 wide) is
    # projected to its layers' width (1024): the tokens are not read from
    # it, the figure stays a bound
    dict(name='bloom_560m', cap='12G', batch=8),
    dict(name='falcon_small', cap='12G', batch=16),
    dict(name='opt_350m', cap='12G', batch=16),
    # session 47, listed before they ran: families none of the rules was
    # built on. DeBERTa-v3-base's shape as a masked LM (disentangled
    # attention: content-to-position and position-to-content scores beside
    # the usual ones, vocabulary 128,100), fp32, sequence 512; XLM-R base's
    # (vocabulary 250,002: the MLM head's logits outweigh a layer) at
    # sequence 256; Qwen3-0.6B's shape (28 layers of 1024, norms on the
    # queries and keys, tied, 151,936 tokens) in bf16; GPT-J's shape, small
    # (16 layers of 1024, parallel attention and MLP, rotary on 64 of each
    # head's dimensions, untied head), fp32
    dict(name='deberta_v3_mlm', cap='12G', batch=24),
    dict(name='xlmr_mlm', cap='12G', batch=32),
    dict(name='qwen3_small_bf16', cap='16G', batch=16),
    dict(name='gptj_small', cap='16G', batch=8),
]
CASES = os.path.join(os.path.dirname(HERE), 'oom_cases.py')
BUDGET_S = float(os.environ.get('OOMLENS_FS_BUDGET_S', '540'))
START = time.time()


def left_s():
    return BUDGET_S - (time.time() - START)


def job_model(name):
    import torch
    import transformers as tf
    if name == 'gpt2_seq512':
        m = tf.GPT2LMHeadModel(tf.GPT2Config())
        return m, 'lm', 512, 50257, torch.optim.AdamW
    if name == 'gpt2_medium':
        m = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=24, n_embd=1024, n_head=16))
        return m, 'lm', 512, 50257, torch.optim.AdamW
    if name == 'llama_small':
        cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                             num_attention_heads=16, num_key_value_heads=16, vocab_size=32000)
        return tf.LlamaForCausalLM(cfg), 'lm', 1024, 32000, torch.optim.AdamW
    if name in ('llama_big_vocab', 'llama_big_vocab_bf16'):
        cfg = tf.LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                             num_attention_heads=8, num_key_value_heads=8, vocab_size=128256)
        m = tf.LlamaForCausalLM(cfg)
        if name.endswith('bf16'):
            m = m.to(torch.bfloat16)
        return m, 'lm', 1024, 128256, torch.optim.AdamW
    if name in ('qwen_small_bf16', 'qwen_small_bf16_at_head', 'qwen_small_autocast'):
        cfg = tf.Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                             num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                             tie_word_embeddings=True)
        m = tf.Qwen2ForCausalLM(cfg)
        if name == 'qwen_small_autocast':
            return m, 'lm_autocast', 512, 151936, torch.optim.AdamW
        return m.to(torch.bfloat16), 'lm', 512, 151936, torch.optim.AdamW
    if name == 'llama1b_bf16_at_head':
        cfg = tf.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                             num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                             tie_word_embeddings=True)
        return tf.LlamaForCausalLM(cfg).to(torch.bfloat16), 'lm', 512, 128256, torch.optim.AdamW
    if name == 'pythia_160m':
        cfg = tf.GPTNeoXConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                               intermediate_size=3072, vocab_size=50304,
                               tie_word_embeddings=False)
        return tf.GPTNeoXForCausalLM(cfg), 'lm', 1024, 50304, torch.optim.AdamW
    if name == 'mistral_small_bf16':
        cfg = tf.MistralConfig(hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
                               num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                               tie_word_embeddings=False)
        return tf.MistralForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 32000, torch.optim.AdamW
    if name == 'qwen_1_5b_bf16':
        cfg = tf.Qwen2Config(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                             num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                             tie_word_embeddings=True)
        return tf.Qwen2ForCausalLM(cfg).to(torch.bfloat16), 'lm', 512, 151936, torch.optim.AdamW
    if name == 'gemma2_softcap_bf16':
        cfg = tf.Gemma2Config(hidden_size=1024, intermediate_size=4096, num_hidden_layers=16,
                              num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                              vocab_size=256000, final_logit_softcapping=30.0,
                              attn_implementation='eager')
        return tf.Gemma2ForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 256000, torch.optim.AdamW
    if name == 'gpt_neo':
        cfg = tf.GPTNeoConfig(hidden_size=768, num_layers=12, num_heads=12,
                              attention_types=[[['global', 'local'], 6]], window_size=256,
                              max_position_embeddings=2048, vocab_size=50257)
        return tf.GPTNeoForCausalLM(cfg), 'lm', 1024, 50257, torch.optim.AdamW
    if name == 'gemma3_bf16':
        cfg = tf.Gemma3TextConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=18,
                                  num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                                  vocab_size=262144, sliding_window=512)
        return tf.Gemma3ForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 262144, torch.optim.AdamW
    if name == 'modernbert_mlm':
        cfg = tf.ModernBertConfig(hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                                  intermediate_size=1152, global_attn_every_n_layers=3,
                                  local_attention=128, vocab_size=50368,
                                  max_position_embeddings=8192)
        return tf.ModernBertForMaskedLM(cfg), 'lm', 1024, 50368, torch.optim.AdamW
    if name == 'mixtral_small_bf16':
        cfg = tf.MixtralConfig(hidden_size=1024, intermediate_size=1408, num_hidden_layers=16,
                               num_attention_heads=16, num_key_value_heads=4,
                               num_local_experts=8, num_experts_per_tok=2, vocab_size=32000)
        return tf.MixtralForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 32000, torch.optim.AdamW
    if name == 'phi3_small_bf16':
        cfg = tf.Phi3Config(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                            num_attention_heads=16, num_key_value_heads=16, vocab_size=32064,
                            pad_token_id=0)
        return tf.Phi3ForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 32064, torch.optim.AdamW
    if name == 'bloom_560m':
        cfg = tf.BloomConfig(hidden_size=1024, n_layer=24, n_head=16, vocab_size=250880)
        return tf.BloomForCausalLM(cfg), 'lm', 512, 250880, torch.optim.AdamW
    if name == 'falcon_small':
        cfg = tf.FalconConfig(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16,
                              new_decoder_architecture=False, parallel_attn=True,
                              multi_query=False, vocab_size=65024)
        return tf.FalconForCausalLM(cfg), 'lm', 1024, 65024, torch.optim.AdamW
    if name == 'opt_350m':
        cfg = tf.OPTConfig(hidden_size=1024, num_hidden_layers=24, ffn_dim=4096,
                           num_attention_heads=16, word_embed_proj_dim=512, vocab_size=50272,
                           max_position_embeddings=2048)
        return tf.OPTForCausalLM(cfg), 'lm', 1024, 50272, torch.optim.AdamW
    if name == 'deberta_v3_mlm':
        cfg = tf.DebertaV2Config(vocab_size=128100, hidden_size=768, num_hidden_layers=12,
                                 num_attention_heads=12, intermediate_size=3072,
                                 relative_attention=True, max_relative_positions=-1,
                                 position_buckets=256, pos_att_type=['p2c', 'c2p'],
                                 norm_rel_ebd='layer_norm', share_att_key=True,
                                 position_biased_input=False, max_position_embeddings=512)
        return tf.DebertaV2ForMaskedLM(cfg), 'lm', 512, 128100, torch.optim.AdamW
    if name == 'xlmr_mlm':
        cfg = tf.XLMRobertaConfig(vocab_size=250002, max_position_embeddings=514,
                                  type_vocab_size=1)
        return tf.XLMRobertaForMaskedLM(cfg), 'lm', 256, 250002, torch.optim.AdamW
    if name == 'qwen3_small_bf16':
        cfg = tf.Qwen3Config(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                             num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                             vocab_size=151936, tie_word_embeddings=True)
        return tf.Qwen3ForCausalLM(cfg).to(torch.bfloat16), 'lm', 1024, 151936, torch.optim.AdamW
    if name == 'gptj_small':
        cfg = tf.GPTJConfig(n_embd=1024, n_layer=16, n_head=16, rotary_dim=64, vocab_size=50400,
                            n_positions=2048)
        return tf.GPTJForCausalLM(cfg), 'lm', 1024, 50400, torch.optim.AdamW
    if name == 'llama_own_loss_bf16':
        cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                             num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)
        return (tf.LlamaForCausalLM(cfg).to(torch.bfloat16), 'lm_shift', 1024, 32000,
                torch.optim.AdamW)
    if name == 'gpt2_smooth_loss':
        return tf.GPT2LMHeadModel(tf.GPT2Config()), 'lm_smooth', 1024, 50257, torch.optim.AdamW
    if name == 'bert_large_mlm':
        cfg = tf.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                            intermediate_size=4096)
        return tf.BertForMaskedLM(cfg), 'lm', 128, 30522, torch.optim.AdamW
    if name == 'gpt2_large_autocast':
        m = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=36, n_embd=1280, n_head=20))
        return m, 'lm_autocast', 512, 50257, torch.optim.AdamW
    if name == 'gpt2_classify':
        cfg = tf.GPT2Config(num_labels=4, pad_token_id=50256)
        return tf.GPT2ForSequenceClassification(cfg), 'classify', 1024, 50257, torch.optim.AdamW
    if name == 'bert_classify':
        m = tf.BertForSequenceClassification(tf.BertConfig(num_labels=4))
        return m, 'classify', 512, 30522, torch.optim.SGD
    if name == 'vit_base':
        m = tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000))
        return m, 'image', 224, 1000, torch.optim.AdamW
    if name == 't5_long_target':  # T5-small's shape; the ids its config lacks (oom_cases.t5_model)
        cfg = tf.T5Config()
        for key, value in (('decoder_start_token_id', 0), ('pad_token_id', 0), ('eos_token_id', 1)):
            setattr(cfg, key, value)
        return tf.T5ForConditionalGeneration(cfg), 'seq2seq', (128, 512), 32128, torch.optim.AdamW
    if name == 'bart_long_target':  # BART-base's shape
        cfg = tf.BartConfig(d_model=768, encoder_layers=6, decoder_layers=6,
                            encoder_attention_heads=12, decoder_attention_heads=12,
                            encoder_ffn_dim=3072, decoder_ffn_dim=3072)
        return (tf.BartForConditionalGeneration(cfg), 'seq2seq', (128, 512), cfg.vocab_size,
                torch.optim.AdamW)
    if name == 'siamese_bert':
        return tf.BertModel(tf.BertConfig()), 'siamese', 256, 30522, torch.optim.AdamW
    if name == 'resnet18':
        import torchvision
        return torchvision.models.resnet18(), 'cnn', 224, 1000, torch.optim.SGD
    # second_step_check: CNNs under AdamW (session 41's two; session 42's
    # four, whose only matrix product is the classifier, as ResNet-50's)
    cnns = {'resnet50_adam': 'resnet50', 'convnext_tiny_adam': 'convnext_tiny',
            'resnet101_adam': 'resnet101', 'densenet121_adam': 'densenet121',
            'efficientnet_b0_adam': 'efficientnet_b0', 'mobilenet_v3_adam': 'mobilenet_v3_large',
            'vgg16_adam': 'vgg16', 'regnet_adam': 'regnet_y_800mf',
            'wide_resnet_adam': 'wide_resnet50_2',
            # session 43, held out from recent.c's ol_recent_rest_fixed
            # (built on VGG-16 and ResNet-101): a deeper VGG, AlexNet (58 of
            # its 61 million parameters in its classifier), ResNeXt, and two
            # transformers on images (Swin-T's windows, ViT-B/16)
            'vgg19_adam': 'vgg19', 'alexnet_adam': 'alexnet',
            'resnext50_adam': 'resnext50_32x4d', 'swin_t_adam': 'swin_t',
            'vit_b16_adam': 'vit_b_16'}
    if name in cnns:
        import torchvision
        return getattr(torchvision.models, cnns[name])(), 'cnn', 224, 1000, torch.optim.AdamW
    # session 44: the same networks under SGD with momentum 0.9 (the
    # recipe torchvision's references train them with), whose first update
    # makes the momentum (one buffer a weight, by torch.clone of its
    # gradient) and whose later updates make nothing
    sgd = name.removesuffix('_sgd') + '_adam'
    if name.endswith('_sgd') and sgd in cnns:
        import torchvision
        return getattr(torchvision.models, cnns[sgd])(), 'cnn', 224, 1000, torch.optim.SGD
    # a leak out at its second step (session 42): one of those CNNs
    # (NAME_eval_kept for NAME_adam), after each update an evaluation
    # forward of half a batch without no_grad, its output kept in a list
    # with its graph
    trained = name.removesuffix('_eval_kept') + '_adam'
    if name.endswith('_eval_kept') and trained in cnns:
        import torchvision
        return (getattr(torchvision.models, cnns[trained])(), 'cnn_eval_kept', 224, 1000,
                torch.optim.AdamW)
    raise SystemExit(f'no job {name}')


def run_job(name, batch, steps, style=None):
    import torch
    # NAME_accum4 (session 44): NAME's job under gradient accumulation over
    # 4 micro-steps, each of `batch`; a step of this loop is a micro-step,
    # and the optimizer steps after every 4th (second_step_check's "second
    # step" is then the second micro-step: the first's gradients held)
    accum = 4 if name.endswith('_accum4') else 1
    # NAME_amp (session 45): NAME's job with its forward and loss under
    # bf16 autocast (fp32 weights, a 16-bit copy of each made as a matrix
    # product reads it, held to the backward)
    base = name.removesuffix('_accum4')
    # NAME_ckpt (session 45): NAME's Hugging Face model with gradient
    # checkpointing (each layer's forward run again in its backward)
    ckpt = base.endswith('_ckpt')
    base = base.removesuffix('_ckpt')
    amp = base.endswith('_amp')
    model, kind, size, classes, optim = job_model(base.removesuffix('_amp'))
    if ckpt:
        model.gradient_checkpointing_enable()
    kind = style or kind
    model = model.cuda()
    opt = optim(model.parameters(), lr=1e-4, **({'momentum': 0.9} if optim is torch.optim.SGD
                                                else {}))
    done, error, peaks, outputs = 0, None, [], []
    try:
        for _ in range(steps):
            torch.cuda.reset_peak_memory_stats()
            with (torch.autocast('cuda', dtype=torch.bfloat16) if amp
                  else contextlib.nullcontext()):
                if kind.startswith('lm') or kind == 'classify':  # a batch of token ids
                    x = torch.randint(0, classes, (batch, size), device='cuda')
                if kind == 'lm':
                    loss = model(input_ids=x, labels=x).loss
                elif kind == 'lm_autocast':
                    with torch.autocast('cuda', dtype=torch.bfloat16):
                        loss = model(input_ids=x, labels=x).loss
                elif kind == 'lm_shift':  # the loop's own loss: logits kept, shifted, upcast
                    logits = model(input_ids=x).logits
                    shifted = logits[:, :-1].contiguous().float()
                    loss = torch.nn.functional.cross_entropy(shifted.view(-1, classes),
                                                             x[:, 1:].reshape(-1))
                elif kind == 'lm_outputs':  # the model's outputs kept to the next step
                    outputs = model(input_ids=x, labels=x)
                    loss = outputs.loss
                elif kind == 'lm_plain':  # the loop's own loss on the logits as they are, kept
                    logits = model(input_ids=x).logits
                    loss = torch.nn.functional.cross_entropy(logits.view(-1, classes), x.view(-1))
                elif kind == 'lm_smooth':  # label smoothing, logits kept
                    logits = model(input_ids=x).logits
                    loss = torch.nn.functional.cross_entropy(logits.view(-1, classes), x.view(-1),
                                                             label_smoothing=0.1)
                elif kind == 'classify':
                    y = torch.randint(0, 4, (batch,), device='cuda')
                    loss = model(input_ids=x, labels=y).loss
                elif kind == 'seq2seq':
                    x = torch.randint(3, classes, (batch, size[0]), device='cuda')
                    y = torch.randint(3, classes, (batch, size[1]), device='cuda')
                    loss = model(input_ids=x, labels=y).loss
                elif kind == 'siamese':  # two sentences, one encoder: their similarity's error
                    a = torch.randint(0, classes, (batch, size), device='cuda')
                    b = torch.randint(0, classes, (batch, size), device='cuda')
                    ea = model(input_ids=a).last_hidden_state[:, 0]
                    eb = model(input_ids=b).last_hidden_state[:, 0]
                    target = torch.rand(batch, device='cuda')
                    loss = ((torch.cosine_similarity(ea, eb) - target) ** 2).mean()
                elif kind == 'image':
                    x = torch.randn(batch, 3, size, size, device='cuda')
                    y = torch.randint(0, classes, (batch,), device='cuda')
                    loss = model(pixel_values=x, labels=y).loss
                else:
                    x = torch.randn(batch, 3, size, size, device='cuda')
                    y = torch.randint(0, classes, (batch,), device='cuda')
                    loss = torch.nn.functional.cross_entropy(model(x), y)
            (loss / accum).backward()
            if (done + 1) % accum == 0:
                opt.step()
                opt.zero_grad(set_to_none=True)
            del loss
            if kind == 'cnn_eval_kept':  # the leak: its graph kept with each output
                outputs.append(model(torch.randn(max(batch // 2, 1), 3, size, size,
                                                 device='cuda')))
            done += 1
            peaks.append(torch.cuda.max_memory_allocated())  # each step's (second_step_check)
        torch.cuda.synchronize()
    except RuntimeError as e:  # under --manage PyTorch's uncached path raises AcceleratorError
        if not isinstance(e, torch.OutOfMemoryError) and 'out of memory' not in str(e):
            raise
        error = str(e).splitlines()[0][:200]
    print('RESULT ' + json.dumps(dict(job=name, batch=batch, steps=done, oom=error, peaks=peaks)),
          flush=True)


def under_oomlens(job, batch, steps, tag, sites=True):
    """(whether its steps fit, its report's oom, the process)."""
    what = [CASES, job['name']] if job.get('corpus') else [HERE, '--job', job['name']]
    trace = None
    if tag == 'oom' and os.environ.get('OOMLENS_FS_TRACE'):  # for replay by other builds
        trace = os.path.join(OUT, f'trace-{job["name"]}-{batch}.trace')
    result, oom, p = oomlens_run.run([*what, '--batch', str(batch), '--steps', str(steps)],
                                     job['cap'], batch, f'fs-{job["name"]}-{tag}-{batch}-',
                                     trace=trace, sites=sites)
    done = result.get('steps', result.get('steps_done')) if result else None
    fitted = bool(result) and result.get('oom') is None and done == steps
    return fitted, oom, p


def bisect(job, high, per_try):
    """The largest batch in [0, high] whose two steps fit (high: a bound),
    and whether the bisection ended (False: the budget stopped it, and
    [low, high + 1) is what it knows)."""
    low = 0
    while low < high:
        if left_s() < per_try:
            return low, high, False
        mid = (low + high + 1) // 2
        fitted, _, _ = under_oomlens(job, mid, 2, 'bisect')
        print(f'  {job["name"]} batch {mid}: {"fits" if fitted else "out of memory"}', flush=True)
        if fitted:
            low = mid
        else:
            high = mid - 1
    return low, high, True


def check(job):
    t0 = time.time()
    _, oom, p = under_oomlens(job, job['batch'], 1, 'oom')
    row = dict(job=job['name'], cap=job['cap'], batch=job['batch'],
               oom_class=oom.get('class') if oom else None,
               first_step=oom.get('first_step') if oom else None,
               about_low=oom.get('batch_fits') if oom else None,
               about_high=oom.get('batch_fits_high') if oom else None,
               headroom=oom.get('batch_fits_headroom') if oom else None,
               at_most=oom.get('batch_fits_at_most') if oom else None,
               estimate=oom.get('batch_figure_is_estimate') if oom else None,
               stderr_tail=p.stderr[-800:] if not oom else '')
    if oom and not os.environ.get('OOMLENS_FS_NO_BISECT'):
        bound = row['at_most'] if row['at_most'] is not None else job['batch'] - 1
        per_try = max(60, 2 * (time.time() - t0))  # a smaller batch may take longer
        low, high, ended = bisect(job, min(bound, job['batch'] - 1), per_try)
        if ended:
            row['truth'] = low
        else:
            row['bracket'] = [low, high + 1]
    row['seconds'] = round(time.time() - t0, 1)
    print('FIRST_STEP ' + json.dumps({k: v for k, v in row.items() if k != 'stderr_tail'}),
          flush=True)
    return row


def table(rows):
    lines = ['| job, cap | batch run out | first_step | figure | truth (bisected) |',
             '| --- | --- | --- | --- | --- |']
    for r in rows:
        fs = r['first_step'] or {}
        stage = fs.get('stage', 'none')
        if stage != 'unknown' and fs:
            stage += f" ({fs.get('layers_done')} of {fs.get('layers')} layers)"
        if r['estimate']:
            figure = (f"about {r['about_low']} to {r['about_high']}, {r['headroom']} with "
                      f"headroom, at most {r['at_most']}")
        else:
            figure = f"at most {r['about_low']}"
        truth = r.get('truth', '')
        if 'bracket' in r:
            truth = f"in [{r['bracket'][0]}, {r['bracket'][1]}) (budget)"
        lines.append(f"| {r['job']}, {r['cap']} | {r['batch']} | {stage} | {figure} | {truth} |")
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--job')
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--steps', type=int, default=1)
    ap.add_argument('--style', help='a language model\'s loop: lm, lm_outputs, lm_plain, '
                    'lm_shift, lm_smooth (default: the job\'s own)')
    a = ap.parse_args()
    if a.job:
        return run_job(a.job, a.batch, a.steps, a.style)
    wanted = os.environ.get('OOMLENS_FS_JOBS')
    rows = []
    for j in JOBS:
        if wanted and not {j['name'], f"{j['name']}:{j['batch']}"} & set(wanted.split(',')):
            continue
        if left_s() < 60:
            print(f"skipped {j['name']} and after: budget spent", flush=True)
            break
        rows.append(check(j))
    with open(os.path.join(OUT, 'first_step_check.json'), 'w') as fh:
        json.dump(rows, fh, indent=1)
    with open(os.path.join(OUT, 'first_step_check.md'), 'w') as fh:
        fh.write(table(rows))
    print(table(rows))


if __name__ == '__main__':
    main()
