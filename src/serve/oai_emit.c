/* serve/oai_emit.c - OpenAI response bodies and SSE chunks from job events;
 * see oai.h. Token texts in logprobs are each token decoded alone (so a
 * token holding part of a character shows U+FFFD there; its raw bytes are in
 * "bytes" for chat). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"
#include "tok/tok_utf8.h"

char *oai_error_json(const struct oai_error *e)
{
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->msg);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    if (e->code) cJSON_AddStringToObject(err, "code", e->code);
    else cJSON_AddNullToObject(err, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ------------------------------------------------------------ logprobs */

/* The token's own bytes (malloc'd, *n) and their sanitized text (malloc'd). */
static char *token_text(const colibri_tokenizer *t, int32_t id, char **raw, size_t *n)
{
    char *bytes = NULL;
    size_t len = 0;
    *raw = NULL;
    *n = 0;
    if (colibri_tokenizer_decode(t, &id, 1, 0, &bytes, &len, NULL)) return strdup("");
    char *txt = tok_utf8_sanitize(bytes, len, NULL);
    *raw = bytes;
    *n = len;
    return txt ? txt : strdup("");
}

static cJSON *chat_logprob_item(const colibri_tokenizer *t, int32_t id, float lp)
{
    char *raw;
    size_t n;
    char *txt = token_text(t, id, &raw, &n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "token", txt ? txt : "");
    cJSON_AddNumberToObject(o, "logprob", lp);
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)raw[i]));
    free(txt);
    free(raw);
    return o;
}

/* Logprobs of events [from, to) in the endpoint's shape; *chars is the text
 * length (code points) before `from`, advanced past `to`. */
static cJSON *logprobs_json(const struct oai_model *m, const struct job *j, int from, int to, size_t *chars)
{
    if (j->kind == JOB_CHAT) {
        cJSON *lp = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(lp, "content");
        for (int i = from; i < to; i++) {
            const struct job_event *ev = &j->ev[i];
            if (ev->id < 0) continue;
            cJSON *item = chat_logprob_item(m->tok, ev->id, ev->logprob);
            cJSON *top = cJSON_AddArrayToObject(item, "top_logprobs");
            for (int k = 0; k < ev->n_top; k++)
                cJSON_AddItemToArray(top, chat_logprob_item(m->tok, ev->top_id[k], ev->top_lp[k]));
            cJSON_AddItemToArray(content, item);
        }
        cJSON_AddNullToObject(lp, "refusal");
        return lp;
    }
    cJSON *lp = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(lp, "tokens");
    cJSON *tlp = cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON *off = cJSON_AddArrayToObject(lp, "text_offset");
    for (int i = from; i < to; i++) {
        const struct job_event *ev = &j->ev[i];
        if (ev->id >= 0) {
            char *raw;
            size_t n;
            char *txt = token_text(m->tok, ev->id, &raw, &n);
            cJSON_AddItemToArray(tokens, cJSON_CreateString(txt ? txt : ""));
            free(txt);
            free(raw);
            cJSON_AddItemToArray(tlp, cJSON_CreateNumber(ev->logprob));
            cJSON *alts = cJSON_CreateObject();
            for (int k = 0; k < ev->n_top; k++) {
                char *t2 = token_text(m->tok, ev->top_id[k], &raw, &n);
                /* two tokens with the same text keep the likelier one, as a map must */
                if (t2 && !cJSON_GetObjectItemCaseSensitive(alts, t2))
                    cJSON_AddNumberToObject(alts, t2, ev->top_lp[k]);
                free(t2);
                free(raw);
            }
            cJSON_AddItemToArray(top, alts);
            cJSON_AddItemToArray(off, cJSON_CreateNumber((double)*chars));
        }
        *chars += tok_utf8_n_chars(ev->text, ev->len);
    }
    return lp;
}

/* ------------------------------------------------------------ responses */

/* Usage as OpenAI counts it: the prompt once, the completion tokens of
 * every choice; cached tokens are choice 0's (the later choices copy the
 * prompt it computed). A group's choices have all ended when this runs. */
