/* serve/anthropic.c - Anthropic's Messages API (/v1/messages) over the chat
 * engine (contract in api_conv.h).
 *
 * Request: system (a string or text blocks) becomes the system message;
 * messages' content blocks map to the chat format: text to text parts,
 * tool_use blocks to the assistant's tool_calls (input serialized as the
 * arguments), tool_result blocks to tool messages (in their order, before
 * the user's other text), thinking blocks to reasoning_content. tools
 * (name, description, input_schema) become functions; tool_choice auto /
 * any / tool / none become auto / required / the named function / none,
 * disable_parallel_tool_use parallel_tool_calls false; thinking enabled or
 * disabled becomes reasoning_effort high or none (so a template without a
 * reasoning switch refuses it by name); stop_sequences become stop.
 * Images, documents, server tools, and any field Anthropic's API has that
 * colibri does not implement are refused by name; metadata is accepted
 * (an annotation).
 *
 * Response: content blocks in order thinking, text, tool_use; stop_reason
 * end_turn, max_tokens or tool_use. The stream is Anthropic's event
 * sequence: message_start, per block content_block_start, its deltas
 * (thinking_delta then a signature_delta, text_delta, input_json_delta) and
 * content_block_stop, then message_delta (stop_reason, usage) and
 * message_stop; an error mid-stream is an error event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/api_conv.h"

#define BAD "invalid_request_error"

static int refuse(struct oai_error *e, const char *param, const char *fmt, const char *a)
{
    oai_error_set(e, 400, BAD, NULL, param, fmt, a);
    return -1;
}

/* A text block's text, or NULL when b is not one. */
static const char *block_text(const cJSON *b)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type"), *x = cJSON_GetObjectItemCaseSensitive(b, "text");
    return cJSON_IsString(t) && !strcmp(t->valuestring, "text") && cJSON_IsString(x) ? x->valuestring : NULL;
}

/* content (a string or blocks) as chat text parts appended to parts; every
 * block must be text. */
static int text_parts(const cJSON *content, cJSON *parts, const char *where, struct oai_error *e)
{
    if (cJSON_IsString(content)) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "text");
        cJSON_AddStringToObject(p, "text", content->valuestring);
        cJSON_AddItemToArray(parts, p);
        return 0;
    }
    if (!cJSON_IsArray(content)) return refuse(e, "messages", "'%s' must be a string or an array of blocks", where);
    for (const cJSON *b = content->child; b; b = b->next) {
        const char *t = block_text(b);
        if (!t) return refuse(e, "messages", "'%s' holds a block colibri cannot take here (only text)", where);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "text");
        cJSON_AddStringToObject(p, "text", t);
        cJSON_AddItemToArray(parts, p);
    }
    return 0;
}

