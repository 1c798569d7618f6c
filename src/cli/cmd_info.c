/* colibri info: what a model is, from its config and tensor table. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "colibri.h"

/* "12.3 MiB", "4.56 GiB", "320 B", written into s (32 bytes) */
static const char *human(char *s, int64_t b)
{
    if (b >= (1ll << 30)) snprintf(s, 32, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ll << 20)) snprintf(s, 32, "%.1f MiB", b / 1048576.0);
    else if (b >= (1 << 10)) snprintf(s, 32, "%.1f KiB", b / 1024.0);
    else snprintf(s, 32, "%lld B", (long long)b);
    return s;
}

int cmd_info(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny";
    struct colibri_model_opts mo = { .lazy_load = 1 };   /* nothing but the headers is read */
    int n_ctx = 0, n_slots = 1;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory (config.json + safetensors); default models/colibri-tiny" },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        { "ctx", 'c', OPT_INT, &n_ctx, "also state the KV cache at this context (default: the model's)", 0, 1 << 24 },
        { "slots", 0, OPT_INT, &n_slots, "... for this many sessions (serve --slots; default 1)", 1, 4096 },
    };
    const struct opts_spec spec = { "colibri info [-m DIR] [--experts FMT] [--dense FMT] [--embed FMT] [--ram SIZE] [--kv-b-f32]",
                                    "Prints the model family, layer and expert counts, parameter count, bytes per "
                                    "dtype, what the model holds in memory when loaded with the given weight "
                                    "formats, and KV-cache bytes per token.",
                                    opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;

    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    if (colibri_model_load(dir, &mo, &m, &err)) {
        fprintf(stderr, "colibri info: %s\n", err.msg);
        return 1;
    }
    struct colibri_model_info in;
    colibri_model_get_info(m, &in);
    printf("model:        %s\n", dir);
    printf("family:       %s\n", in.family);
    printf("layers:       %d (%d dense, %d MoE)\n", in.n_layers, in.n_dense_layers, in.n_moe_layers);
    printf("hidden:       %d, heads %d, vocab %d, context %d\n", in.hidden, in.n_heads, in.vocab,
           in.max_position_embeddings);
    printf("attention:    %s\n", in.attention);
    if (in.q_lora_rank) printf("              q_lora_rank %d\n", in.q_lora_rank);
    printf("experts:      %d routed (top-%d) + %d shared\n", in.n_routed_experts, in.n_experts_per_tok,
           in.n_shared_experts);
    if (in.n_mtp_layers)
        printf("mtp:          %d layer%s (model.layers.%d onwards), %.1f MiB, %.2f MiB read per draft; --mtp on|auto\n",
               in.n_mtp_layers, in.n_mtp_layers == 1 ? "" : "s", in.n_layers, in.mtp_bytes / 1048576.0,
               in.mtp_active_bytes / 1048576.0);
    else if (in.n_mtp_declared)
        printf("mtp:          %d layer%s declared (num_nextn_predict_layers), none in the checkpoint\n", in.n_mtp_declared,
               in.n_mtp_declared == 1 ? "" : "s");
    printf("parameters:   %lld (%.2f M)\n", (long long)in.n_params, in.n_params / 1e6);
    char h1[32], h2[32];
    printf("stored:      ");
    for (int i = 0; i < 16; i++)
        if (in.bytes_by_dtype[i]) printf(" %s %s", in.dtype_names[i], human(h1, in.bytes_by_dtype[i]));
    printf("\n");
    printf("weights:      %.1f MiB as loaded (dense %.1f, routed experts %.1f), %.2f MiB read per decoded token\n",
           in.weight_bytes / 1048576.0, (in.weight_bytes - in.expert_bytes) / 1048576.0, in.expert_bytes / 1048576.0,
           in.active_bytes / 1048576.0);
    printf("memory:       %.1f MiB resident: weights %.1f, of which routed experts %.1f (%s store", in.resident_bytes / 1048576.0,
           (in.weight_bytes - in.expert_bytes + in.expert_cache_bytes) / 1048576.0, in.expert_cache_bytes / 1048576.0,
           in.expert_store);
    if (in.expert_cache_bytes != in.expert_bytes) printf(", a cache for %.1f MiB on disk", in.expert_bytes / 1048576.0);
    printf("), f32 copies %.1f%s\n", in.copy_bytes / 1048576.0,
           in.copy_bytes ? " (kv_b for the decode, --kv-b-f32)" : "");
    if (in.kv_session_bytes)
        printf("kv cache:     %lld bytes per token (the layers' own states, f32: V4's compressed entries, GLM-5.3's "
               "latents and index keys) + %s per session (fixed: V4's window rings, GLM-5.3's KDA states)\n",
               (long long)in.kv_bytes_per_token, human(h1, in.kv_session_bytes));
    else
        printf("kv cache:     %lld bytes per token (f32 latent + rope, all layers)\n", (long long)in.kv_bytes_per_token);
    if (in.snapshot_bytes)
        printf("snapshots:    %s each (%lld bytes: every layer's KDA state and open index pool at one position; a "
               "session keeps --kv-snapshots of them, one per KV-file chunk)\n", human(h1, in.snapshot_bytes),
               (long long)in.snapshot_bytes);
    int ctx = n_ctx ? n_ctx : in.max_position_embeddings;
    int64_t kv = (in.kv_bytes_per_token * ctx + in.kv_session_bytes) * n_slots;
    printf("at --ctx %d x %d slot%s: KV %s (f32%s), with the weights %s\n", ctx, n_slots,
           n_slots == 1 ? "" : "s", human(h1, kv), in.kv_session_bytes ? "" : "; --kv fp8 about a quarter", human(h2, kv + in.resident_bytes));
    colibri_model_free(m);
    return 0;
}