static void add_usage(cJSON *o, const struct job *j)
{
    int n_gen = j->n_gen, n_cached = j->n_cached;
    if (j->n_choices) {
        n_gen = 0;
        for (int i = 0; i < j->n_choices; i++) n_gen += j->choice[i]->n_gen;
        n_cached = j->choice[0]->n_cached;
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", n_cached);
}

/* llama-server's "timings": the prompt from a slot taking the request to
 * its first token (prompt_n counts the tokens computed, cache_n those
 * reused), generation from the first token to the last, so its rate counts
 * the predicted_n - 1 tokens after the first. */
static void add_timings(cJSON *o, const struct job *j)
{
    if (j->t_first <= 0 || j->t_end < j->t_first || j->t_start <= 0) return;
    double prompt_ms = (j->t_first - j->t_start) * 1e3, gen_ms = (j->t_end - j->t_first) * 1e3;
    int prompt_n = j->n_prompt - j->n_cached, steps = j->n_gen - 1;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    cJSON_AddNumberToObject(t, "cache_n", j->n_cached);
    cJSON_AddNumberToObject(t, "prompt_n", prompt_n);
    cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0);
    cJSON_AddNumberToObject(t, "prompt_per_second", prompt_ms > 0 ? prompt_n * 1e3 / prompt_ms : 0);
    cJSON_AddNumberToObject(t, "predicted_n", j->n_gen);
    cJSON_AddNumberToObject(t, "predicted_ms", gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", steps > 0 ? gen_ms / steps : 0);
    cJSON_AddNumberToObject(t, "predicted_per_second", steps > 0 && gen_ms > 0 ? steps * 1e3 / gen_ms : 0);
}

static cJSON *envelope(const struct oai_model *m, const struct job *j, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", m->id);
    return o;
}

static const char *finish_reason(const struct job *j)
{
    return j->finish == JOB_FIN_LENGTH ? "length" : "stop";
}

/* The choice object of a finished job (index j->index). */
static cJSON *choice_json(const struct oai_model *m, const struct job *j)
{
    int chat = j->kind == JOB_CHAT;
    struct strbuf text = { 0 };
    base_sb_puts(&text, "");
    for (int i = 0; i < j->n_ev; i++) base_sb_append(&text, j->ev[i].text, j->ev[i].len);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", j->index);
    cJSON *calls = NULL;
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        char *content = NULL, *reasoning = NULL, *answer = NULL;
        const char *body = text.s ? text.s : "";
        if (m->reasoning_deepseek && oai_split_reasoning(body, j->p.think_open, &reasoning, &answer)) {
            cJSON_AddStringToObject(msg, "reasoning_content", reasoning);
            body = answer;
        }
        int nc = 0;
        if (j->p.parse_tools) {
            nc = oai_parse_tool_calls(body, j->p.tools_json, &calls, &content);
            /* cut by max_tokens: the complete calls, never the markup as content */
            if (nc <= 0 && j->finish == JOB_FIN_LENGTH)
                nc = serve_oai_tool_calls_cut(body, j->p.tools_json, &calls, &content);
        }
        if (calls) {
            if (content && content[0]) cJSON_AddStringToObject(msg, "content", content);
            else cJSON_AddNullToObject(msg, "content");
            if (nc > 0) cJSON_AddItemToObject(msg, "tool_calls", calls);
            else cJSON_Delete(calls);
            if (nc <= 0) calls = NULL;
        } else {
            cJSON_AddStringToObject(msg, "content", body);
        }
        free(content);
        free(reasoning);
        free(answer);
        cJSON_AddNullToObject(msg, "refusal");
    } else {
        cJSON_AddStringToObject(c, "text", text.s ? text.s : "");
    }
    size_t chars = 0;
    if (j->p.logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs_json(m, j, 0, j->n_ev, &chars));
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", calls && j->finish == JOB_FIN_STOP ? "tool_calls" : finish_reason(j));
    base_sb_free(&text);
    return c;
}