static int convert_message(const cJSON *m, int i, cJSON *out, struct oai_error *e)
{
    char where[64];
    snprintf(where, sizeof where, "messages[%d]", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
        return refuse(e, "messages", "'%s.role' must be \"user\" or \"assistant\"", where);
    int user = !strcmp(role->valuestring, "user");
    if (cJSON_IsString(content)) {
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", role->valuestring);
        cJSON_AddStringToObject(msg, "content", content->valuestring);
        cJSON_AddItemToArray(out, msg);
        return 0;
    }
    if (!cJSON_IsArray(content)) return refuse(e, "messages", "'%s.content' must be a string or an array of blocks", where);
    cJSON *parts = cJSON_CreateArray(), *calls = cJSON_CreateArray();
    struct strbuf reasoning = { 0 };
    int k = 0, rc = 0;
    for (const cJSON *b = content->child; b && !rc; b = b->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        snprintf(where, sizeof where, "messages[%d].content[%d]", i, k);
        if (!strcmp(t, "text")) {
            rc = text_parts(cJSON_GetObjectItemCaseSensitive(b, "text"), parts, where, e);
        } else if (!strcmp(t, "tool_result") && user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id"), *c = cJSON_GetObjectItemCaseSensitive(b, "content");
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            if (!cJSON_IsString(id)) { rc = refuse(e, "messages", "'%s.tool_use_id' must be a string", where); break; }
            cJSON *tm = cJSON_CreateObject(), *tp = cJSON_CreateArray();
            cJSON_AddStringToObject(tm, "role", "tool");
            cJSON_AddStringToObject(tm, "tool_call_id", id->valuestring);
            if (cJSON_IsTrue(err)) {    /* the model must see that the tool failed */
                cJSON *p = cJSON_CreateObject();
                cJSON_AddStringToObject(p, "type", "text");
                cJSON_AddStringToObject(p, "text", "Error: ");
                cJSON_AddItemToArray(tp, p);
            }
            if (c && (rc = text_parts(c, tp, where, e))) { cJSON_Delete(tm); cJSON_Delete(tp); break; }
            cJSON_AddItemToObject(tm, "content", tp);
            cJSON_AddItemToArray(out, tm);      /* tool results come before the user's text */
        } else if (!strcmp(t, "tool_use") && !user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input)) {
                rc = refuse(e, "messages", "'%s' needs id, name (strings) and input (an object)", where);
                break;
            }
            char *args = cJSON_PrintUnformatted(input);
            cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            cJSON_AddStringToObject(tc, "id", id->valuestring);
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON_AddStringToObject(fn, "name", name->valuestring);
            cJSON_AddStringToObject(fn, "arguments", args ? args : "{}");
            free(args);
            cJSON_AddItemToObject(tc, "function", fn);
            cJSON_AddItemToArray(calls, tc);
        } else if (!strcmp(t, "thinking") && !user) {
            const cJSON *th = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            if (cJSON_IsString(th)) base_sb_puts(&reasoning, th->valuestring);
        } else if (!strcmp(t, "redacted_thinking") && !user) {
            /* encrypted reasoning of another model: nothing this model can read */
        } else {
            rc = refuse(e, "messages", "'%s': content blocks of this type are not supported by colibri (text, "
                        "tool_use, tool_result, thinking)", where);
        }
    }
    if (!rc && (cJSON_GetArraySize(parts) || cJSON_GetArraySize(calls) || reasoning.n)) {
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", role->valuestring);
        if (cJSON_GetArraySize(parts)) { cJSON_AddItemToObject(msg, "content", parts); parts = NULL; }
        else cJSON_AddNullToObject(msg, "content");
        if (cJSON_GetArraySize(calls)) { cJSON_AddItemToObject(msg, "tool_calls", calls); calls = NULL; }
        if (reasoning.n) cJSON_AddStringToObject(msg, "reasoning_content", reasoning.s);
        cJSON_AddItemToArray(out, msg);
    }
    cJSON_Delete(parts);
    cJSON_Delete(calls);
    base_sb_free(&reasoning);
    return rc;
}

static int convert_tools(const cJSON *tools, cJSON *out, struct oai_error *e)
{
    if (!cJSON_IsArray(tools)) return refuse(e, "tools", "'%s' must be an array", "tools");
    cJSON *arr = cJSON_AddArrayToObject(out, "tools");
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description"), *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        if (type && !cJSON_IsNull(type) && (!cJSON_IsString(type) || strcmp(type->valuestring, "custom")))
            return refuse(e, "tools", "server tools ('%s') are not supported by colibri: give client tools "
                          "(name, description, input_schema)", cJSON_IsString(type) ? type->valuestring : "?");
        if (!cJSON_IsString(name) || !cJSON_IsObject(schema))
            return refuse(e, "tools", "'%s' needs name (a string) and input_schema (an object)", "tools[]");
        cJSON *fn = cJSON_CreateObject(), *w = cJSON_CreateObject();
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
        cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, 1));
        cJSON_AddStringToObject(w, "type", "function");
        cJSON_AddItemToObject(w, "function", fn);
        cJSON_AddItemToArray(arr, w);
    }
    return 0;
}

