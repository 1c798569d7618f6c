/* api/api.c - include/colibri.h made real for models and sessions: the one
 * place where loading, the forward pass and the per-session cache meet. */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/snapshots.h"
#include "base/err.h"
#include "base/util.h"
#include "colibri_dev.h"
#include "cuda/devices.h"
#include "kv/codec.h"
#include "kv/layout.h"
#include "model/convert.h"
#include "model/expert_hotset.h"
#include "model/expert_store_stream.h"
#include "model/forward.h"
#include "model/mixer_glm53_mla.h"
#include "model/mixer_kda.h"
#include "model/model.h"
#include "mpi/ranks.h"
#include "quant/bf16act.h"
#include "quant/format.h"
#include "quant/qtensor.h"


/* Format names of opts -> ids (MODEL_FMT_AS_STORED for NULL). */
static int parse_formats(const struct colibri_model_opts *opts, struct model_load_opts *out, struct colibri_err *err)
{
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED,
                                  opts && opts->kv_b_f32, opts ? opts->lazy_load != 0 : 0 };
    const struct { const char *opt, *name; int *dest; } fmts[] = {
        { "experts", opts ? opts->experts_fmt : NULL, &lo.experts_fmt },
        { "dense", opts ? opts->dense_fmt : NULL, &lo.dense_fmt },
        { "embed", opts ? opts->embed_fmt : NULL, &lo.embed_fmt },
    };
    for (int i = 0; i < 3; i++) {
        if (!fmts[i].name) continue;
        if ((*fmts[i].dest = quant_fmt_from_name(fmts[i].name)) < 0) {
            char names[256];
            quant_fmt_names(names, sizeof names, " ");
            return base_err_set(err, COLIBRI_EINVAL, "--%s: unknown weight format '%s' (%s)", fmts[i].opt,
                           fmts[i].name, names);
        }
    }
    *out = lo;
    return 0;
}

static int hot_n(const colibri_model *cm)
{
    const struct expert_store *e = cm->m.experts;
    return (e->n_layers - e->first_moe_layer) * e->n_experts;
}

/* A streamed store's hot set: the counts of earlier runs from the state file
 * pin the most used experts. Problems are warnings: the model runs (and
 * computes the same) without a hot set. */
static void hotset_open(colibri_model *cm, const char *state_dir)
{
    struct expert_store *e = cm->m.experts;
    if (!expert_store_stream_slots(e) || (state_dir && !strcmp(state_dir, "none"))) return;
    struct colibri_err err = { 0 };
    char dir[4096], path[4200];
    if (model_hotset_dir(state_dir, dir, sizeof dir, &err)) {
        base_log_msg("warning", "no hot set for the streamed experts: %s", err.msg);
        return;
    }
    int n = hot_n(cm);
    cm->fingerprint = colibri_api_model_fingerprint(&cm->m);
    model_hotset_path(dir, cm->fingerprint, path, sizeof path);
    if (!(cm->hot_counts = calloc((size_t)(n ? n : 1), sizeof *cm->hot_counts)) || !(cm->hot_path = strdup(path))) {
        free(cm->hot_counts);
        cm->hot_counts = NULL;
        return;
    }
    int rc = model_hotset_load(cm->m.fmt.io, path, cm->fingerprint, e->n_layers - e->first_moe_layer,
                               e->n_experts, cm->hot_counts, &err);
    if (rc && err.msg[0]) base_log_msg("warning", "%s; the hot set starts empty and the file will be rewritten", err.msg);
    if (!rc) {
        int pinned = model_expert_stream_pin(e, cm->hot_counts);
        base_log_msg("info", "hot set: %d experts pinned from %s", pinned, path);
    }
}

/* Adds this run's counts to the file's (atomically replaced). */
static void hotset_save(colibri_model *cm)
{
    if (!cm->hot_path) return;
    struct expert_store *e = cm->m.experts;
    int n = hot_n(cm);
    uint32_t *now = malloc((size_t)(n ? n : 1) * sizeof *now);
    int used = 0;
    if (now && model_expert_stream_uses(e, now) == n)
        for (int i = 0; i < n && !used; i++) used = now[i] != 0;
    if (used) {   /* a load that ran nothing (colibri info) leaves the file alone */
        for (int i = 0; i < n; i++)
            cm->hot_counts[i] = now[i] > UINT32_MAX - cm->hot_counts[i] ? UINT32_MAX : cm->hot_counts[i] + now[i];
        struct colibri_err err = { 0 };
        if (model_hotset_save(cm->m.fmt.io, cm->hot_path, cm->fingerprint, e->n_layers - e->first_moe_layer,
                              e->n_experts, cm->hot_counts, &err))
            base_log_msg("warning", "hot set not saved: %s", err.msg);
    }
    free(now);
}

/* "12G", "512M", "900K", "123" (bytes): binary units. */
static int parse_size(const char *s, int64_t *out, struct colibri_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') unit = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') unit = 1073741824.0, end++;
    else if (*end == 'T' || *end == 't') unit = 1099511627776.0, end++;
    if (*end == 'i' && unit > 1) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (end == s || *end || errno || !(v > 0) || v * unit > 9.0e18)
        return base_err_set(err, COLIBRI_EINVAL, "--ram: '%s' is not a positive size (e.g. 12G, 512M, 900K)", s);
    *out = (int64_t)(v * unit);
    return 0;
}

/* The opt-in bf16-activation products: refused by name where they cannot
 * apply (the model is freed then). */
static int mark_bf16_act(colibri_model *cm, struct colibri_err *err)
{
    int rc = 0, n = 0;
    if (!quant_bf16act_available())
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--bf16-act: needs AVX-512 BF16 (VDPBF16PS), which this CPU lacks");
    else if ((n = model_mark_bf16_act(&cm->m)) < 0)
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--bf16-act: not with routed experts streamed from disk (--ram)");
    else if (n == 0)
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--bf16-act: the model has no bf16 weights (it applies to bf16 "
                                                     "weights only; see --experts/--dense/--embed)");
    if (rc) model_free(&cm->m);
    return rc;
}

int colibri_model_probe(const char *dir, struct colibri_err *err)
{
    if (!dir) return base_err_set(err, COLIBRI_EINVAL, "colibri_model_probe: dir is required");
    struct model_config *cfg = malloc(sizeof *cfg);   /* large: layer tables */
    if (!cfg) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    int rc = model_config_load(dir, cfg, err);
    free(cfg);
    return rc;
}