char *oai_response(const struct oai_model *m, const struct job *j)
{
    cJSON *o = envelope(m, j, j->kind == JOB_CHAT ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    if (!j->n_choices) cJSON_AddItemToArray(choices, choice_json(m, j));
    for (int i = 0; i < j->n_choices; i++) cJSON_AddItemToArray(choices, choice_json(m, j->choice[i]));
    add_usage(o, j);
    if (!j->n_choices) add_timings(o, j);     /* per choice: each one's finish chunk when streamed */
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------ streaming */

static void emit(struct strbuf *out, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) { out->failed = 1; return; }
    base_sb_puts(out, "data: ");
    base_sb_puts(out, s);
    base_sb_puts(out, "\n\n");
    free(s);
}

static cJSON *chunk(const struct oai_model *m, const struct job *j, cJSON **choice)
{
    int chat = j->kind == JOB_CHAT;
    cJSON *o = envelope(m, j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", j->index);
    cJSON_AddItemToArray(choices, *choice);
    if (j->p.include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

void oai_stream_start(struct strbuf *out, const struct oai_model *m, const struct job *j)
{
    if (j->kind != JOB_CHAT) return;
    cJSON *c, *o = chunk(m, j, &c);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    emit(out, o);
}

/* Streaming DeepSeek's reasoning format without state between calls: the
 * split of the text of events [0, k) is a function of k, so each call sends
 * the bytes between split(from).safe and split(to).safe, each to the field
 * split(to) gives it. Bytes that may still turn out to be </think> (or the
 * opening <think>) are held back until they cannot; the end sends the rest.
 * Bytes before r0 and in [r1, c0) (markers, blanks) are not sent. */
struct rsplit { int on; size_t r0, r1, c0, safe; };

static int stream_splits(const struct oai_model *m, const struct job *j)
{
    return m->reasoning_deepseek && j->kind == JOB_CHAT && !j->p.logprobs;
}

static void reasoning_split(const struct job *j, int k, int final, struct strbuf *t, struct rsplit *rs)
{
    t->n = 0;
    base_sb_puts(t, "");
    for (int i = 0; i < k; i++) base_sb_append(t, j->ev[i].text, j->ev[i].len);
    const char *s = t->s ? t->s : "";
    size_t n = t->n, p = 0;
    while (p < n && (s[p] == ' ' || s[p] == '\n')) p++;
    *rs = (struct rsplit){ .on = 1 };
    if (!j->p.think_open) {
        size_t left = n - p;
        if (left >= 7 && !memcmp(s + p, "<think>", 7)) p += 7;
        else if (!final && left < 7 && !memcmp(s + p, "<think>", left)) { rs->r0 = rs->r1 = rs->c0 = rs->safe = 0; return; }
        else { *rs = (struct rsplit){ .on = 0, .safe = n }; return; }   /* no reasoning: all content */
    }
    rs->r0 = p;
    const char *close = memmem(s + p, n - p, "</think>", 8);
    if (close) {
        rs->r1 = (size_t)(close - s);
        size_t c = rs->r1 + 8;
        while (c < n && (s[c] == ' ' || s[c] == '\n')) c++;
        rs->c0 = c;
        rs->safe = n;
        return;
    }
    size_t hold = 0;
    if (!final)
        for (size_t h = 7; h > 0; h--)
            if (n - p >= h && !memcmp(s + n - h, "</think>", h)) { hold = h; break; }
    rs->r1 = rs->c0 = rs->safe = n - hold;
    if (rs->r1 < rs->r0) rs->r1 = rs->c0 = rs->safe = rs->r0;
}

static void send_delta(struct strbuf *out, const struct oai_model *m, const struct job *j, const char *field,
                       const char *p, size_t n)
{
    if (!n) return;
    char *txt = malloc(n + 1);
    if (!txt) { out->failed = 1; return; }
    memcpy(txt, p, n);
    txt[n] = 0;
    cJSON *c, *o = chunk(m, j, &c);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "delta"), field, txt);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    emit(out, o);
    free(txt);
}

static void stream_split_range(struct strbuf *out, const struct oai_model *m, const struct job *j, int from, int to,
                               int final, int send_content)
{
    struct strbuf t = { 0 };
    struct rsplit a, b;
    reasoning_split(j, from, 0, &t, &a);
    reasoning_split(j, to, final, &t, &b);
    size_t lo = a.safe < b.safe ? a.safe : b.safe, hi = b.safe;
    const char *s = t.s ? t.s : "";
    if (!b.on) {
        if (send_content) send_delta(out, m, j, "content", s + lo, hi - lo);
    } else {
        size_t r_lo = lo > b.r0 ? lo : b.r0, r_hi = hi < b.r1 ? hi : b.r1;
        if (r_hi > r_lo) send_delta(out, m, j, "reasoning_content", s + r_lo, r_hi - r_lo);
        size_t c_lo = lo > b.c0 ? lo : b.c0;
        if (send_content && hi > c_lo) send_delta(out, m, j, "content", s + c_lo, hi - c_lo);
    }
    base_sb_free(&t);
}

/* Streaming tool calls, also without state between calls: the content of
 * events [0, k) (after the reasoning split, when streams split) as far as it
 * is final, into *c. */
static void content_so_far(const struct oai_model *m, const struct job *j, int k, int final, struct strbuf *c)
{
    struct strbuf t = { 0 };
    c->n = 0;
    base_sb_puts(c, "");
    if (!stream_splits(m, j)) {
        for (int i = 0; i < k; i++) base_sb_append(c, j->ev[i].text, j->ev[i].len);
        return;
    }
    struct rsplit rs;
    reasoning_split(j, k, final, &t, &rs);
    const char *s = t.s ? t.s : "";
    size_t a = rs.on ? rs.c0 : 0;
    if (rs.safe > a) base_sb_append(c, s + a, rs.safe - a);
    base_sb_free(&t);
}

static void send_tool_deltas(struct strbuf *out, const struct oai_model *m, const struct job *j,
                             const struct oai_tool_view *a, const struct oai_tool_view *b)
{
    for (int i = 0; i < b->n; i++) {
        const struct oai_tool_view_call *cb = &b->call[i];
        int fresh = i >= a->n;
        size_t done = fresh ? 0 : a->call[i].args_len;
        if (done > cb->args_len) done = cb->args_len;
        for (int piece = fresh ? 0 : 1; piece < 2; piece++) {
            if (piece == 1 && cb->args_len == done) break;
            cJSON *c, *o = chunk(m, j, &c);
            cJSON *calls = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "delta"), "tool_calls");
            cJSON *tc = cJSON_CreateObject(), *fn;
            cJSON_AddItemToArray(calls, tc);
            cJSON_AddNumberToObject(tc, "index", i);
            if (piece == 0) {           /* as OpenAI streams: id, type and name first, then the arguments */
                char id[32];
                snprintf(id, sizeof id, "call_%d", i);
                cJSON_AddStringToObject(tc, "id", cb->id ? cb->id : id);
                cJSON_AddStringToObject(tc, "type", "function");
                fn = cJSON_AddObjectToObject(tc, "function");
                cJSON_AddStringToObject(fn, "name", cb->name);
                cJSON_AddStringToObject(fn, "arguments", "");
            } else {
                fn = cJSON_AddObjectToObject(tc, "function");
                cJSON_AddStringToObject(fn, "arguments", cb->args + done);
            }
            cJSON_AddNullToObject(c, "logprobs");
            cJSON_AddNullToObject(c, "finish_reason");
            emit(out, o);
        }
    }
}

