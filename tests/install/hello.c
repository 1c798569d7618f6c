/* A program built against an installed colibri (pkg-config colibri): greedy
 * generation of N tokens after a prompt, printed as text, as `colibri run
 * --temp 0` prints it. Used by tests/cli/install.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <colibri.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hello MODEL_DIR PROMPT N\n");
        return 2;
    }
    struct colibri_err err = { 0 };
    colibri_tokenizer *tok = NULL;
    colibri_model *m = NULL;
    colibri_session *s = NULL;
    int32_t *ids = NULL, *out = NULL;
    size_t n_ids = 0, replaced = 0;
    int n = atoi(argv[3]), rc = 1;
    if (colibri_tokenizer_load(argv[1], &tok, &err) || colibri_model_load(argv[1], NULL, &m, &err) ||
        colibri_session_new(m, NULL, &s, &err) ||
        colibri_tokenizer_encode(tok, argv[2], strlen(argv[2]), COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n_ids, &replaced,
                                 &err))
        goto done;
    int V = colibri_model_vocab(m);
    float *logits = malloc((size_t)V * sizeof *logits);
    out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    if (!logits || !out || colibri_session_prefill(s, ids, (int)n_ids, logits, 0, &err)) goto done;
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        out[i] = best;
        if (i + 1 < n && colibri_session_decode(s, best, logits, &err)) goto done;
    }
    char *text = NULL;
    size_t len = 0;
    if (colibri_tokenizer_decode(tok, out, (size_t)n, 1, &text, &len, &err)) goto done;
    fwrite(text, 1, len, stdout);
    free(text);
    free(logits);
    rc = 0;
done:
    if (rc) fprintf(stderr, "hello: %s\n", err.msg);
    free(ids);
    free(out);
    colibri_session_free(s);
    colibri_model_free(m);
    colibri_tokenizer_free(tok);
    return rc;
}