int colibri_model_load(const char *dir, const struct colibri_model_opts *opts, colibri_model **out,
                       struct colibri_err *err)
{
    if (!dir || !out) return base_err_set(err, COLIBRI_EINVAL, "colibri_model_load: dir and out are required");
    if (opts && opts->n_threads > 0) omp_set_num_threads(opts->n_threads);
    struct model_load_opts lo;
    int rc = parse_formats(opts, &lo, err);
    if (!rc && opts && opts->ram) rc = parse_size(opts->ram, &lo.ram_bytes, err);
    if (!rc && opts && opts->mtp_fmt)
        rc = base_err_set(err, COLIBRI_EINVAL, "mtp_fmt '%s': the MTP layers' format is chosen when converting "
                          "(colibri convert --mtp FMT); the model loads them as stored", opts->mtp_fmt);
    colibri_mpi *mpi = opts ? opts->mpi : NULL;
    /* refused on every rank alike, before any rank waits for another */
    if (!rc && mpi && opts->device)
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s: routed experts over MPI (--mpi) are not wired to "
                          "the device", opts->device);
    /* the device's products keep f32 activations: its decode would not compute what a bf16-act prefill does */
    if (!rc && opts && opts->device && opts->bf16_act)
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "--device %s with --bf16-act: the device's products keep f32 "
                          "activations; use one or the other", opts->device);
    /* a rank that only serves experts touches nothing else of the mapping
     * and never runs the absorbed decode that the f32 kv_b copy is for */
    if (!rc && mpi && colibri_mpi_rank(mpi) > 0) lo.lazy_load = 1, lo.kv_b_f32 = 0;
    colibri_model *cm = NULL;
    if (!rc && !(cm = calloc(1, sizeof *cm))) rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    if (!rc) rc = model_load(dir, &lo, &cm->m, err);
    if (!rc && opts && opts->bf16_act) rc = mark_bf16_act(cm, err);
    /* the V4 parts run on the host only, experts in this process */
    if (!rc && (cm->m.cfg.attn_kind == MODEL_ATTN_V4 || cm->m.cfg.attn_kind == MODEL_ATTN_GLM53) &&
        (mpi || (opts && opts->device))) {
        rc = base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s's layers are not wired to %s yet", dir,
                          cm->m.cfg.attn_kind == MODEL_ATTN_V4 ? "DeepSeek-V4" : "GLM-5.3",
                          mpi ? "routed experts over MPI (--mpi)" : "the device (--device)");
        model_free(&cm->m);
    }
    if (mpi) {
        /* every rank reports its load, failed or not, so that none waits for another */
        struct colibri_err le = rc && err ? *err : (struct colibri_err){ 0 };
        int rm = colibri_api_mpi_attach(cm, mpi, rc, &le, err);
        if (!rc && rm) model_free(&cm->m);
        if (!rc) rc = rm;
    }
    if (!rc && opts && opts->device) {
        const struct backend_ops *ops;
        rc = cuda_device_ops(opts->device, &ops, err);
        if (!rc) rc = model_dev_new(&cm->m, ops, &cm->dev, err);
        if (rc) model_free(&cm->m);
    }
    if (rc) { free(cm); return rc; }
    cm->n_threads = opts ? opts->n_threads : 0;
    /* the learned hot set pins experts by global counts; under MPI a rank's
     * store holds only its share, so it would pin experts other ranks own */
    hotset_open(cm, mpi ? "none" : opts ? opts->state_dir : NULL);
    *out = cm;
    return 0;
}

int colibri_convert(const char *src_dir, const char *dst_dir, const struct colibri_model_opts *opts,
                    uint64_t shard_bytes, int show_progress, struct colibri_convert_report *rep, struct colibri_err *err)
{
    struct convert_opts co = { .shard_bytes = shard_bytes, .show_progress = show_progress,
                               .mtp_set = opts && opts->mtp_fmt };
    int rc = parse_formats(opts, &co.fmt, err);
    if (rc) return rc;
    if (opts && opts->mtp_fmt && (co.mtp_fmt = quant_fmt_from_name(opts->mtp_fmt)) < 0) {
        char names[256];
        quant_fmt_names(names, sizeof names, " ");
        return base_err_set(err, COLIBRI_EINVAL, "--mtp: unknown weight format '%s' (%s)", opts->mtp_fmt, names);
    }
    struct convert_report r;
    rc = model_convert(src_dir, dst_dir, &co, &r, err);
    if (!rc && rep) *rep = (struct colibri_convert_report){ r.shards, r.shards_reused, r.tensors, r.bytes };
    return rc;
}

/* Architecture presets for colibri_synth: config.json texts with a %d for
 * the layer count. */
