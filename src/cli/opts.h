/* cli/opts.h - command-line options as one table per command.
 *
 * Each option is one row: long name, optional short letter, type, destination,
 * and help text. opts_parse() fills the destinations and collects positional
 * arguments; `--help` prints the table. Values are validated here (integers
 * and numbers must parse completely and lie within [min, max]), so a command
 * never sees a half-parsed value. */
#ifndef COLIBRI_CLI_OPTS_H
#define COLIBRI_CLI_OPTS_H

#include <stdio.h>

enum opt_type { OPT_FLAG, OPT_INT, OPT_FLOAT, OPT_STR };

struct opt {
    const char *name;       /* without leading dashes: "model" for --model */
    char short_name;        /* 'm' for -m, or 0 */
    enum opt_type type;
    void *dest;             /* int* for FLAG/INT, float* for FLOAT, const char** for STR */
    const char *help;
    double min, max;        /* bounds for INT/FLOAT (ignored when min == max == 0) */
};

struct opts_spec {
    const char *usage;      /* "colibri info -m DIR" */
    const char *summary;    /* one paragraph */
    const struct opt *opts;
    int n_opts;
};

/* Returns 0 on success, 1 if --help was printed (caller exits 0), or -1 after
 * printing an error naming the bad option (caller exits 2). Positional
 * arguments go to pos[0..*n_pos) (at most max_pos, more is an error). */
int opts_parse(const struct opts_spec *spec, int argc, char **argv, char **pos, int max_pos, int *n_pos);

void opts_usage(const struct opts_spec *spec, FILE *f);

/* --mtp MODE and --draft N (OPTS_MTP) for a model with n_mtp_layers MTP
 * layers: *n_draft_out and *auto_out for colibri_gen_opts. auto on a model
 * without an MTP layer is off; on is refused by the library by name. 0, or
 * -1 after printing an error naming the option. */
int opts_mtp(const char *mode, int n_draft, int n_mtp_layers, int *n_draft_out, int *auto_out);

/* Parses the comma-separated integers of option --name ("1024,8192") into
 * out[0..max): each must parse completely and lie in [min, max_value].
 * Returns the count (>= 1), or -1 after printing an error naming the option
 * and the bad element. */
int opts_int_list(const char *name, const char *s, int *out, int max, int min, int max_value);

/* Placeholders a help text may hold: --help prints the names the library
 * accepts there (colibri_weight_format_names, colibri_kv_tier_names,
 * colibri_kv_rope_names), separated by spaces. */
#define OPTS_LIST_WEIGHT_FORMATS "{weight-formats}"
#define OPTS_LIST_KV_TIERS       "{kv-tiers}"
#define OPTS_LIST_KV_ROPES       "{kv-ropes}"

/* Rows shared by several commands' tables, so each knob is spelled once. */
#define OPTS_WEIGHT_FORMATS(mo)                                                                                  \
    { "experts", 0, OPT_STR, &(mo).experts_fmt,                                                                  \
      "routed-expert weight format: " OPTS_LIST_WEIGHT_FORMATS " (default: as stored)" },                        \
    { "dense", 0, OPT_STR, &(mo).dense_fmt, "attention, shared-expert and dense-MLP weight format (default: as stored)" }, \
    { "embed", 0, OPT_STR, &(mo).embed_fmt, "embedding and lm_head weight format (default: as stored)" }

/* For the commands that load the model to run it (not convert/synth, which only write it). */
#define OPTS_MODEL_MEMORY(mo)                                                                                    \
    { "ram", 0, OPT_STR, &(mo).ram, "most memory for weights, e.g. 12G: routed experts that do not fit are "      \
      "streamed from disk (same output; default: no limit unless the model exceeds 80% of RAM)" },               \
    { "kv-b-f32", 0, OPT_FLAG, &(mo).kv_b_f32, "keep an f32 copy of kv_b for the absorbed decode (about 4 GB at "   \
      "DeepSeek-V3 shapes, see colibri info): same output; by default each row is dequantized as it is read, as "  \
      "fast with AVX-512" },                                                                                     \
    { "state-dir", 0, OPT_STR, &(mo).state_dir, "where streamed experts keep the routing counts of their hot set "  \
      "(default $XDG_CACHE_HOME/colibri or ~/.cache/colibri; none: no state file)" }

/* The opt-in bf16-activation products (colibri_model_opts.bf16_act). */
#define OPTS_BF16_ACT_HELP "bf16 weights multiply activations rounded to bf16 on AMX-BF16 tiles or VDPBF16PS: "   \
                           "faster prefill, slightly different numbers; other formats unaffected (default off)"
