/* colibri synth: a random-weight model in real shapes, for benchmarks. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "colibri.h"
#include "colibri_dev.h"

int cmd_synth(int argc, char **argv)
{
    struct colibri_model_opts mo = { 0 };
    const char *preset = "v2-lite";
    int layers = 0, seed = 1, mtp_layers = 0;
    const struct opt opts[] = {
        { "preset", 'p', OPT_STR, &preset,
          "architecture: v2-lite (default), v3, v3-moe64, tiny, v2, v32, glm5, v32-tiny, glm5-tiny, v4-flash, "
          "v4-pro, glm53, glm53-flash, glm53-tiny" },
        { "layers", 'l', OPT_INT, &layers, "number of layers (default: the preset's)", 0, 1000 },
        { "experts", 0, OPT_STR, &mo.experts_fmt, "routed-expert format (default bf16)" },
        { "dense", 0, OPT_STR, &mo.dense_fmt, "attention, shared-expert and dense-MLP format (default bf16)" },
        { "embed", 0, OPT_STR, &mo.embed_fmt, "embedding and lm_head format (default bf16)" },
        { "seed", 0, OPT_INT, &seed, "random seed (default 1)", 0, 2147483647 },
        { "mtp-layers", 0, OPT_INT, &mtp_layers, "MTP layers after the last layer (0 or 1; default 0): random "
                                                 "weights, for timing drafts with forced acceptance (bench --mtp-accept)",
          0, 1 },
    };
    const struct opts_spec spec = {
        "colibri synth DST [--preset v2-lite|v3|v3-moe64|tiny|v2|v32|glm5|v32-tiny|glm5-tiny|v4-flash|v4-pro|\n"
        "              glm53|glm53-flash|glm53-tiny] [--layers N]\n"
        "              [--mtp-layers 1] [--experts FMT] [--dense FMT] [--embed FMT]",
        "Writes a model with random weights (fan-in scaled, seeded) in the shapes of a real architecture, in any\n"
        "weight format, for benchmarks that a tiny fixture cannot stand in for. It has no tokenizer; use it with\n"
        "colibri bench and colibri info. v2-lite is DeepSeek-V2-Lite's shapes with DeepSeek-V3's router; v2 is\n"
        "DeepSeek-V2-Lite as deepseek_v2 (softmax greedy router). v32 (DeepSeek-V3.2) and glm5 (GLM-5) add the\n"
        "DSA indexer tensors; v32-tiny and glm5-tiny are tiny's sizes with them (glm5-tiny: full/shared\n"
        "indexer layers). v2, v32, glm5 and the tiny ones default to 4 layers. v4-flash and v4-pro (DeepSeek-V4) are\n"
        "written in the official tensor names and config spelling, 1 layer by default (a hash-MoE HCA layer; layer\n"
        "3 is the first CSA one), stored as the official release ships them (FP8 e4m3 dense Linears with ue8m0\n"
        "128x128 block scales, FP4 routed experts, the rest BF16/F32; quantization_config and expert_dtype fp4 in\n"
        "config.json) unless --experts, --dense or --embed asks for colibri's formats (then the experts are mxfp4\n"
        "unless --experts says otherwise: 256 bf16 V4-Flash experts are 12.9 GB a layer); --mtp-layers is refused\n"
        "for them. glm53 (GLM-5.3: GLM-5's 744B dimensions on GLM-5.3's layers), glm53-flash (GLM-5.3-Flash) and\n"
        "glm53-tiny are written in the release's names, 4 layers by default (3 KDA, then an indexed one), the\n"
        "routed experts of glm53 and glm53-flash in mxfp4 unless --experts says otherwise; with --experts fp8b\n"
        "--dense fp8b they are the FP8 release (F8_E4M3 + weight_scale_inv, its quantization_config declared).",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 1, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (npos != 1) {
        opts_usage(&spec, stderr);
        return 2;
    }
    struct colibri_err err = { 0 };
    struct colibri_convert_report rep;
    if (colibri_synth(pos[0], preset, layers, mtp_layers, &mo, (uint64_t)seed, 1, &rep, &err)) {
        fprintf(stderr, "colibri synth: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s: preset %s, %d tensors, %.1f MiB in %d shards, verified\n", pos[0], preset, rep.tensors,
           rep.bytes / 1048576.0, rep.shards);
    return 0;
}