/* Which calls are sent while the reply is being generated. Under a
 * tool_choice that requires a call the grammar makes the reply calls, so
 * they stream as they come: id, type and name once the name is complete,
 * then pieces of the arguments. Otherwise (tool_choice auto) a call might
 * turn out malformed, and a stream cannot take back what it sent: the calls
 * are held until the reply is complete, then sent whole (each an id, type
 * and name chunk, then its arguments) if the reply parses as calls, or as
 * content if it does not, so that a streamed reply always reassembles to
 * the non-streamed one. The text before the calls streams either way. */
static void stream_tools_range(struct strbuf *out, const struct oai_model *m, const struct job *j, int from, int to,
                               int final)
{
    if (stream_splits(m, j)) stream_split_range(out, m, j, from, to, final, 0);
    struct strbuf ca = { 0 }, cb = { 0 };
    content_so_far(m, j, from, 0, &ca);
    content_so_far(m, j, to, final, &cb);
    struct oai_tool_view va, vb;
    if (ca.failed || cb.failed || serve_oai_tool_view(ca.s, ca.n, 0, j->p.tools_json, &va)) { out->failed = 1; goto out; }
    if (serve_oai_tool_view(cb.s, cb.n, final, j->p.tools_json, &vb)) { serve_oai_tool_view_free(&va); out->failed = 1; goto out; }
    if (vb.text_end > va.text_end) send_delta(out, m, j, "content", cb.s + va.text_end, vb.text_end - va.text_end);
    cJSON *calls = NULL;
    char *content = NULL;
    int parses = final && oai_parse_tool_calls(cb.s, j->p.tools_json, &calls, &content) > 0;
    int cut = -1;               /* cut by max_tokens in a tool-call section: its complete calls */
    if (final && !parses && j->finish == JOB_FIN_LENGTH) {
        cJSON_Delete(calls);
        free(content);
        int k = serve_oai_tool_calls_cut(cb.s, j->p.tools_json, &calls, &content);
        if (calls) cut = k;
    }
    if (j->p.tools_required) send_tool_deltas(out, m, j, &va, &vb);
    else if (parses) send_tool_deltas(out, m, j, &(struct oai_tool_view){ 0 }, &vb);   /* held until now */
    else if (cut > 0) {
        for (int i = cut; i < vb.n; i++) { free(vb.call[i].name); free(vb.call[i].args); free(vb.call[i].id); }
        if (vb.n > cut) vb.n = cut;
        send_tool_deltas(out, m, j, &(struct oai_tool_view){ 0 }, &vb);
    }
    /* a reply whose calls do not parse is content, as in the whole response:
     * what was not sent as text goes out as text now */
    if (final && !parses && cut < 0 && vb.text_end < cb.n)
        send_delta(out, m, j, "content", cb.s + vb.text_end, cb.n - vb.text_end);
    cJSON_Delete(calls);
    free(content);
    serve_oai_tool_view_free(&va);
    serve_oai_tool_view_free(&vb);
out:
    base_sb_free(&ca);
    base_sb_free(&cb);
}

