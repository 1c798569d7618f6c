/* libFuzzer harness: OpenAI request bodies (oai_parse) with the small test
 * tokenizer. First input byte: even - /v1/completions, odd - chat. An
 * accepted job must fit the context. */
#include <stdlib.h>

#include "fuzz_util.h"
#include "serve/oai.h"

static colibri_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("tests/tok/small", &tok, &err)) {
        fprintf(stderr, "fuzz_oai: tests/tok/small: %s (run from the repository root)\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct oai_model m = { .id = "tiny", .tok = tok, .n_vocab = 3003, .n_ctx = 64 };
    struct oai_error e = { 0 };
    struct job *j = oai_parse(&m, data[0] & 1 ? JOB_CHAT : JOB_COMPLETION, (const char *)data + 1, size - 1, &e);
    if (j) {
        if (j->n_prompt <= 0 || j->p.max_tokens < 1 || j->n_prompt + j->p.max_tokens > m.n_ctx) abort();
        for (int i = 0; i < j->n_prompt; i++)
            if (j->prompt[i] < 0 || j->prompt[i] >= m.n_vocab) abort();
        for (int i = 0; i < j->p.n_stop; i++)
            if (!j->p.stop[i]) abort();
        job_release(j);
    } else if (e.status < 400 || !e.msg[0]) {
        abort();
    }
    return 0;
}
