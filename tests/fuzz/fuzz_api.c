/* libFuzzer harness: the agent APIs' bodies, /v1/messages (Anthropic) and
 * /v1/responses (OpenAI Responses), translated to a chat request
 * (serve_api_request) and parsed as the server does (oai_parse with the
 * small test tokenizer), and their answers (serve_api_response and the SSE
 * stream translation) fed arbitrary chat completions.
 * First input byte: bit 0 picks the API (0 Anthropic, 1 Responses); bit 1
 * treats the rest as a chat completion's output (a JSON body, then the same
 * bytes as SSE chunks) instead of a request. The Responses store holds one
 * conversation under the id "resp_fuzz", so previous_response_id reaches the
 * continuation path. A refused request must carry a 4xx status and a
 * message; a translated one must be a JSON object that oai_parse accepts or
 * refuses the same way. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "base/strbuf.h"
#include "fuzz_util.h"
#include "serve/api_conv.h"
#include "serve/oai.h"
#include "serve/resp_store.h"

static colibri_tokenizer *tok;
static struct resp_store *store;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct colibri_err err = { 0 };
    if (colibri_tokenizer_load("tests/tok/small", &tok, &err)) {
        fprintf(stderr, "fuzz_api: tests/tok/small: %s (run from the repository root)\n", err.msg);
        abort();
    }
    store = serve_resp_store_new();
    if (!store || serve_resp_store_put(store, "resp_fuzz",
                                       "[{\"role\":\"user\",\"content\":\"hi\"},"
                                       "{\"role\":\"assistant\",\"content\":\"hello\"}]"))
        abort();
    return 0;
}

static void request(enum serve_api api, const char *body, size_t len)
{
    struct oai_error e = { 0 };
    struct serve_api_turn turn = { .store = store };
    int stream = 0;
    char *chat = serve_api_request(api, body, len, &stream, &turn, &e);
    if (!chat) {
        if (e.status < 400 || e.status > 499 || !e.msg[0]) abort();
        serve_api_turn_clear(&turn);
        return;
    }
    cJSON *obj = cJSON_Parse(chat);
    if (!cJSON_IsObject(obj)) abort();
    cJSON_Delete(obj);
    struct oai_model m = { .id = "tiny", .tok = tok, .n_vocab = 3003, .n_ctx = 64 };
    struct oai_error pe = { 0 };
    struct job *j = oai_parse(&m, JOB_CHAT, chat, strlen(chat), &pe);
    if (j) {
        for (int i = 0; i < j->n_prompt; i++)
            if (j->prompt[i] < 0 || j->prompt[i] >= m.n_vocab) abort();
        job_release(j);
    } else if (pe.status < 400 || !pe.msg[0]) {
        abort();
    }
    free(chat);
    serve_api_turn_clear(&turn);
}

static void answer(enum serve_api api, const char *body, size_t len)
{
    char *text = malloc(len + 1);
    if (!text) return;
    memcpy(text, body, len);
    text[len] = 0;
    struct serve_api_turn turn = { .store = store };
    free(serve_api_response(api, text, &turn));
    serve_api_turn_clear(&turn);
    struct serve_api_stream *s = serve_api_stream_new(api, "tiny", 3, NULL);
    if (s) {
        struct strbuf in = { 0 }, out = { 0 };
        /* in two pieces, as chunks arrive over a connection */
        size_t half = len / 2;
        base_sb_append(&in, body, half);
        serve_api_stream_feed(s, &in, &out);
        base_sb_append(&in, body + half, len - half);
        serve_api_stream_feed(s, &in, &out);
        base_sb_free(&in);
        base_sb_free(&out);
        serve_api_stream_free(s);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    enum serve_api api = data[0] & 1 ? SERVE_API_RESPONSES : SERVE_API_ANTHROPIC;
    if (data[0] & 2) answer(api, (const char *)data + 1, size - 1);
    else request(api, (const char *)data + 1, size - 1);
    return 0;
}
