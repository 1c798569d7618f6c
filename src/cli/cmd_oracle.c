/* colibri oracle: checks fixtures against Hugging Face's logits. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/mpi_cli.h"
#include "cli/opts.h"
#include "colibri.h"
#include "colibri_dev.h"

int cmd_oracle(int argc, char **argv)
{
    struct colibri_model_opts mo = { 0 };
    struct cli_mpi cm = CLI_MPI_INIT;
    int no_gate = 0, digest = 0;
    const char *kv = NULL, *kv_rope = NULL;
    const struct opt opts[] = {
        { "kv", 0, OPT_STR, &kv, "KV-cache tier (" OPTS_LIST_KV_TIERS "; default f32)" },
        { "kv-rope", 0, OPT_STR, &kv_rope, "precision of the cached RoPE part (" OPTS_LIST_KV_ROPES "; default per tier)" },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        OPTS_DEVICE(mo),
        OPTS_MPI(cm),
        { "digest", 0, OPT_FLAG, &digest, "end each line with digest=H: a hash of every logit computed (equal "
                                          "digests: bit-identical logits)" },
        { "no-gate", 0, OPT_FLAG, &no_gate, "report only: exit 0 whatever the agreement (for quantized runs)" },
    };
    const struct opts_spec spec = {
        "colibri oracle [--kv TIER] [--experts FMT] [--dense FMT] [--embed FMT] [--no-gate] FIXTURE_DIR...",
        "Checks each oracle fixture (tools/make_oracle.py) and prints one line per fixture:\n"
        "  NAME tf=A/B gen=C/D max_dlogit=X decode_dlogit=Y\n"
        "tf: teacher-forced argmax agreement at positions whose HF top-2 margin exceeds the tolerance;\n"
        "gen: greedy tokens reproduced; max_dlogit: largest |logit - HF logit| in prefill;\n"
        "decode_dlogit: largest |logit| difference of token-by-token absorbed decode vs prefill.\n"
        "Exits 0 only when every fixture has tf=B, gen=D and both deltas <= 1e-4, unless --no-gate.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[256];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 256, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (npos == 0) {
        opts_usage(&spec, stderr);
        return 2;
    }
    int bad = 0, mpi_status;
    if (cli_mpi_begin_dirs("oracle", &cm, pos, npos, &mo, &mpi_status)) return mpi_status;
    for (int i = 0; i < npos; i++) {
        struct colibri_err err = { 0 };
        struct colibri_oracle_result r;
        if (colibri_oracle_check(pos[i], &mo, kv, kv_rope, &r, &err)) {
            fprintf(stderr, "colibri oracle: %s: %s\n", pos[i], err.msg);
            bad = 1;
            continue;
        }
        printf("%s tf=%d/%d gen=%d/%d max_dlogit=%.3g decode_dlogit=%.3g", r.name, r.tf_agree, r.tf_total,
               r.gen_agree, r.gen_total, r.max_dlogit, r.decode_dlogit);
        if (r.mtp_rows) printf(" mtp_rows=%d mtp_dlogit=%.3g", r.mtp_rows, r.mtp_dlogit);
        if (digest) printf(" digest=%016llx", (unsigned long long)r.logits_digest);
        printf("%s\n", r.pass || no_gate ? "" : "  FAIL");
        fflush(stdout);
        if (!r.pass && !no_gate) bad = 1;
    }
    return cli_mpi_end(&cm, bad);
}