static int convert_tool_choice(const cJSON *tc, cJSON *out, struct oai_error *e)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type"), *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (!strcmp(t, "auto") || !strcmp(t, "none")) cJSON_AddStringToObject(out, "tool_choice", t);
    else if (!strcmp(t, "any")) cJSON_AddStringToObject(out, "tool_choice", "required");
    else if (!strcmp(t, "tool") && cJSON_IsString(name)) {
        cJSON *c = cJSON_AddObjectToObject(out, "tool_choice"), *fn;
        cJSON_AddStringToObject(c, "type", "function");
        fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", name->valuestring);
    } else {
        return refuse(e, "tool_choice", "'tool_choice.type' must be auto, any, tool (with a name) or none, got '%s'", t);
    }
    if (cJSON_IsTrue(dp)) cJSON_AddFalseToObject(out, "parallel_tool_calls");
    return 0;
}

char *serve_anthropic_request(const char *body, size_t len, int *stream, struct oai_error *e)
{
    cJSON *root = serve_oai_parse_object(body, len, e);
    if (!root) return NULL;
    cJSON *out = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
    int rc = 0, has_max = 0;
    *stream = 0;
    for (const cJSON *f = root->child; f && !rc; f = f->next) {
        const char *k = f->string;
        if (!strcmp(k, "model") || !strcmp(k, "temperature") || !strcmp(k, "top_p") || !strcmp(k, "top_k")) {
            cJSON_AddItemToObject(out, k, cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "max_tokens")) {
            has_max = 1;
            cJSON_AddItemToObject(out, k, cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "stream")) {
            *stream = cJSON_IsTrue(f);
            cJSON_AddItemToObject(out, k, cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "stop_sequences")) {
            cJSON_AddItemToObject(out, "stop", cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "system")) {
            cJSON *sm = cJSON_CreateObject(), *parts = cJSON_CreateArray();
            cJSON_AddStringToObject(sm, "role", "system");
            cJSON_AddItemToObject(sm, "content", parts);
            cJSON_AddItemToArray(msgs, sm);
            rc = text_parts(f, parts, "system", e);
        } else if (!strcmp(k, "messages")) {
            if (!cJSON_IsArray(f)) { rc = refuse(e, "messages", "'%s' must be an array", "messages"); break; }
            int i = 0;
            for (const cJSON *m = f->child; m && !rc; m = m->next, i++) rc = convert_message(m, i, msgs, e);
        } else if (!strcmp(k, "tools")) {
            rc = convert_tools(f, out, e);
        } else if (!strcmp(k, "tool_choice")) {
            rc = convert_tool_choice(f, out, e);
        } else if (!strcmp(k, "thinking")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
            const char *v = cJSON_IsString(t) ? t->valuestring : "";
            if (strcmp(v, "enabled") && strcmp(v, "disabled"))
                rc = refuse(e, "thinking", "'thinking.type' must be enabled or disabled, got '%s'", v);
            else cJSON_AddStringToObject(out, "reasoning_effort", strcmp(v, "enabled") ? "none" : "high");
        } else if (!strcmp(k, "metadata") || !strcmp(k, "service_tier")) {
            /* annotations: they change nothing the model does */
        } else {
            rc = refuse(e, k, "'%s' is not supported by colibri's /v1/messages", k);
        }
    }
    if (!rc && !has_max) rc = refuse(e, "max_tokens", "'%s' is required", "max_tokens");
    if (!rc && !cJSON_GetArraySize(msgs)) rc = refuse(e, "messages", "'%s' must hold at least one message", "messages");
    char *s = NULL;
    if (!rc) {
        cJSON_AddItemToObject(out, "messages", msgs);
        msgs = NULL;
        if (*stream) cJSON_AddTrueToObject(cJSON_AddObjectToObject(out, "stream_options"), "include_usage");
        if (!(s = cJSON_PrintUnformatted(out))) oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    cJSON_Delete(msgs);
    cJSON_Delete(out);
    cJSON_Delete(root);
    return s;
}

/* ------------------------------------------------------------ responses */

static const char *stop_reason(const char *finish)
{
    return !strcmp(finish, "length") ? "max_tokens" : !strcmp(finish, "tool_calls") ? "tool_use" : "end_turn";
}

/* msg_ + the chat id's hex part */
static void message_id(const cJSON *chat, char *id, size_t n)
{
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(chat, "id");
    const char *s = cJSON_IsString(cid) ? cid->valuestring : "0";
    const char *dash = strchr(s, '-');
    snprintf(id, n, "msg_%s", dash ? dash + 1 : s);
}

static cJSON *usage_json(const cJSON *u)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens"), *c = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
    cJSON_AddNumberToObject(o, "input_tokens", cJSON_IsNumber(p) ? p->valuedouble : 0);
    cJSON_AddNumberToObject(o, "output_tokens", cJSON_IsNumber(c) ? c->valuedouble : 0);
    return o;
}

