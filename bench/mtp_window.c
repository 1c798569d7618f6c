/* bench/mtp_window.c - how often an `--mtp auto` probe's first draft is kept
 * after a stretch decoded without drafts, by what the MTP layer's cache holds
 * for that stretch (api/spec.c (3)):
 *   eager   every row filled as it goes (what --mtp on keeps)
 *   window  the rows of the last 32 positions filled by the probe (auto now)
 *   stale   only the prompt's window filled, the decoded stretch stale
 *           (auto before the window followed the decode)
 * Teacher-forced on a text: at each of N offsets, a prompt of P tokens, then
 * S tokens fed one by one without drafts, then one draft after the next
 * token x, counted kept when it equals the main model's greedy token after x
 * (what a greedy verify keeps).
 *
 * usage: build/bench/mtp_window MODEL TEXT [N=100] [P=16] [S=48]
 * e.g.   build/bench/mtp_window models/colibri-tiny data/persuasion.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "colibri.h"

enum { EAGER, WINDOW, STALE, N_MODES };
static const char *const mode_name[N_MODES] = { "eager", "window", "stale" };

/* Prompt p[0..P), then t[0..S) fed without drafts, then the draft after x. */
static int draft_after(colibri_model *m, int n_text, int mode, const int32_t *p, int P, const int32_t *t, int S,
                       int32_t x, int32_t *draft, int32_t *greedy, struct colibri_err *err)
{
    struct colibri_session_opts so = { .n_ctx = P + S + 8 };
    colibri_session *s = NULL;
    int rc = colibri_session_new(m, &so, &s, err);
    if (!rc) rc = colibri_spec_enable(s, err);
    if (!rc) rc = colibri_spec_prefill(s, p, P, NULL, mode != EAGER, err);
    for (int i = 0; i < S && !rc; i++) {
        int32_t d[1];
        if (mode == EAGER) rc = colibri_spec_draft(s, t[i], 1, n_text, d, err) < 0;
        if (rc) break;
        if (mode == STALE && i < S - 1) {
            rc = colibri_session_decode(s, t[i], NULL, err);   /* keeps no hidden state */
        } else {
            rc = colibri_spec_verify(s, t[i], d, 0, NULL, err);
            if (!rc) colibri_spec_keep(s, P + i, 1);
        }
    }
    int nd = rc ? -1 : colibri_spec_draft(s, x, 1, n_text, draft, err);
    float *lg = nd == 1 ? malloc((size_t)colibri_model_vocab(m) * sizeof *lg) : NULL;
    if (lg && !colibri_spec_verify(s, x, draft, 0, lg, err)) {
        int b = 0;
        for (int v = 1; v < n_text; v++) if (lg[v] > lg[b]) b = v;
        *greedy = b;
    } else {
        nd = -1;
    }
    free(lg);
    colibri_session_free(s);
    return rc ? -1 : nd;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL TEXT [N=100] [P=16] [S=48]\n", argv[0]);
        return 2;
    }
    int N = argc > 3 ? atoi(argv[3]) : 100, P = argc > 4 ? atoi(argv[4]) : 16, S = argc > 5 ? atoi(argv[5]) : 48;
    if (N < 1 || P < 1 || S < 1) {
        fprintf(stderr, "mtp_window: N, P and S must be positive\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    struct colibri_err err = { 0 };
    struct colibri_model_opts mo = { .n_threads = 1 };
    colibri_model *m = NULL;
    colibri_tokenizer *tok = NULL;
    if (colibri_model_load(argv[1], &mo, &m, &err) || colibri_tokenizer_load(argv[1], &tok, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (colibri_tokenizer_encode(tok, text, len, 0, &ids, &n, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", argv[2], err.msg);
        return 1;
    }
    size_t span = (size_t)P + S + 1;
    if (n < span * N) {
        fprintf(stderr, "mtp_window: %zu tokens in %s, %zu needed\n", n, argv[2], span * N);
        return 1;
    }
    int n_text = colibri_tokenizer_n_vocab(tok), kept[N_MODES] = { 0 }, same_ws = 0;
    for (int c = 0; c < N; c++) {
        const int32_t *p = ids + (n / N) * c, *t = p + P;
        int32_t x = t[S], d[N_MODES], g[N_MODES];
        for (int mode = 0; mode < N_MODES; mode++) {
            if (draft_after(m, n_text, mode, p, P, t, S, x, &d[mode], &g[mode], &err) != 1) {
                fprintf(stderr, "offset %d, %s: no draft: %s\n", c, mode_name[mode], err.msg);
                return 1;
            }
            kept[mode] += d[mode] == g[mode];
        }
        same_ws += d[WINDOW] == d[EAGER];
    }
    printf("%s, %s: %d offsets, prompt %d + %d tokens decoded without drafts, then one draft\n", argv[1], argv[2],
           N, P, S);
    for (int mode = 0; mode < N_MODES; mode++)
        printf("  %-6s kept %d of %d (%.1f%%)\n", mode_name[mode], kept[mode], N, 100.0 * kept[mode] / N);
    printf("  window drafts equal to eager: %d of %d\n", same_ws, N);
    free(ids);
    colibri_tokenizer_free(tok);
    colibri_model_free(m);
    return 0;
}