static const struct { const char *name; int layers; const char *json; } SYNTH_PRESETS[] = {
    { "v2-lite", 27,
      "{\"model_type\":\"deepseek_v3\",\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":102400,"
      "\"hidden_size\":2048,\"intermediate_size\":10944,\"moe_intermediate_size\":1408,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":16,\"num_key_value_heads\":16,\"q_lora_rank\":null,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"n_routed_experts\":64,"
      "\"n_shared_experts\":2,\"num_experts_per_tok\":6,\"n_group\":1,\"topk_group\":1,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":1.0,\"norm_topk_prob\":false,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":4096,\"rope_theta\":10000,"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    { "v3", 61,
      "{\"model_type\":\"deepseek_v3\",\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":129280,"
      "\"hidden_size\":7168,\"intermediate_size\":18432,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":128,\"num_key_value_heads\":128,\"q_lora_rank\":1536,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"n_routed_experts\":256,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":8,\"n_group\":8,\"topk_group\":4,"
      "\"first_k_dense_replace\":3,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":163840,\"rope_theta\":10000,"
      "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,"
      "\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,\"mscale_all_dim\":1.0},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* DeepSeek-V3's layer shapes with 64 routed experts and one dense layer:
     * the smallest model whose experts are V3-sized and spread over 2+ MoE
     * layers, for measuring the streamed store. */
    { "v3-moe64", 3,
      "{\"model_type\":\"deepseek_v3\",\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":129280,"
      "\"hidden_size\":7168,\"intermediate_size\":18432,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":128,\"num_key_value_heads\":128,\"q_lora_rank\":1536,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"n_routed_experts\":64,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":8,\"n_group\":8,\"topk_group\":4,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":163840,\"rope_theta\":10000,"
      "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,"
      "\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,\"mscale_all_dim\":1.0},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    { "tiny", 4,
      "{\"model_type\":\"deepseek_v3\",\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":1000,"
      "\"hidden_size\":256,\"intermediate_size\":512,\"moe_intermediate_size\":128,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"q_lora_rank\":96,\"kv_lora_rank\":128,"
      "\"qk_nope_head_dim\":32,\"qk_rope_head_dim\":32,\"v_head_dim\":32,\"n_routed_experts\":8,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":1024,\"rope_theta\":10000,"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* DeepSeek-V2-Lite as DeepseekV2ForCausalLM: softmax greedy router, no correction bias */
    { "v2", 4,
      "{\"model_type\":\"deepseek_v2\",\"architectures\":[\"DeepseekV2ForCausalLM\"],\"vocab_size\":102400,"
      "\"hidden_size\":2048,\"intermediate_size\":10944,\"moe_intermediate_size\":1408,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":16,\"num_key_value_heads\":16,\"q_lora_rank\":null,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"n_routed_experts\":64,"
      "\"n_shared_experts\":2,\"num_experts_per_tok\":6,\"n_group\":1,\"topk_group\":1,"
      "\"topk_method\":\"greedy\",\"scoring_func\":\"softmax\",\"moe_layer_freq\":1,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":1.0,\"norm_topk_prob\":false,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":163840,\"rope_theta\":10000,"
      "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,"
      "\"beta_fast\":32,\"beta_slow\":1,\"mscale\":0.707,\"mscale_all_dim\":0.707},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* DeepSeek-V3.2: V3's shapes plus the lightning indexer on every layer */
    { "v32", 4,
      "{\"model_type\":\"deepseek_v32\",\"architectures\":[\"DeepseekV32ForCausalLM\"],\"vocab_size\":129280,"
      "\"hidden_size\":7168,\"intermediate_size\":18432,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":128,\"num_key_value_heads\":128,\"q_lora_rank\":1536,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,\"n_routed_experts\":256,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":8,\"n_group\":8,\"topk_group\":4,"
      "\"first_k_dense_replace\":3,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":2048,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":163840,\"rope_theta\":10000,"
      "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"original_max_position_embeddings\":4096,"
      "\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,\"mscale_all_dim\":1.0},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* GLM-5 (GlmMoeDsaConfig's defaults): dn 192 / dv 256, one expert group, RoPE theta 1e6 without
     * yarn, rms eps 1e-5, every layer's indexer full */
    { "glm5", 4,
      "{\"model_type\":\"glm_moe_dsa\",\"architectures\":[\"GlmMoeDsaForCausalLM\"],\"vocab_size\":154880,"
      "\"hidden_size\":6144,\"intermediate_size\":12288,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":64,\"num_key_value_heads\":64,\"q_lora_rank\":2048,\"kv_lora_rank\":512,"
      "\"qk_nope_head_dim\":192,\"qk_rope_head_dim\":64,\"v_head_dim\":256,\"n_routed_experts\":256,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":8,\"n_group\":1,\"topk_group\":1,"
      "\"first_k_dense_replace\":3,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"index_n_heads\":32,\"index_head_dim\":128,\"index_topk\":2048,"
      "\"rms_norm_eps\":1e-5,\"max_position_embeddings\":202752,\"rope_theta\":1000000,"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* tiny DSA models: tiny's sizes, index_topk 16 (below a short prompt) */
    { "v32-tiny", 4,
      "{\"model_type\":\"deepseek_v32\",\"architectures\":[\"DeepseekV32ForCausalLM\"],\"vocab_size\":1000,"
      "\"hidden_size\":256,\"intermediate_size\":512,\"moe_intermediate_size\":128,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"q_lora_rank\":96,\"kv_lora_rank\":128,"
      "\"qk_nope_head_dim\":32,\"qk_rope_head_dim\":32,\"v_head_dim\":32,\"n_routed_experts\":8,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"index_n_heads\":4,\"index_head_dim\":64,\"index_topk\":16,"
      "\"rms_norm_eps\":1e-6,\"max_position_embeddings\":1024,\"rope_theta\":10000,"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* and GLM-5's differences: dn != dv, one group, theta 1e6, full/shared indexers (index_topk_freq 2) */
    { "glm5-tiny", 4,
      "{\"model_type\":\"glm_moe_dsa\",\"architectures\":[\"GlmMoeDsaForCausalLM\"],\"vocab_size\":1000,"
      "\"hidden_size\":256,\"intermediate_size\":512,\"moe_intermediate_size\":128,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"q_lora_rank\":96,\"kv_lora_rank\":128,"
      "\"qk_nope_head_dim\":48,\"qk_rope_head_dim\":32,\"v_head_dim\":64,\"n_routed_experts\":8,"
      "\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":1,\"topk_group\":1,"
      "\"first_k_dense_replace\":1,\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
      "\"index_n_heads\":4,\"index_head_dim\":64,\"index_topk\":16,\"index_topk_freq\":2,"
      "\"rms_norm_eps\":1e-5,\"max_position_embeddings\":1024,\"rope_theta\":1000000,"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* DeepSeek-V4-Flash in the official config spelling (as tests/oracle_v4/deepseek_v4_official).
     * Dims: hidden 4096, 43 layers, 256 routed experts top-6 + 1 shared from issue 32; every other
     * value is DeepseekV4Config's default in transformers 5.18.0 (configuration_deepseek_v4.py, whose
     * defaults are V4-Flash): 64 heads of 512 with rope 64 (partial 64/512), q_lora 1024, o_groups 8 x
     * o_lora 1024, moe_intermediate 2048, hc_mult 4, 3 hash layers, indexer 64 x 128 top-512, window
     * 128, swiglu_limit 10, sqrtsoftplus x 1.5, compress theta 160000 with yarn factor 16 (its
     * comment); original_max_position_embeddings is 1048576 / 16 and beta 32/1 are yarn's defaults.
     * compress_ratios (appended by colibri_synth) follow the class's default layer pattern. */
    { "v4-flash", 1,
      "{\"model_type\":\"deepseek_v4\",\"architectures\":[\"DeepseekV4ForCausalLM\"],\"vocab_size\":129280,"
      "\"hidden_size\":4096,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,\"num_attention_heads\":64,"
      "\"head_dim\":512,\"qk_rope_head_dim\":64,\"q_lora_rank\":1024,\"o_groups\":8,\"o_lora_rank\":1024,"
      "\"n_routed_experts\":256,\"n_shared_experts\":1,\"num_experts_per_tok\":6,\"num_hash_layers\":3,"
      "\"scoring_func\":\"sqrtsoftplus\",\"norm_topk_prob\":true,\"routed_scaling_factor\":1.5,"
      "\"swiglu_limit\":10.0,\"hc_mult\":4,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-6,\"sliding_window\":128,"
      "\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":512,\"num_nextn_predict_layers\":0,"
      "\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-6,\"max_position_embeddings\":1048576,\"rope_theta\":10000,"
      "\"compress_rope_theta\":160000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":16,"
      "\"original_max_position_embeddings\":65536,\"beta_fast\":32,\"beta_slow\":1},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* DeepSeek-V4-Pro: hidden 7168, 61 layers, 384 routed experts from issue 32; nothing else about
     * Pro is in the issue or transformers, so every other value is V4-Flash's above (an assumption:
     * Pro's real heads, ranks and expert width may differ). */
    { "v4-pro", 1,
      "{\"model_type\":\"deepseek_v4\",\"architectures\":[\"DeepseekV4ForCausalLM\"],\"vocab_size\":129280,"
      "\"hidden_size\":7168,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,\"num_attention_heads\":64,"
      "\"head_dim\":512,\"qk_rope_head_dim\":64,\"q_lora_rank\":1024,\"o_groups\":8,\"o_lora_rank\":1024,"
      "\"n_routed_experts\":384,\"n_shared_experts\":1,\"num_experts_per_tok\":6,\"num_hash_layers\":3,"
      "\"scoring_func\":\"sqrtsoftplus\",\"norm_topk_prob\":true,\"routed_scaling_factor\":1.5,"
      "\"swiglu_limit\":10.0,\"hc_mult\":4,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-6,\"sliding_window\":128,"
      "\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":512,\"num_nextn_predict_layers\":0,"
      "\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-6,\"max_position_embeddings\":1048576,\"rope_theta\":10000,"
      "\"compress_rope_theta\":160000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":16,"
      "\"original_max_position_embeddings\":65536,\"beta_fast\":32,\"beta_slow\":1},"
      "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}" },
    /* GLM-5.3-Flash: Glm5NextTextConfig's defaults in transformers 5.18.0 (its checkpoint is
     * zai-org/GLM-5.3-Flash): hidden 4096, 64 heads, MLA rank 512 / q 1536 / 256 + 256 without RoPE,
     * 288 experts of 2048 top-8 + 1 shared, dense intermediate 12288, KDA 64 x 128 with conv 4
     * and gate bound -5, indexer 32 x 128 top-2048 over pools of 16, 4 streams, swiglu_limit 10;
     * its layer pattern (KDA except every 4th), first 3 layers dense, cut to L. */
    { "glm53-flash", 4,
      "{\"model_type\":\"glm5_next\",\"architectures\":[\"Glm5NextForConditionalGeneration\"],"
      "\"num_hidden_layers\":%d,\"torch_dtype\":\"bfloat16\"}" },
    /* GLM-5.3 (744B): no config of it is available offline, so GLM-5's 744B dimensions (the glm5
     * preset: hidden 6144, 64 heads, q_lora 2048, MLA rank 512, 256 experts of 2048 top-8 + 1
     * shared, dense intermediate 12288, indexer 32 x 128 top-2048, 78 layers) on GLM-5.3's layer
     * kinds, with Glm5NextTextConfig's defaults for what GLM-5 has not (heads of 256 + 256 without
     * RoPE, KDA 64 x 128 conv 4 bound -5, pools of 16, 4 streams, swiglu_limit 10, the layer
     * pattern); cut to L */
    { "glm53", 4,
      "{\"model_type\":\"glm5_next\",\"architectures\":[\"Glm5NextForConditionalGeneration\"],"
      "\"text_config\":{\"model_type\":\"glm5_next_text\",\"vocab_size\":154880,\"hidden_size\":6144,"
      "\"intermediate_size\":12288,\"moe_intermediate_size\":2048,\"num_hidden_layers\":%d,"
      "\"num_attention_heads\":64,\"num_key_value_heads\":64,\"q_lora_rank\":2048,\"kv_lora_rank\":512,"
      "\"n_routed_experts\":256,\"n_shared_experts\":1,\"num_experts_per_tok\":8,"
      "\"index_n_heads\":32,\"index_head_dim\":128,\"index_topk\":2048,\"max_position_embeddings\":202752},"
      "\"torch_dtype\":\"bfloat16\"}" },
    /* the same architecture in small shapes (KDA and indexed layers, dense and MoE layers; the
     * default layer pattern has no indexed layer after another, so no shared one), for tests */
    { "glm53-tiny", 4,
      "{\"model_type\":\"glm5_next\",\"architectures\":[\"Glm5NextForConditionalGeneration\"],"
      "\"vocab_size\":512,\"hidden_size\":128,\"intermediate_size\":256,\"moe_intermediate_size\":64,"
      "\"num_hidden_layers\":%d,\"num_attention_heads\":4,\"num_key_value_heads\":4,\"n_routed_experts\":16,"
      "\"num_experts_per_tok\":4,\"kv_lora_rank\":64,\"q_lora_rank\":96,\"qk_nope_head_dim\":32,"
      "\"v_head_dim\":32,\"index_n_heads\":4,\"index_head_dim\":32,\"index_topk\":32,\"index_kpool\":8,"
      "\"linear_num_heads\":4,\"linear_head_dim\":32,"
      "\"max_position_embeddings\":4096,\"torch_dtype\":\"bfloat16\"}" },
};

int colibri_synth(const char *dst_dir, const char *preset, int n_layers, int n_mtp, const struct colibri_model_opts *opts,
                  uint64_t seed, int show_progress, struct colibri_convert_report *rep, struct colibri_err *err)
{
    int p = -1;
    for (size_t i = 0; i < sizeof SYNTH_PRESETS / sizeof SYNTH_PRESETS[0]; i++)
        if (!strcmp(preset, SYNTH_PRESETS[i].name)) p = (int)i;
    if (p < 0) {
        char list[256] = "";
        for (size_t i = 0; i < sizeof SYNTH_PRESETS / sizeof SYNTH_PRESETS[0]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", SYNTH_PRESETS[i].name);
        return base_err_set(err, COLIBRI_EINVAL, "--preset: unknown preset '%s' (%s)", preset, list);
    }
    struct convert_opts co = { .show_progress = show_progress };
    int rc = parse_formats(opts, &co.fmt, err);
    if (rc) return rc;
    char json[4096];
    int L = n_layers > 0 ? n_layers : SYNTH_PRESETS[p].layers;
    int len = snprintf(json, sizeof json, SYNTH_PRESETS[p].json, L);
    if (n_mtp < 0 || n_mtp > 1) return base_err_set(err, COLIBRI_EINVAL, "--mtp-layers %d: 0 or 1", n_mtp);
    if (strstr(json, "\"deepseek_v4\"")) {
        if (n_mtp) return base_err_set(err, COLIBRI_EUNSUPPORTED, "--mtp-layers: not written for %s", preset);
        /* no format asked for: the official release's storage (FP8 dense, FP4 experts, model/shipped.h),
         * declared as its config.json does; else colibri's formats, the experts mxfp4 unless asked
         * otherwise (a bf16 V4-Flash layer's 256 experts are 12.9 GB) */
        int release = !opts || (!opts->experts_fmt && !opts->dense_fmt && !opts->embed_fmt);
        if (!opts || !opts->experts_fmt) co.fmt.experts_fmt = QUANT_MXFP4;
        len--;
        if (release)
            len += snprintf(json + len, sizeof json - (size_t)len, ",\"expert_dtype\":\"fp4\",\"quantization_config\":"
                            "{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"scale_fmt\":\"ue8m0\","
                            "\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128]}");
        /* transformers' default layer pattern, cut to L: two HCA (128), then HCA / CSA (4) alternating */
        len += snprintf(json + len, sizeof json - (size_t)len, ",\"compress_ratios\":[");
        for (int l = 0; l < L && len < (int)sizeof json - 16; l++)
            len += snprintf(json + len, sizeof json - (size_t)len, "%s%d", l ? "," : "",
                            l >= 2 && (l - 2) % 2 ? 4 : 128);
        len += snprintf(json + len, sizeof json - (size_t)len, "]}");
    }
    if (strstr(json, "\"glm5_next\"")) {
        if (n_mtp) return base_err_set(err, COLIBRI_EUNSUPPORTED, "--mtp-layers: not written for %s", preset);
        /* a bf16 MoE layer's experts are 14.5 GB (GLM-5.3-Flash's 288) or 19.3 GB (GLM-5.3's 256) */
        if ((!opts || !opts->experts_fmt) && strcmp(preset, "glm53-tiny")) co.fmt.experts_fmt = QUANT_MXFP4;
        /* every Linear the FP8 release quantizes in its encoding (F8_E4M3 + weight_scale_inv, 128x128
         * blocks), the embedding and lm_head not: declared as its config.json does */
        if (co.fmt.experts_fmt == QUANT_FP8B && co.fmt.dense_fmt == QUANT_FP8B && co.fmt.embed_fmt != QUANT_FP8B) {
            len--;
            len += snprintf(json + len, sizeof json - (size_t)len, ",\"quantization_config\":{\"quant_method\":"
                            "\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\",\"weight_block_size\":"
                            "[128,128],\"modules_to_not_convert\":[\"model.visual\",\"lm_head\"]}}");
        }
    }
    if (n_mtp)   /* the config's last '}' becomes the declaration of the MTP layer */
        snprintf(json + len - 1, sizeof json - (size_t)len + 1, ",\"num_nextn_predict_layers\":%d}", n_mtp);
    struct convert_report r;
    rc = model_synth(dst_dir, json, &co, seed, &r, err);
    if (!rc && rep) *rep = (struct colibri_convert_report){ r.shards, r.shards_reused, r.tensors, r.bytes };
    return rc;
}

void colibri_model_free(colibri_model *cm)
{
    if (!cm) return;
    hotset_save(cm);
    free(cm->hot_path);
    free(cm->hot_counts);
    model_dev_free(cm->dev);
    model_free(&cm->m);
    free(cm);
}

const char *colibri_kernel_level(void) { return quant_isa_name(quant_isa_best()); }

int colibri_model_vocab(const colibri_model *cm) { return cm->m.cfg.vocab_size; }

/* Here, not in tokenizer_api.c, so that the tokenizer's object needs nothing
 * of the model's (the fuzz harnesses link the tokenizer alone). */
int colibri_tokenizer_check_model(const colibri_tokenizer *t, const colibri_model *m, struct colibri_err *err)
{
    if (!t || !m) return base_err_set(err, COLIBRI_EINVAL, "colibri_tokenizer_check_model: tokenizer and model are "
                                      "required");
    int32_t nt = colibri_tokenizer_n_vocab(t), nm = colibri_model_vocab(m);
    if (nt <= nm) return 0;
    return base_err_set(err, COLIBRI_EINVAL, "the tokenizer has %d token ids (0..%d) but the model's vocabulary "
                        "(vocab_size) is %d: ids %d..%d have no embedding; this tokenizer is not the model's", nt,
                        nt - 1, nm, nm, nt - 1);
}

void colibri_model_expert_stats(const colibri_model *cm, struct colibri_expert_stats *out)
{
    struct expert_store_stats s;
    expert_store_get_stats(cm->m.experts, &s);
    *out = (struct colibri_expert_stats){ s.acquires, s.misses, s.prefetch_hints, s.bytes_read, s.reads,
                                          s.prefetch_reads, s.prefetch_used, s.waits, s.io_wait_ns, s.predicted,
                                          s.predicted_hits, s.predict_steps, s.predict_withheld };
}

void colibri_model_expert_layer_stats(const colibri_model *cm, int layer, struct colibri_expert_layer_stats *out)
{
    struct expert_layer_reads s;
    model_expert_layer_stats(cm->m.experts, layer, &s);
    *out = (struct colibri_expert_layer_stats){ .predicted = s.predicted, .predicted_hits = s.predicted_hits,
                                                .predict_steps = s.predict_steps,
                                                .predict_withheld = s.predict_withheld };
    for (int w = 0; w < 3; w++) {
        out->reads[w] = s.reads[w];
        out->bytes[w] = s.bytes[w];
        out->used[w] = s.used[w];
    }
}

int colibri_model_check(const colibri_model *cm, struct colibri_err *err)
{
    return st_files_sound(&cm->m.st, err);
}

void colibri_model_get_info(const colibri_model *cm, struct colibri_model_info *info)
{
    const struct model_config *c = &cm->m.cfg;
    memset(info, 0, sizeof *info);
    info->family = c->model_type;
    info->n_layers = c->num_hidden_layers;
    info->n_dense_layers = c->first_k_dense_replace;
    for (int l = c->first_k_dense_replace; l < c->num_hidden_layers; l++) info->n_dense_layers += c->mlp_dense[l];
    info->n_moe_layers = c->num_hidden_layers - info->n_dense_layers;
    info->hidden = c->hidden_size;
    info->vocab = c->vocab_size;
    info->n_heads = c->num_attention_heads;
    info->n_routed_experts = c->n_routed_experts;
    info->n_shared_experts = c->n_shared_experts;
    info->n_experts_per_tok = c->num_experts_per_tok;
    info->kv_lora_rank = c->kv_lora_rank;
    info->qk_rope_head_dim = c->qk_rope_head_dim;
    info->q_lora_rank = c->q_lora_rank;
    info->max_position_embeddings = c->max_position_embeddings;
    info->n_params = cm->m.n_params;
    for (int i = 0; i < ST_DTYPE_COUNT && i < 16; i++) {
        info->bytes_by_dtype[i] = cm->m.bytes_by_dtype[i];
        info->dtype_names[i] = st_dtype_name((enum st_dtype)i);
    }
    info->kv_bytes_per_token = (int64_t)c->num_hidden_layers *
                               (c->kv_lora_rank + c->qk_rope_head_dim + (c->dsa_kind ? c->index_head_dim : 0)) * 4;
    snprintf(info->attention, sizeof info->attention, "MLA, kv_lora_rank %d + rope %d, q_lora_rank %s",
             c->kv_lora_rank, c->qk_rope_head_dim, c->q_lora_rank ? "set" : "none (q_proj)");
    if (c->attn_kind == MODEL_ATTN_GLM53) {
        int n_kda = 0;
        info->kv_bytes_per_token = 0;
        for (int l = 0; l < c->num_hidden_layers; l++) {
            n_kda += c->kda_layer[l];
            info->snapshot_bytes += (int64_t)(c->kda_layer[l] ? model_kda_snap_bytes(c) : model_glm53_mla_snap_bytes(c, l));
            /* a shared indexed layer keeps its latents only */
            if (!c->kda_layer[l])
                info->kv_bytes_per_token += c->indexer_full[l] ? (int64_t)model_glm53_mla_bytes_per_pos(c)
                                                                : 4 * (int64_t)c->glm53_kv_lora_rank;
        }
        int n_mla = c->num_hidden_layers - n_kda;
        info->kv_session_bytes = (int64_t)n_kda * (int64_t)model_kda_state_bytes(c);
        snprintf(info->attention, sizeof info->attention, "GLM-5.3, %d KDA layers (%d heads x %d, conv %d, %s gate, "
                 "%zu state bytes per layer), %d MLA layers (rank %d, no RoPE, pooled DSA: kpool %d, top-%d; %zu "
                 "bytes per position); %d residual streams", n_kda, c->linear_num_heads, c->linear_head_dim,
                 c->linear_conv_k, c->linear_bounded ? "bounded" : "softplus", model_kda_state_bytes(c), n_mla,
                 c->glm53_kv_lora_rank, c->index_kpool, c->index_topk, model_glm53_mla_bytes_per_pos(c), c->hc_mult);
    }
    if (c->attn_kind == MODEL_ATTN_V4) {
        int n[3] = { 0 }, rate[3] = { 0 };
        double per = 0;
        for (int l = 0; l < c->num_hidden_layers; l++) {
            int t = c->v4_layer_type[l], r = c->compress_ratio[l];
            n[t]++;
            rate[t] = r;
            if (t != MODEL_V4_SLIDING) per += 4.0 * (c->head_dim + (t == MODEL_V4_CSA ? c->index_head_dim : 0)) / r;
        }
        info->kv_bytes_per_token = (int64_t)(per + 0.5);
        info->kv_session_bytes = (int64_t)c->num_hidden_layers * 2 * c->sliding_window * c->head_dim * 4;
        snprintf(info->attention, sizeof info->attention, "DeepSeek-V4, one %d-dim KV head, window %d; %d sliding, "
                 "%d CSA (ratio %d, top-%d), %d HCA (ratio %d) layers; %d residual streams", c->head_dim,
                 c->sliding_window, n[0], n[1], rate[1], c->index_topk, n[2], rate[2], c->hc_mult);
    }
    struct model_bytes b;
    model_bytes(&cm->m, &b);
    info->weight_bytes = b.dense + b.experts_total;
    info->active_bytes = b.token_read;
    info->expert_bytes = b.experts_total;
    info->expert_cache_bytes = b.experts;
    info->copy_bytes = b.copies;
    info->resident_bytes = b.resident;
    /* how this process holds its experts (under --mpi: rank 0's own share) */
    info->expert_store = expert_store_local(cm->m.experts)->ops->name;
    info->n_mtp_layers = cm->m.n_mtp;
    info->n_mtp_declared = c->num_nextn_predict_layers;
    info->mtp_bytes = b.mtp;
    info->mtp_active_bytes = b.mtp_token_read;
}

int colibri_session_new(colibri_model *cm, const struct colibri_session_opts *opts, colibri_session **out,
                        struct colibri_err *err)
{
    if (!cm || !out) return base_err_set(err, COLIBRI_EINVAL, "colibri_session_new: model and out are required");
    int n_ctx = opts && opts->n_ctx > 0 ? opts->n_ctx : cm->m.cfg.max_position_embeddings;
    int rope = KV_ROPE_DEFAULT;
    char names[256];
    if (opts && opts->kv_rope && (rope = kv_rope_from_name(opts->kv_rope)) < 0) {
        kv_rope_names(names, sizeof names, " ");
        return base_err_set(err, COLIBRI_EINVAL, "--kv-rope: unknown RoPE precision '%s' (%s)", opts->kv_rope, names);
    }
    int index_tier = KV_TIER_F32;
    if (opts && opts->kv_index && (index_tier = kv_tier_from_name(opts->kv_index)) != KV_TIER_F32 &&
        index_tier != KV_TIER_FP8)
        return base_err_set(err, COLIBRI_EINVAL, "--kv-index: '%s' is not f32 or fp8", opts->kv_index);
    int int8 = opts ? opts->kv_int8 : 0;
    if (int8 < 0 || int8 > 2)
        return base_err_set(err, COLIBRI_EINVAL, "--kv-int8: %d is not 0 (exact), 1 (int8 query) or 2 (16-bit query)", int8);
    int n_layers = cm->m.cfg.num_hidden_layers;
    struct kv_layer_spec *layers = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *layers);
    if (!layers) return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    int rc = kv_layout_parse(opts && opts->kv_tier ? opts->kv_tier : "f32", (enum kv_rope_prec)rope, n_layers, layers,
                             err);
    colibri_session *s = rc ? NULL : calloc(1, sizeof *s);
    if (!rc && !s) rc = base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    struct compute_ctx cc = base_compute_ctx_make(cm->n_threads);
    if (!rc) rc = model_cache_layout(&cm->m, (enum kv_tier)index_tier, layers, err);
    if (!rc) rc = model_fwd_state_init_layers(&s->st, &cm->m, n_ctx, 0, layers, int8, &cc, err);
    free(layers);
    if (rc) { free(s); return rc; }
    if (!(s->tokens = malloc((size_t)n_ctx * sizeof *s->tokens))) {
        fwd_state_free(&s->st);
        free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "out of memory");
    }
    if (cm->dev && (rc = model_dev_kv_new(cm->dev, &s->st, &s->dev_kv, err))) {
        fwd_state_free(&s->st);
        free(s->tokens);
        free(s);
        return rc;
    }
    int every = opts && opts->kv_snapshot_every ? opts->kv_snapshot_every : SESSION_SNAP_EVERY;
    int cap = opts && opts->kv_snapshots ? opts->kv_snapshots : SESSION_SNAP_CAP;
    if (every < 0 || cap < 0)
        rc = base_err_set(err, COLIBRI_EINVAL, "kv_snapshot_every %d / kv_snapshots %d: must not be negative", every, cap);
    if (!rc) rc = colibri_api_snaps_new(&s->st, every, cap, &s->snaps, &s->snaps_bytes, err);
    if (rc) {
        if (s->dev_kv) model_dev_kv_free(cm->dev, s->dev_kv, &s->st);
        fwd_state_free(&s->st);
        free(s->tokens);
        free(s);
        return rc;
    }
    s->model = cm;
    snprintf(s->kv_tier, sizeof s->kv_tier, "%s", opts && opts->kv_tier ? opts->kv_tier : "f32");
    snprintf(s->kv_index, sizeof s->kv_index, "%s", kv_tier_name((enum kv_tier)index_tier));
    *out = s;
    return 0;
}

void colibri_session_free(colibri_session *s)
{
    if (!s) return;
    colibri_spec_free(s->spec);
    colibri_api_snaps_free(s->snaps);
    if (s->dev_kv) model_dev_kv_free(s->model->dev, s->dev_kv, &s->st);
    fwd_state_free(&s->st);
    free(s->tokens);
    free(s);
}

void colibri_api_session_advanced(colibri_session *s)
{
    if (s->snaps && s->snaps->cap && s->pos % s->snaps->every == 0) colibri_api_snaps_take(s->snaps, &s->st, s->pos);
}

/* With snapshots the forward stops at each multiple of the interval to take
 * one (a prefill cut into pieces gives the same bits), and takes one before
 * the last token and at the end: the same prompt again (a retry, the other
 * choices of a request) keeps all but its last token, which runs again for
 * its logits. */
int colibri_session_prefill(colibri_session *s, const int32_t *tokens, int n, float *logits, int all_logits,
                            struct colibri_err *err)
{
    int done = 0, V = s->model->m.cfg.vocab_size, rc = 0;
    int ev = s->snaps && s->snaps->cap ? s->snaps->every : 0;
    /* cut into pieces, the prefill still takes all of its tokens or none */
    if (ev && (n < 0 || n > s->st.n_ctx - s->pos))
        return base_err_set(err, COLIBRI_ERANGE, "%d tokens after position %d exceed the context of %d tokens", n,
                            s->pos, s->st.n_ctx);
    for (int i = 0; ev && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return base_err_set(err, COLIBRI_ERANGE, "token id %d at index %d is out of range [0, %d)", tokens[i], i, V);
    do {
        int k = n - done;
        if (ev && k > ev - s->pos % ev) k = ev - s->pos % ev;
        if (ev && done < n - 1 && done + k > n - 1) k = n - 1 - done;
        int last = done + k == n;
        struct fwd_out out = { .logits = logits && (all_logits || last) ? logits + (all_logits ? (size_t)done * V : 0)
                                                                        : NULL,
                               .all_logits = all_logits };
        rc = model_forward(&s->model->m, &s->st, tokens + done, k, s->pos, FWD_EXPANDED, &out, err);
        if (rc) break;
        memcpy(s->tokens + s->pos, tokens + done, (size_t)k * sizeof *tokens);
        s->pos += k;
        done += k;
        if (ev && k && (done >= n - 1 || s->pos % ev == 0)) colibri_api_snaps_take(s->snaps, &s->st, s->pos);
    } while (done < n);
    return rc;
}

int colibri_session_decode(colibri_session *s, int32_t token, float *logits, struct colibri_err *err)
{
    /* on the session's device when its model has one (model/fwd_device.h) */
    struct fwd_out out = { .logits = logits, .on_device = 1 };
    int rc = model_forward(&s->model->m, &s->st, &token, 1, s->pos, FWD_ABSORBED, &out, err);
    if (!rc) {
        s->tokens[s->pos++] = token;
        colibri_api_session_advanced(s);
    }
    return rc;
}

int colibri_session_pos(const colibri_session *s) { return s->pos; }

int colibri_session_n_ctx(const colibri_session *s) { return s->st.n_ctx; }

const int32_t *colibri_session_tokens(const colibri_session *s) { return s->tokens; }

int colibri_session_common_prefix(const colibri_session *s, const int32_t *tokens, int n)
{
    int i = 0;
    while (i < n && i < s->pos && s->tokens[i] == tokens[i]) i++;
    return i;
}

int64_t colibri_session_kv_token_bytes(const colibri_session *s)
{
    return s->st.kv ? (int64_t)kv_cache_token_bytes(s->st.kv) : 0;
}

int64_t colibri_session_bytes(const colibri_session *s)
{
    return fwd_state_bytes(&s->st) + colibri_spec_bytes(s->spec) + (int64_t)s->snaps_bytes;
}

int colibri_session_resume_point(const colibri_session *s, int n)
{
    if (n < 0) n = 0;
    if (n >= s->pos || !s->st.mixer_state) return n < s->pos ? n : s->pos;
    int i = colibri_api_snaps_find(s->snaps, n);
    return i < 0 ? 0 : s->snaps->pos[i];
}

/* Brings a state that only goes forward back to n, one of its resume points. */
static int rewind_state(colibri_session *s, int n, struct colibri_err *err)
{
    if (n == s->pos) return 0;
    int at = colibri_session_resume_point(s, n);
    if (at != n)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "cannot truncate to %d tokens: this model's attention state "
                            "(DeepSeek-V4's window and compressors, GLM-5.3's KDA states) does not rewind; the latest "
                            "snapshot at or before it is at %d (colibri_session_resume_point): truncate there and feed "
                            "the tokens after it",
                            n, at);
    colibri_api_snaps_drop_after(s->snaps, n);
    if (n == 0) {
        model_fwd_state_reset_mixers(&s->st);
        return 0;
    }
    int rc = colibri_api_snap_restore(&s->st, s->snaps->slot[colibri_api_snaps_find(s->snaps, n)], NULL, err);
    if (rc) {   /* cannot happen with the session's own ring: start over rather than go on from a broken state */
        model_fwd_state_reset_mixers(&s->st);
        s->snaps->n = 0;
        s->pos = 0;
    }
    return rc;
}

int colibri_session_truncate(colibri_session *s, int n, struct colibri_err *err)
{
    if (n < 0 || n > s->pos)
        return base_err_set(err, COLIBRI_EINVAL, "cannot truncate to %d tokens: the session holds %d", n, s->pos);
    int rc = s->st.mixer_state ? rewind_state(s, n, err) : 0;
    if (rc) return rc;
    s->pos = n;
    model_dev_kv_forget(s->dev_kv, n);
    return 0;
}

/* copy_prefix for a state that only goes forward: src's state at n (its
 * current one, or a snapshot) with the rows below it, and its snapshots. */
static int copy_state(colibri_session *dst, const colibri_session *src, int n, struct colibri_err *err)
{
    if (colibri_session_resume_point(src, n) != n)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "session_copy_prefix: this model's attention state "
                            "(DeepSeek-V4, GLM-5.3) can be copied at a snapshot only; the latest at or before %d is at %d "
                            "(colibri_session_resume_point)", n, colibri_session_resume_point(src, n));
    if (!src->snaps || !dst->snaps || src->snaps->bytes != dst->snaps->bytes || dst->model != src->model)
        return base_err_set(err, COLIBRI_EINVAL, "session_copy_prefix: the sessions are of different models or "
                            "keep no snapshots");
    if (n == 0) {
        model_fwd_state_reset_mixers(&dst->st);
        dst->snaps->n = 0;
        return 0;
    }
    /* the state at n goes through a free slot of dst's ring, or its oldest */
    int i = colibri_api_snaps_find(src->snaps, n);
    const unsigned char *from = i >= 0 && src->snaps->pos[i] == n ? src->snaps->slot[i] : NULL;
    unsigned char *tmp = dst->snaps->slot[dst->snaps->n < dst->snaps->cap ? dst->snaps->n : 0];
    if (!from) {
        if (!dst->snaps->cap)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "session_copy_prefix: the target keeps no snapshots");
        colibri_api_snap_save(&src->st, tmp);
        from = tmp;
    }
    int rc = colibri_api_snap_restore(&dst->st, from, &src->st, err);
    if (rc) {
        model_fwd_state_reset_mixers(&dst->st);
        dst->snaps->n = 0;
        dst->pos = 0;
        return rc;
    }
    colibri_api_snaps_copy(dst->snaps, src->snaps, n);
    if (!dst->snaps->n || dst->snaps->pos[dst->snaps->n - 1] != n) colibri_api_snaps_take(dst->snaps, &dst->st, n);
    return 0;
}

int colibri_session_copy_prefix(colibri_session *dst, const colibri_session *src, int n, struct colibri_err *err)
{
    if (!dst || !src || dst == src) return base_err_set(err, COLIBRI_EINVAL, "session_copy_prefix: two sessions are required");
    if (n < 0 || n > src->pos || n >= dst->st.n_ctx)
        return base_err_set(err, COLIBRI_EINVAL, "cannot copy %d positions: the source holds %d, the target takes %d",
                            n, src->pos, dst->st.n_ctx - 1);
    if (src->st.mixer_state || dst->st.mixer_state) {
        int rc = copy_state(dst, src, n, err);
        if (rc) return rc;
        if (!src->st.kv && !dst->st.kv) {
            memcpy(dst->tokens, src->tokens, (size_t)n * sizeof *dst->tokens);
            dst->pos = n;
            model_dev_kv_forget(dst->dev_kv, 0);
            return 0;
        }
    }
    if (!src->st.kv || !dst->st.kv)
        return base_err_set(err, COLIBRI_EINVAL, "session_copy_prefix: the sessions are of different models");
    const struct kv_cache *a = src->st.kv;
    struct kv_cache *b = dst->st.kv;
    if (dst->model != src->model || a->n_layers != b->n_layers)
        return base_err_set(err, COLIBRI_EINVAL, "session_copy_prefix: the sessions are of different models");
    for (int l = 0; l < a->n_layers; l++)
        if (!kv_layer_same_layout(&a->layer[l], &b->layer[l]))
            return base_err_set(err, COLIBRI_EINVAL, "session_copy_prefix: cache layer %d is laid out differently", l);
    for (int l = 0; l < a->n_layers; l++)
        memcpy(kv_cache_row(b, l, 0), kv_cache_row(a, l, 0), (size_t)n * a->layer[l].row_bytes);
    memcpy(dst->tokens, src->tokens, (size_t)n * sizeof *dst->tokens);
    dst->pos = n;
    model_dev_kv_forget(dst->dev_kv, 0);   /* its device copy holds the old rows */
    return 0;
}