static cJSON *tool_use_block(const cJSON *tc)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", cJSON_IsString(id) ? id->valuestring : "");
    cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
    cJSON *input = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    cJSON_AddItemToObject(b, "input", cJSON_IsObject(input) ? input : (cJSON_Delete(input), cJSON_CreateObject()));
    return b;
}

char *serve_anthropic_response(const char *chat_json)
{
    cJSON *chat = cJSON_Parse(chat_json);
    if (!chat) return NULL;
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message"), *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content"), *ct = cJSON_GetObjectItemCaseSensitive(msg, "content");
    cJSON *o = cJSON_CreateObject(), *content;
    char id[96];
    message_id(chat, id, sizeof id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddItemToObject(o, "model", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(chat, "model"), 1));
    content = cJSON_AddArrayToObject(o, "content");
    if (cJSON_IsString(rc) && rc->valuestring[0]) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", rc->valuestring);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(content, b);
    }
    if (cJSON_IsString(ct) && ct->valuestring[0]) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", ct->valuestring);
        cJSON_AddItemToArray(content, b);
    }
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) cJSON_AddItemToArray(content, tool_use_block(tc));
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(cJSON_IsString(fin) ? fin->valuestring : "stop"));
    cJSON_AddNullToObject(o, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", usage_json(cJSON_GetObjectItemCaseSensitive(chat, "usage")));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    cJSON_Delete(chat);
    return s;
}

char *serve_anthropic_error(const struct oai_error *e)
{
    const char *type = e->status == 401 ? "authentication_error" : e->status == 403 ? "permission_error"
                     : e->status == 404 ? "not_found_error" : e->status == 413 ? "request_too_large"
                     : e->status == 429 ? "rate_limit_error" : e->status == 503 ? "overloaded_error"
                     : e->status >= 500 ? "api_error" : "invalid_request_error";
    cJSON *o = cJSON_CreateObject(), *er = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "error");
    cJSON_AddStringToObject(er, "type", type);
    char msg[sizeof e->msg + 64];     /* the request said thinking; the chat layer names what it became */
    snprintf(msg, sizeof msg, "%s%s", !strcmp(e->param, "reasoning_effort") ? "'thinking' (as reasoning_effort): " : "",
             e->msg);
    cJSON_AddStringToObject(er, "message", msg);
    cJSON_AddItemToObject(o, "error", er);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------ streaming */

enum { BLK_NONE = 0, BLK_THINKING, BLK_TEXT, BLK_TOOL };

static void event(struct strbuf *out, const char *name, cJSON *data)
{
    char *s = cJSON_PrintUnformatted(data);
    if (s) base_sb_appendf(out, "event: %s\ndata: %s\n\n", name, s);
    else out->failed = 1;
    free(s);
    cJSON_Delete(data);
}

