/* libFuzzer harness: tiktoken.model files (colibri_tokenizer_load of a
 * directory with no tokenizer.json, src/tok/tok_tiktoken.c). The input is the
 * ranks file; tokenizer_config.json names two special tokens. Whatever loads
 * is used: a fixed text and the input's first bytes are encoded, the ids must
 * decode. A load that fails must say why. */
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "fuzz_util.h"

static char dir[512];

static const char CFG[] =
    "{\"bos_token\": \"[BOS]\", \"eos_token\": \"[EOS]\", \"added_tokens_decoder\": {}}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(dir, sizeof dir, "%s/tk", fuzz_dir());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd)) abort();
    fuzz_write(dir, "tokenizer_config.json", CFG, sizeof CFG - 1, NULL, 0);
    return 0;
}

static void use(const colibri_tokenizer *t, const char *text, size_t n)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(t, text, n, 0, &ids, &n_ids, NULL, &err) == 0) {
        char *back = NULL;
        size_t len = 0;
        if (colibri_tokenizer_decode(t, ids, n_ids, 0, &back, &len, &err)) abort();
        free(back);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(dir, "tiktoken.model", data, size, NULL, 0);
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load(dir, &t, &err) == 0) {
        static const char TEXT[] = "Hello, 世界! I'm [BOS] 123  \n\t<|reserved_token_9|>";
        use(t, TEXT, sizeof TEXT - 1);
        use(t, (const char *)data, size < 256 ? size : 256);
        colibri_tokenizer_free(t);
    } else if (!err.msg[0]) {
        abort();
    }
    return 0;
}