/* finish_reason of a tool stream: tool_calls when its whole content parses as calls. */
static const char *stream_finish_reason(const struct oai_model *m, const struct job *j)
{
    if (!j->p.parse_tools || j->finish != JOB_FIN_STOP) return finish_reason(j);
    struct strbuf c = { 0 };
    content_so_far(m, j, j->n_ev, 1, &c);
    cJSON *calls = NULL;
    char *content = NULL;
    int n = c.failed ? 0 : oai_parse_tool_calls(c.s, j->p.tools_json, &calls, &content);
    cJSON_Delete(calls);
    free(content);
    base_sb_free(&c);
    return n > 0 ? "tool_calls" : finish_reason(j);
}

void oai_stream_events(struct strbuf *out, const struct oai_model *m, const struct job *j, int from, int to,
                       size_t *text_chars)
{
    if (j->p.parse_tools) {
        for (int i = from; i < to; i++) *text_chars += tok_utf8_n_chars(j->ev[i].text, j->ev[i].len);
        stream_tools_range(out, m, j, from, to, 0);
        return;
    }
    if (stream_splits(m, j)) {
        for (int i = from; i < to; i++) *text_chars += tok_utf8_n_chars(j->ev[i].text, j->ev[i].len);
        stream_split_range(out, m, j, from, to, 0, 1);
        return;
    }
    for (int i = from; i < to; i++) {
        const struct job_event *ev = &j->ev[i];
        int has_lp = j->p.logprobs && ev->id >= 0;
        if (!ev->len && !has_lp) continue;
        cJSON *c, *o = chunk(m, j, &c);
        if (j->kind == JOB_CHAT) cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "delta"), "content", ev->text);
        else cJSON_AddStringToObject(c, "text", ev->text);
        if (has_lp) cJSON_AddItemToObject(c, "logprobs", logprobs_json(m, j, i, i + 1, text_chars));
        else {
            *text_chars += tok_utf8_n_chars(ev->text, ev->len);
            cJSON_AddNullToObject(c, "logprobs");
        }
        cJSON_AddNullToObject(c, "finish_reason");
        emit(out, o);
    }
}

void serve_oai_stream_finish(struct strbuf *out, const struct oai_model *m, const struct job *j)
{
    if (j->p.parse_tools) stream_tools_range(out, m, j, j->n_ev, j->n_ev, 1);    /* what was held back */
    else if (stream_splits(m, j)) stream_split_range(out, m, j, j->n_ev, j->n_ev, 1, 1);
    cJSON *c, *o = chunk(m, j, &c);
    if (j->kind == JOB_CHAT) cJSON_AddObjectToObject(c, "delta");
    else cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", stream_finish_reason(m, j));
    add_timings(o, j);
    emit(out, o);
}

void oai_stream_end(struct strbuf *out, const struct oai_model *m, const struct job *j)
{
    if (!j->n_choices) serve_oai_stream_finish(out, m, j);
    if (j->p.include_usage) {
        cJSON *o = envelope(m, j, j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(o, "choices");
        add_usage(o, j);
        emit(out, o);
    }
    base_sb_puts(out, "data: [DONE]\n\n");
}

void oai_stream_error(struct strbuf *out, const struct oai_error *e)
{
    char *s = oai_error_json(e);
    if (!s) { out->failed = 1; return; }
    base_sb_puts(out, "data: ");
    base_sb_puts(out, s);
    base_sb_puts(out, "\n\ndata: [DONE]\n\n");
    free(s);
}