static cJSON *typed(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void close_block(struct serve_api_stream *s, struct strbuf *out)
{
    if (s->kind == BLK_NONE) return;
    if (s->kind == BLK_THINKING) {     /* no signature: colibri does not sign reasoning */
        cJSON *d = typed("content_block_delta"), *dd = typed("signature_delta");
        cJSON_AddNumberToObject(d, "index", s->block);
        cJSON_AddStringToObject(dd, "signature", "");
        cJSON_AddItemToObject(d, "delta", dd);
        event(out, "content_block_delta", d);
    }
    cJSON *d = typed("content_block_stop");
    cJSON_AddNumberToObject(d, "index", s->block);
    event(out, "content_block_stop", d);
    s->kind = BLK_NONE;
}

static void open_block(struct serve_api_stream *s, struct strbuf *out, int kind, cJSON *block)
{
    close_block(s, out);
    s->block = s->n_blocks++;
    s->kind = kind;
    cJSON *d = typed("content_block_start");
    cJSON_AddNumberToObject(d, "index", s->block);
    cJSON_AddItemToObject(d, "content_block", block);
    event(out, "content_block_start", d);
}

static void delta(struct serve_api_stream *s, struct strbuf *out, const char *type, const char *key, const char *text)
{
    cJSON *d = typed("content_block_delta"), *dd = typed(type);
    cJSON_AddNumberToObject(d, "index", s->block);
    cJSON_AddStringToObject(dd, key, text);
    cJSON_AddItemToObject(d, "delta", dd);
    event(out, "content_block_delta", d);
}

static void start(struct serve_api_stream *s, struct strbuf *out, const cJSON *chunk)
{
    if (s->started) return;
    s->started = 1;
    cJSON *m = typed("message"), *d = typed("message_start"), *u = cJSON_CreateObject();
    char id[96];
    message_id(chunk, id, sizeof id);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", s->model);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddNumberToObject(u, "input_tokens", s->n_prompt);
    cJSON_AddNumberToObject(u, "output_tokens", 0);
    cJSON_AddItemToObject(m, "usage", u);
    cJSON_AddItemToObject(d, "message", m);
    event(out, "message_start", d);
    event(out, "ping", typed("ping"));
}

void serve_anthropic_stream_chunk(struct serve_api_stream *s, const cJSON *chunk, struct strbuf *out)
{
    if (!chunk) {       /* [DONE] */
        if (!s->started) start(s, out, NULL);
        close_block(s, out);
        cJSON *d = typed("message_delta"), *dd = cJSON_CreateObject(), *u = cJSON_CreateObject();
        cJSON_AddStringToObject(dd, "stop_reason", stop_reason(s->finish[0] ? s->finish : "stop"));
        cJSON_AddNullToObject(dd, "stop_sequence");
        cJSON_AddItemToObject(d, "delta", dd);
        cJSON_AddNumberToObject(u, "input_tokens", s->n_prompt);
        cJSON_AddNumberToObject(u, "output_tokens", s->out_tokens);
        cJSON_AddItemToObject(d, "usage", u);
        event(out, "message_delta", d);
        event(out, "message_stop", typed("message_stop"));
        return;
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(chunk, "error");
    if (err) {
        cJSON *d = typed("error"), *er = typed("api_error");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
        cJSON_AddStringToObject(er, "message", cJSON_IsString(msg) ? msg->valuestring : "error");
        cJSON_AddItemToObject(d, "error", er);
        event(out, "error", d);
        s->failed = 1;
        return;
    }
    start(s, out, chunk);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(chunk, "usage");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
    if (cJSON_IsNumber(ct)) s->out_tokens = serve_api_count(ct);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta"), *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
    if (cJSON_IsString(fin)) snprintf(s->finish, sizeof s->finish, "%s", fin->valuestring);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content"), *c = cJSON_GetObjectItemCaseSensitive(d, "content");
    if (cJSON_IsString(r) && r->valuestring[0]) {
        if (s->kind != BLK_THINKING) {
            cJSON *b = typed("thinking");
            cJSON_AddStringToObject(b, "thinking", "");
            cJSON_AddStringToObject(b, "signature", "");
            open_block(s, out, BLK_THINKING, b);
        }
        delta(s, out, "thinking_delta", "thinking", r->valuestring);
    }
    if (cJSON_IsString(c) && c->valuestring[0]) {
        if (s->kind != BLK_TEXT) {
            cJSON *b = typed("text");
            cJSON_AddStringToObject(b, "text", "");
            open_block(s, out, BLK_TEXT, b);
        }
        delta(s, out, "text_delta", "text", c->valuestring);
    }
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(d, "tool_calls")) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(tc, "index"), *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        int k = serve_api_count(idx);
        if (s->kind != BLK_TOOL || s->tool_index != k) {
            cJSON *b = typed("tool_use");
            cJSON_AddStringToObject(b, "id", cJSON_IsString(id) ? id->valuestring : "");
            cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
            cJSON_AddObjectToObject(b, "input");
            open_block(s, out, BLK_TOOL, b);
            s->tool_index = k;
        }
        if (cJSON_IsString(args) && args->valuestring[0]) delta(s, out, "input_json_delta", "partial_json", args->valuestring);
    }
}