#define OPTS_BF16_ACT(flag) { "bf16-act", 0, OPT_FLAG, &(flag), OPTS_BF16_ACT_HELP }
/* The commands whose decode may run on a compute device (model/fwd_device.h). */
#define OPTS_DEVICE(mo)                                                                                          \
    { "device", 0, OPT_STR, &(mo).device, "decode on a device: host (the CUDA kernels replayed on the CPU, slow; " \
      "checks the wiring) or cuda (build/cuda/colibri of make CUDA=1); prefill stays on the CPU (default: CPU)" }

#define OPTS_KV_CACHE(tier, rope, int8)                                                                          \
    { "kv", 0, OPT_STR, &(tier), "KV-cache tier: " OPTS_LIST_KV_TIERS " (default f32; "                          \
                                 "env aliases KV8=1, KV_TQ=N, KV_TQ_POLAR=1); per layer: TIER@LAYERS:SETTING..., "  \
                                 "SETTING a tier or rope=PREC, e.g. int8r@1:rope=f32 or fp8@0-1:int8r@1:rope=f32" }, \
    { "kv-rope", 0, OPT_STR, &(rope), "precision of the cached RoPE part: " OPTS_LIST_KV_ROPES " (default per tier)" }, \
    { "kv-int8", 0, OPT_INT, &(int8), "decode attention with integer dot products on int8/int4/fp8 tiers: 0 exact " \
                                      "(default), 1 int8 query, 2 16-bit query", 0, 2 }

#define OPTS_KV_SNAPSHOT(every, count)                                                                           \
    { "kv-snapshot", 0, OPT_INT, &(every), "DeepSeek-V4: positions between snapshots of the attention state (prefix "  \
                                           "reuse resumes from the latest within a prompt's common prefix; default "   \
                                           "512)", 1, 1 << 30 },                                                       \
    { "kv-snapshots", 0, OPT_INT, &(count), "DeepSeek-V4: snapshots kept per session, each every layer's window and "  \
                                            "open blocks (default 8)", 1, 4096 }

#define OPTS_KV_INDEX(idx)                                                                                       \
    { "kv-index", 0, OPT_STR, &(idx), "DSA models: tier of the cached index keys, f32 (default, exact) or fp8 "        \
                                      "(one scale per row)" }

#define OPTS_SAMPLER(so)                                                                                         \
    { "temp", 0, OPT_FLOAT, &(so).temperature, "temperature; 0 = greedy (default 0.8)", 0, 100 },               \
    { "top-k", 0, OPT_INT, &(so).top_k, "keep the k most likely tokens; 0 = off (default 40)", 0, 1 << 24 },     \
    { "top-p", 0, OPT_FLOAT, &(so).top_p, "nucleus mass; 1 = off (default 0.95)", 0, 1 },                        \
    { "min-p", 0, OPT_FLOAT, &(so).min_p, "drop p < min_p * p_max; 0 = off (default 0.05)", 0, 1 },              \
    { "repeat-penalty", 0, OPT_FLOAT, &(so).repeat_penalty, "repetition penalty; 1 = off (default 1)", 0.01, 100 }

/* Speculative decoding with the model's MTP layer; opts_mtp() turns the two
 * into colibri_gen_opts' n_draft and draft_auto. */
#define OPTS_MTP(mode, n_draft)                                                                                  \
    { "mtp", 0, OPT_STR, &(mode), "speculative decoding with the model's own MTP layer: on, off, or auto (drafts "  \
      "only while they pay, measured as it goes); the output is the same (default off)" },                      \
    { "draft", 0, OPT_INT, &(n_draft), "tokens drafted per step with --mtp on|auto (default 2)", 1, 3 }

#define OPTS_CHAT_TEMPLATE(path)                                                                                 \
    { "chat-template", 0, OPT_STR, &(path), "Jinja chat template file to use instead of the model's own "           \
                                            "(tokenizer_config.json chat_template or chat_template.jinja)" }
#define OPTS_CHAT_TEMPLATE_KWARGS(json)                                                                          \
    { "chat-template-kwargs", 0, OPT_STR, &(json), "the chat template's variables, a JSON object (the server's "    \
                                                   "chat_template_kwargs), e.g. '{\"thinking\": true}' for "        \
                                                   "DeepSeek-V3.1's and V4's thinking mode" }

/* The environment, read here and nowhere else in colibri.
 *
 * opts_env_kv_tier: the KV tier named by the aliases KV8=1 (fp8), KV_TQ=N
 * (tqN, N = 2..4) and KV_TQ_POLAR=1 (polarN, N from KV_TQ, default 4), or
 * NULL when none is set. An --kv option given on the command line wins. A
 * malformed value is reported on stderr and ignored.
 * opts_env_api_key: COLIBRI_API_KEY or NULL.
 * opts_env_omp_policy_chosen: 1 when the user set OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT. */
const char *opts_env_kv_tier(void);
const char *opts_env_api_key(void);
int opts_env_omp_policy_chosen(void);

#endif
