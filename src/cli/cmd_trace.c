/* cli/cmd_trace.c - `colibri trace`: the routing of a text, and what caching
 * policies would make of it (colibri_trace_routing in colibri_dev.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/textio.h"
#include "colibri.h"
#include "colibri_dev.h"

int cmd_trace(int argc, char **argv)
{
    struct colibri_model_opts mo = { 0 };
    const char *dir = "models/colibri-tiny", *text = NULL, *file = NULL, *budget_list = NULL;
    int max_tokens = 512, threads = 0;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory (default models/colibri-tiny)" },
        { "text", 'p', OPT_STR, &text, "the text to route" },
        { "file", 'f', OPT_STR, &file, "read the text from a file ('-' = stdin)" },
        { "tokens", 'n', OPT_INT, &max_tokens, "route at most this many tokens of it (default 512)", 4, 1 << 24 },
        { "budgets", 0, OPT_STR, &budget_list, "cache sizes to replay, in experts, comma-separated (default 10%, "
                                               "25%, 50%, 75% of all experts)" },
        { "threads", 't', OPT_INT, &threads, "compute threads (default: OpenMP's)", 0, 4096 },
        OPTS_MODEL_MEMORY(mo),
    };
    const struct opts_spec spec = {
        "colibri trace [-m DIR] (-p TEXT | -f FILE) [-n N] [--budgets N,N,...]",
        "Forwards the text one token at a time and records which experts each MoE layer routes it to. Prints per\n"
        "layer the adjacent-token overlap, the reuse-distance distribution and the next-layer prediction's recall,\n"
        "and per cache size the hit rate of LRU, LFU, Belady's optimum and the streamed store's policy (with and\n"
        "without prefetch), as markdown tables.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (!text == !file) {
        fprintf(stderr, "colibri trace: need exactly one of --text, --file\n");
        opts_usage(&spec, stderr);
        return 2;
    }
    int budgets[16], nb = 0;
    if (budget_list && (nb = opts_int_list("budgets", budget_list, budgets, 16, 1, 1 << 30)) < 0) return 2;
    struct colibri_err err = { 0 };
    if (colibri_model_probe(dir, &err)) {
        fprintf(stderr, "colibri trace: %s\n", err.msg);
        return 1;
    }
    size_t len = 0;
    char *owned = NULL;
    if (file) {
        if (!(owned = cli_read_text(file, &len))) { perror(file); return 1; }
        text = owned;
    } else {
        len = strlen(text);
    }
    colibri_tokenizer *tok = NULL;
    colibri_model *m = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    mo.n_threads = threads;
    int status = 1;
    if (colibri_tokenizer_load(dir, &tok, &err) ||
        colibri_tokenizer_encode(tok, text, len, COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, NULL, &err) ||
        colibri_model_load(dir, &mo, &m, &err) || colibri_tokenizer_check_model(tok, m, &err) ||
        colibri_trace_routing(m, ids, n < (size_t)max_tokens ? (int)n : max_tokens, nb ? budgets : NULL, nb, stdout,
                              &err))
        fprintf(stderr, "colibri trace: %s\n", err.msg);
    else
        status = 0;
    colibri_model_free(m);
    colibri_tokenizer_free(tok);
    free(ids);
    free(owned);
    return status;
}
