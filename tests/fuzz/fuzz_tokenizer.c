/* libFuzzer harness: tokenizer files and chat rendering
 * (colibri_tokenizer_load, encode, decode, colibri_chat_render). The fixed
 * files are tests/fuzz/tok_mini's (tests/tok/small's byte-level BPE cut to
 * 330 tokens, so a load takes well under a millisecond). First input byte,
 * mod 4, says what the rest is:
 *   0  tokenizer.json            (tokenizer_config.json: tok_mini's)
 *   1  tokenizer_config.json     (chat template, special tokens; tokenizer.json: tok_mini's)
 *   2  generation_config.json    (both others: tok_mini's)
 *   3  chat messages, NUL-separated "role\0content\0..." (tok_mini with a
 *      DeepSeek-V3 chat template)
 * Whatever loads is then used: the rest of the input is encoded, the ids
 * must decode, and a fixed chat is rendered. */
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "fuzz_util.h"

static char *small_json, *small_cfg;
static size_t small_json_n, small_cfg_n;
static char dir_a[512], dir_chat[512];
static colibri_tokenizer *chat_tok;

static const char CHAT_CFG[] =
    "{\"bos_token\": \"<|bos|>\", \"eos_token\": \"<|eos|>\", \"add_bos_token\": true, \"chat_template\": "
    "\"{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
    "{% else %}<｜Assistant｜>{{ m['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}\"}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    small_json = fuzz_slurp("tests/fuzz/tok_mini/tokenizer.json", &small_json_n);
    small_cfg = fuzz_slurp("tests/fuzz/tok_mini/tokenizer_config.json", &small_cfg_n);
    snprintf(dir_a, sizeof dir_a, "%s/a", fuzz_dir());
    snprintf(dir_chat, sizeof dir_chat, "%s/chat", fuzz_dir());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s'", dir_a, dir_chat);
    if (system(cmd)) abort();
    fuzz_write(dir_chat, "tokenizer.json", small_json, small_json_n, NULL, 0);
    fuzz_write(dir_chat, "tokenizer_config.json", CHAT_CFG, sizeof CHAT_CFG - 1, NULL, 0);
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load(dir_chat, &chat_tok, &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    return 0;
}

static void use(const colibri_tokenizer *t, const char *text, size_t n)
{
    int32_t *ids = NULL;
    size_t n_ids = 0, n_rep = 0;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_encode(t, text, n, COLIBRI_ENCODE_NO_PARSE_SPECIAL, &ids, &n_ids, &n_rep, &err) == 0) {
        char *back = NULL;
        size_t len = 0;
        /* ids the encoder gave are ids the decoder takes */
        if (colibri_tokenizer_decode(t, ids, n_ids, 0, &back, &len, &err)) abort();
        if (strlen(back) > len) abort();
        free(back);
        free(ids);
    }
    static const struct colibri_chat_msg msgs[] = {
        { "system", "be brief" }, { "user", "hi <think>x</think>" }, { "assistant", "a</think>b" }, { "tool", "t" },
    };
    char *s = NULL;
    size_t len = 0;
    if (colibri_chat_render(t, msgs, 4, 1, &s, &len, &err) == 0) {
        if (strlen(s) != len) abort();
        free(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    int mode = data[0] % 4;
    if (mode == 3) {
        struct colibri_chat_msg msgs[16];
        size_t k = 0, i = 0;
        char *copy = malloc(n + 2);
        if (!copy) return 0;
        memcpy(copy, rest, n);
        copy[n] = copy[n + 1] = 0;
        while (i < n && k < 16) {
            msgs[k].role = copy + i;
            i += strlen(copy + i) + 1;
            msgs[k].content = i <= n ? copy + i : "";
            i += strlen(msgs[k].content) + 1;
            k++;
        }
        char *s = NULL;
        size_t len = 0;
        struct colibri_err err = { 0 };
        if (colibri_chat_render(chat_tok, msgs, k, data[0] & 4, &s, &len, &err) == 0) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            if (colibri_tokenizer_encode(chat_tok, s, len, 0, &ids, &n_ids, NULL, &err) == 0) free(ids);
            free(s);
        }
        free(copy);
        return 0;
    }
    static const char *const names[3] = { "tokenizer.json", "tokenizer_config.json", "generation_config.json" };
    fuzz_write(dir_a, "tokenizer.json", mode == 0 ? rest : small_json, mode == 0 ? n : small_json_n, NULL, 0);
    fuzz_write(dir_a, "tokenizer_config.json", mode == 1 ? rest : small_cfg, mode == 1 ? n : small_cfg_n, NULL, 0);
    char path[600];
    snprintf(path, sizeof path, "%s/generation_config.json", dir_a);
    if (mode == 2) fuzz_write(dir_a, names[2], rest, n, NULL, 0);
    else unlink(path);
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load(dir_a, &t, &err) == 0) {
        use(t, rest, n < 512 ? n : 512);
        colibri_tokenizer_free(t);
    } else if (!err.msg[0]) {
        abort();
    }
    return 0;
}
