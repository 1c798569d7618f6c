/* colibri convert: a checkpoint rewritten with chosen weight formats. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "colibri.h"

int cmd_convert(int argc, char **argv)
{
    struct colibri_model_opts mo = { 0 };
    int shard_mib = 4096;
    const struct opt opts[] = {
        OPTS_WEIGHT_FORMATS(mo),
        { "mtp", 0, OPT_STR, &mo.mtp_fmt, "format of the MTP layers' matrices (eh_proj, attention, experts), e.g. "
                                         "q8: drafts from an MTP layer below 8 bits are rarely accepted (default: "
                                         "as --dense and --experts say)" },
        { "shard-mib", 0, OPT_INT, &shard_mib, "target shard size in MiB (default 4096)", 1, 1 << 20 },
    };
    const struct opts_spec spec = {
        "colibri convert SRC DST [--experts FMT] [--dense FMT] [--embed FMT] [--mtp FMT] [--shard-mib N]",
        "Writes SRC's weights into DST in the chosen formats (unset roles keep their stored format; norms,\n"
        "router and biases always stay as stored) as sharded safetensors with the format of each packed\n"
        "tensor in its metadata. Each shard is written to a temporary file and renamed; rerunning the same\n"
        "conversion keeps the finished shards; every written tensor is read back and checked. A model with an\n"
        "MTP layer (speculative decoding) converted below 8 bits keeps drafting well with --mtp q8.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[2];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 2, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (npos != 2) {
        opts_usage(&spec, stderr);
        return 2;
    }
    struct colibri_err err = { 0 };
    struct colibri_convert_report rep;
    if (colibri_convert(pos[0], pos[1], &mo, (uint64_t)shard_mib << 20, 1, &rep, &err)) {
        fprintf(stderr, "colibri convert: %s\n", err.msg);
        return 1;
    }
    printf("converted %s -> %s: %d tensors, %.1f MiB in %d shards (%d kept from an earlier run), verified\n", pos[0],
           pos[1], rep.tensors, rep.bytes / 1048576.0, rep.shards, rep.shards_reused);
    return 0;
}
