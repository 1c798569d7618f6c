/* serve/responses.c - OpenAI's Responses API (/v1/responses) over the chat
 * engine (contract in api_conv.h).
 *
 * Request: instructions become the system message; input (a string, or
 * items) becomes the conversation: messages (roles user, system, developer
 * as system, assistant; input_text / output_text parts), function_call
 * items the assistant's tool_calls (consecutive ones in one message),
 * function_call_output items tool messages, reasoning items the next
 * assistant message's reasoning_content. Flat function tools become chat
 * tools; tool_choice, parallel_tool_calls, temperature, top_p carry over;
 * max_output_tokens is max_tokens; text.format json_object / json_schema is
 * response_format; reasoning.effort is reasoning_effort. Responses are
 * kept (resp_store.h: in memory, the latest ones) unless store is false:
 * previous_response_id puts the conversation of that response (its input
 * items and its output, not its instructions, as OpenAI's API does) before
 * the new input, and an id the server does not hold is refused by name. The
 * prompt cache then reuses what the conversation's prompt shares with the
 * last one. Other items, tools and fields are refused by name; metadata,
 * user, truncation "disabled", service_tier and include are accepted (they
 * change nothing the model does).
 *
 * Response: output items reasoning, message (output_text), function_call;
 * status completed, or incomplete with reason max_output_tokens. The
 * stream is the Responses event sequence: response.created and
 * .in_progress, per item output_item.added, its deltas
 * (reasoning_text.delta, content_part.added + output_text.delta,
 * function_call_arguments.delta), their .done events and output_item.done,
 * then response.completed (or .incomplete) with the whole response. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve/api_conv.h"
#include "serve/resp_store.h"

#define BAD "invalid_request_error"

static int refuse(struct oai_error *e, const char *param, const char *fmt, const char *a)
{
    oai_error_set(e, 400, BAD, NULL, param, fmt, a);
    return -1;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* content: a string or input_text / output_text parts, as chat text parts. */
static int content_parts(const cJSON *c, cJSON *msg, const char *where, struct oai_error *e)
{
    if (cJSON_IsString(c)) { cJSON_AddStringToObject(msg, "content", c->valuestring); return 0; }
    if (!cJSON_IsArray(c)) return refuse(e, "input", "'%s.content' must be a string or an array of parts", where);
    cJSON *parts = cJSON_AddArrayToObject(msg, "content");
    for (const cJSON *p = c->child; p; p = p->next) {
        const char *t = str(p, "type"), *text = str(p, "text");
        if (!t || (strcmp(t, "input_text") && strcmp(t, "output_text")) || !text)
            return refuse(e, "input", "'%s' holds a part colibri cannot take (only input_text, output_text)", where);
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "type", "text");
        cJSON_AddStringToObject(q, "text", text);
        cJSON_AddItemToArray(parts, q);
    }
    return 0;
}

/* The last message of msgs when it is an assistant's that may take more
 * tool calls, else a new assistant message. */
static cJSON *assistant_for_calls(cJSON *msgs)
{
    int n = cJSON_GetArraySize(msgs);
    cJSON *last = n ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    const char *role = str(last, "role");
    if (role && !strcmp(role, "assistant")) return last;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddNullToObject(m, "content");
    cJSON_AddItemToArray(msgs, m);
    return m;
}

static int convert_input(const cJSON *input, cJSON *msgs, struct oai_error *e)
{
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        cJSON_AddItemToArray(msgs, m);
        return 0;
    }
    if (!cJSON_IsArray(input)) return refuse(e, "input", "'%s' must be a string or an array of items", "input");
    char *reasoning = NULL;     /* a reasoning item waits for its assistant message */
    int i = 0, rc = 0;
    for (const cJSON *it = input->child; it && !rc; it = it->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "input[%d]", i);
        const char *type = str(it, "type"), *role = str(it, "role");
        if ((!type || !strcmp(type, "message")) && role) {
            int sys = !strcmp(role, "system") || !strcmp(role, "developer");
            if (!sys && strcmp(role, "user") && strcmp(role, "assistant")) {
                rc = refuse(e, "input", "'%s.role' must be user, assistant, system or developer", where);
                break;
            }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", sys ? "system" : role);
            cJSON_AddItemToArray(msgs, m);
            rc = content_parts(cJSON_GetObjectItemCaseSensitive(it, "content"), m, where, e);
            if (!rc && reasoning && !strcmp(role, "assistant")) {
                cJSON_AddStringToObject(m, "reasoning_content", reasoning);
                free(reasoning);
                reasoning = NULL;
            }
        } else if (type && !strcmp(type, "function_call")) {
            const char *id = str(it, "call_id"), *name = str(it, "name"), *args = str(it, "arguments");
            if (!id || !name || !args) { rc = refuse(e, "input", "'%s' needs call_id, name and arguments", where); break; }
            cJSON *m = assistant_for_calls(msgs);
            cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
            if (!calls) calls = cJSON_AddArrayToObject(m, "tool_calls");
            cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            cJSON_AddStringToObject(tc, "id", id);
            cJSON_AddStringToObject(tc, "type", "function");
            cJSON_AddStringToObject(fn, "name", name);
            cJSON_AddStringToObject(fn, "arguments", args);
            cJSON_AddItemToObject(tc, "function", fn);
            cJSON_AddItemToArray(calls, tc);
            if (reasoning) {
                cJSON_AddStringToObject(m, "reasoning_content", reasoning);
                free(reasoning);
                reasoning = NULL;
            }
        } else if (type && !strcmp(type, "function_call_output")) {
            const char *id = str(it, "call_id"), *out = str(it, "output");
            if (!id || !out) { rc = refuse(e, "input", "'%s' needs call_id and output (a string)", where); break; }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "tool");
            cJSON_AddStringToObject(m, "tool_call_id", id);
            cJSON_AddStringToObject(m, "content", out);
            cJSON_AddItemToArray(msgs, m);
        } else if (type && !strcmp(type, "reasoning")) {
            struct strbuf b = { 0 };
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(it, "content")) if (str(p, "text")) base_sb_puts(&b, str(p, "text"));
            if (!b.n) cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(it, "summary"))
                if (str(p, "text")) base_sb_puts(&b, str(p, "text"));
            free(reasoning);
            reasoning = b.s;
        } else {
            rc = refuse(e, "input", "input items of type '%s' are not supported by colibri (message, function_call, "
                        "function_call_output, reasoning)", type ? type : "?");
        }
    }
    free(reasoning);
    return rc;
}

static int convert_tools(const cJSON *tools, cJSON *out, struct oai_error *e)
{
    if (!cJSON_IsArray(tools)) return refuse(e, "tools", "'%s' must be an array", "tools");
    cJSON *arr = cJSON_AddArrayToObject(out, "tools");
    for (const cJSON *t = tools->child; t; t = t->next) {
        const char *type = str(t, "type"), *name = str(t, "name"), *desc = str(t, "description");
        if (!type || strcmp(type, "function"))
            return refuse(e, "tools", "tools of type '%s' are not supported by colibri (only function tools)",
                          type ? type : "?");
        if (!name) return refuse(e, "tools", "a function tool needs a '%s'", "name");
        cJSON *w = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(t, "parameters");
        cJSON_AddStringToObject(fn, "name", name);
        if (desc) cJSON_AddStringToObject(fn, "description", desc);
        if (cJSON_IsObject(params)) cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(params, 1));
        cJSON_AddStringToObject(w, "type", "function");
        cJSON_AddItemToObject(w, "function", fn);
        cJSON_AddItemToArray(arr, w);
    }
    return 0;
}

static int convert_format(const cJSON *text, cJSON *out, struct oai_error *e)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(text, "format");
    const char *type = str(f, "type");
    if (!f || (type && !strcmp(type, "text"))) return 0;
    if (type && !strcmp(type, "json_object")) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(out, "response_format"), "type", "json_object");
        return 0;
    }
    if (!type || strcmp(type, "json_schema"))
        return refuse(e, "text", "'text.format.type' must be text, json_object or json_schema, got '%s'", type ? type : "?");
    cJSON *rf = cJSON_AddObjectToObject(out, "response_format"), *js;
    cJSON_AddStringToObject(rf, "type", "json_schema");
    js = cJSON_AddObjectToObject(rf, "json_schema");
    cJSON_AddStringToObject(js, "name", str(f, "name") ? str(f, "name") : "response");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(f, "schema");
    if (schema) cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(schema, 1));
    return 0;
}

/* The stored conversation of previous_response_id p, appended to msgs. */
static int previous(const cJSON *p, struct serve_api_turn *turn, cJSON *msgs, struct oai_error *e)
{
    if (!cJSON_IsString(p)) return refuse(e, "previous_response_id", "'%s' must be a string", "previous_response_id");
    char *text = serve_resp_store_get(turn ? turn->store : NULL, p->valuestring);
    cJSON *conv = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsArray(conv)) {
        cJSON_Delete(conv);
        oai_error_set(e, 400, BAD, "previous_response_not_found", "previous_response_id",
                      "Previous response with id '%.80s' not found: this server keeps its latest %d responses in "
                      "memory (not those made with store false, nor any from before a restart)",
                      p->valuestring, RESP_STORE_MAX);
        return -1;
    }
    snprintf(turn->prev, sizeof turn->prev, "%s", p->valuestring);
    cJSON *m;
    while ((m = cJSON_DetachItemFromArray(conv, 0))) cJSON_AddItemToArray(msgs, m);
    cJSON_Delete(conv);
    return 0;
}

char *serve_responses_request(const char *body, size_t len, int *stream, struct serve_api_turn *turn,
                              struct oai_error *e)
{
    cJSON *root = serve_oai_parse_object(body, len, e);
    if (!root) return NULL;
    cJSON *out = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
    const cJSON *instr = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    int n_sys = 0;      /* the instructions' message, which a later turn does not inherit */
    if (cJSON_IsString(instr)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", instr->valuestring);
        cJSON_AddItemToArray(msgs, m);
        n_sys = 1;
    }
    int rc = 0;
    *stream = 0;
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "previous_response_id");
    if (prev && !cJSON_IsNull(prev)) rc = previous(prev, turn, msgs, e);
    for (const cJSON *f = root->child; f && !rc; f = f->next) {
        const char *k = f->string;
        if (cJSON_IsNull(f) || !strcmp(k, "instructions")) continue;
        if (!strcmp(k, "model") || !strcmp(k, "temperature") || !strcmp(k, "top_p") || !strcmp(k, "tool_choice") ||
            !strcmp(k, "parallel_tool_calls")) {
            const char *tn = !strcmp(k, "tool_choice") ? str(f, "name") : NULL;
            if (tn) {   /* {"type": "function", "name": N}: the chat form nests the name */
                cJSON *c = cJSON_AddObjectToObject(out, "tool_choice");
                cJSON_AddStringToObject(c, "type", "function");
                cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", tn);
            } else {
                cJSON_AddItemToObject(out, k, cJSON_Duplicate(f, 1));
            }
        } else if (!strcmp(k, "stream")) {
            *stream = cJSON_IsTrue(f);
            cJSON_AddItemToObject(out, k, cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "max_output_tokens")) {
            cJSON_AddItemToObject(out, "max_tokens", cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "input")) {
            rc = convert_input(f, msgs, e);
        } else if (!strcmp(k, "tools")) {
            rc = convert_tools(f, out, e);
        } else if (!strcmp(k, "text")) {
            rc = convert_format(f, out, e);
        } else if (!strcmp(k, "reasoning")) {
            const char *eff = str(f, "effort");
            if (eff) cJSON_AddStringToObject(out, "reasoning_effort", eff);
        } else if (!strcmp(k, "previous_response_id")) {
            /* read above, before the input */
        } else if (!strcmp(k, "store")) {
            if (!cJSON_IsBool(f)) rc = refuse(e, k, "'%s' must be true or false", k);
        } else if (!strcmp(k, "truncation")) {
            if (!cJSON_IsString(f) || strcmp(f->valuestring, "disabled"))
                rc = refuse(e, k, "'%s' must be \"disabled\" (colibri never truncates the input)", k);
        } else if (!strcmp(k, "metadata") || !strcmp(k, "user") || !strcmp(k, "service_tier") ||
                   !strcmp(k, "include") || !strcmp(k, "prompt_cache_key") || !strcmp(k, "safety_identifier")) {
            /* annotations and retention: nothing the model does changes */
        } else {
            rc = refuse(e, k, "'%s' is not supported by colibri's /v1/responses", k);
        }
    }
    if (!rc && !cJSON_GetArraySize(msgs)) rc = refuse(e, "input", "'%s' is required", "input");
    char *s = NULL;
    if (!rc && turn && !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "store"))) {
        cJSON *conv = cJSON_Duplicate(msgs, 1);
        for (int i = 0; i < n_sys; i++) cJSON_DeleteItemFromArray(conv, 0);
        free(turn->conv);
        turn->conv = conv ? cJSON_PrintUnformatted(conv) : NULL;
        cJSON_Delete(conv);
        if (!turn->conv) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); rc = -1; }
    }
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

static void id_from(const cJSON *chat, const char *prefix, int k, char *id, size_t n)
{
    const char *s = str(chat, "id");
    const char *dash = s ? strchr(s, '-') : NULL;
    if (k >= 0) snprintf(id, n, "%s_%s%d", prefix, dash ? dash + 1 : "0", k);
    else snprintf(id, n, "%s_%s", prefix, dash ? dash + 1 : "0");
}

/* usage.prompt_tokens_details.cached_tokens of a chat reply or chunk: the
 * prompt tokens the slot reused; 0 when absent. */
static int cached_tokens(const cJSON *chat)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(chat, "usage");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details"),
                                                     "cached_tokens");
    return serve_api_count(c);
}

/* The response object around output (taken), status from finish. */
static cJSON *response_object(const cJSON *chat, const char *model, cJSON *output, const char *finish, int n_in, int n_out)
{
    cJSON *o = cJSON_CreateObject(), *u = cJSON_CreateObject();
    char id[64];
    id_from(chat, "resp", -1, id, sizeof id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)time(NULL));
    int done = finish && strcmp(finish, "length");
    cJSON_AddStringToObject(o, "status", !finish ? "in_progress" : done ? "completed" : "incomplete");
    if (finish && !done) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddNullToObject(o, "error");
    cJSON_AddNullToObject(o, "instructions");
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddItemToObject(o, "output", output);
    cJSON_AddTrueToObject(o, "parallel_tool_calls");
    cJSON_AddStringToObject(o, "tool_choice", "auto");
    cJSON_AddArrayToObject(o, "tools");
    cJSON_AddNullToObject(o, "temperature");
    cJSON_AddNullToObject(o, "top_p");
    cJSON_AddNullToObject(o, "previous_response_id");
    cJSON_AddFalseToObject(o, "store");
    cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddNumberToObject(u, "input_tokens", n_in);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", cached_tokens(chat));
    cJSON_AddNumberToObject(u, "output_tokens", n_out);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", n_in + n_out);
    cJSON_AddItemToObject(o, "usage", u);
    return o;
}

static cJSON *reasoning_item(const char *id, const char *text)
{
    cJSON *it = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "reasoning");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddArrayToObject(it, "summary");
    cJSON_AddStringToObject(c, "type", "reasoning_text");
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(it, "content"), c);
    return it;
}

static cJSON *text_part(const char *text)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddArrayToObject(p, "annotations");
    return p;
}

static cJSON *message_item(const char *id, const char *text, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text) cJSON_AddItemToArray(content, text_part(text));
    return it;
}

static cJSON *call_item(const char *id, const char *call_id, const char *name, const char *args, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", name);
    cJSON_AddStringToObject(it, "arguments", args);
    cJSON_AddStringToObject(it, "status", status);
    return it;
}

/* The response object o says what the turn was (previous_response_id,
 * store) and, unless store was false, the turn's conversation with o's
 * output appended is kept under o's id. */
static void remember(cJSON *o, struct serve_api_turn *turn)
{
    if (!turn) return;
    if (turn->prev[0]) cJSON_ReplaceItemInObject(o, "previous_response_id", cJSON_CreateString(turn->prev));
    if (!turn->conv || !turn->store) return;
    cJSON_ReplaceItemInObject(o, "store", cJSON_CreateTrue());
    cJSON *conv = cJSON_Parse(turn->conv);
    struct oai_error e;
    const char *id = str(o, "id");
    if (conv && id && !convert_input(cJSON_GetObjectItemCaseSensitive(o, "output"), conv, &e)) {
        char *text = cJSON_PrintUnformatted(conv);
        if (!text || serve_resp_store_put(turn->store, id, text)) cJSON_ReplaceItemInObject(o, "store", cJSON_CreateFalse());
        free(text);
    } else {
        cJSON_ReplaceItemInObject(o, "store", cJSON_CreateFalse());
    }
    cJSON_Delete(conv);
}

char *serve_responses_response(const char *chat_json, struct serve_api_turn *turn)
{
    cJSON *chat = cJSON_Parse(chat_json);
    if (!chat) return NULL;
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message"), *u = cJSON_GetObjectItemCaseSensitive(chat, "usage");
    const char *rc = str(msg, "reasoning_content"), *ct = str(msg, "content"), *fin = str(ch, "finish_reason");
    cJSON *output = cJSON_CreateArray();
    char id[64];
    if (rc && rc[0]) { id_from(chat, "rs", 0, id, sizeof id); cJSON_AddItemToArray(output, reasoning_item(id, rc)); }
    if (ct && ct[0]) { id_from(chat, "msg", 0, id, sizeof id); cJSON_AddItemToArray(output, message_item(id, ct, "completed")); }
    const cJSON *tc;
    int k = 0;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        id_from(chat, "fc", k++, id, sizeof id);
        cJSON_AddItemToArray(output, call_item(id, str(tc, "id") ? str(tc, "id") : "", str(fn, "name") ? str(fn, "name") : "",
                                               str(fn, "arguments") ? str(fn, "arguments") : "{}", "completed"));
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens"), *gt = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
    cJSON *o = response_object(chat, str(chat, "model") ? str(chat, "model") : "", output, fin ? fin : "stop",
                               serve_api_count(pt), serve_api_count(gt));
    remember(o, turn);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    cJSON_Delete(chat);
    return s;
}

/* ------------------------------------------------------------ streaming */

enum { IT_NONE = 0, IT_REASONING, IT_MESSAGE, IT_CALL };

static void ev(struct serve_api_stream *s, struct strbuf *out, const char *type, cJSON *data)
{
    cJSON_AddStringToObject(data, "type", type);
    cJSON_AddNumberToObject(data, "sequence_number", s->seq++);
    char *t = cJSON_PrintUnformatted(data);
    if (t) base_sb_appendf(out, "event: %s\ndata: %s\n\n", type, t);
    else out->failed = 1;
    free(t);
    cJSON_Delete(data);
}

static cJSON *at_item(struct serve_api_stream *s)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "item_id", s->item_id);
    cJSON_AddNumberToObject(d, "output_index", s->block);
    return d;
}

/* Ends the open item: its .done events, and the whole item into the response. */
static void close_item(struct serve_api_stream *s, struct strbuf *out)
{
    if (s->kind == IT_NONE) return;
    const char *text = s->cur.s ? s->cur.s : "";
    cJSON *item = NULL, *d;
    if (s->kind == IT_REASONING) {
        d = at_item(s);
        cJSON_AddNumberToObject(d, "content_index", 0);
        cJSON_AddStringToObject(d, "text", text);
        ev(s, out, "response.reasoning_text.done", d);
        item = reasoning_item(s->item_id, text);
    } else if (s->kind == IT_MESSAGE) {
        d = at_item(s);
        cJSON_AddNumberToObject(d, "content_index", 0);
        cJSON_AddStringToObject(d, "text", text);
        ev(s, out, "response.output_text.done", d);
        d = at_item(s);
        cJSON_AddNumberToObject(d, "content_index", 0);
        cJSON_AddItemToObject(d, "part", text_part(text));
        ev(s, out, "response.content_part.done", d);
        item = message_item(s->item_id, text, "completed");
    } else {
        cJSON *open = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s->acc, "output"), s->block);
        d = at_item(s);
        cJSON_AddStringToObject(d, "arguments", text);
        ev(s, out, "response.function_call_arguments.done", d);
        item = call_item(s->item_id, str(open, "call_id"), str(open, "name"), text, "completed");
    }
    cJSON_ReplaceItemInArray(cJSON_GetObjectItemCaseSensitive(s->acc, "output"), s->block, cJSON_Duplicate(item, 1));
    d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "output_index", s->block);
    cJSON_AddItemToObject(d, "item", item);
    ev(s, out, "response.output_item.done", d);
    s->kind = IT_NONE;
    base_sb_clear(&s->cur);
}

static void open_item(struct serve_api_stream *s, struct strbuf *out, int kind, const char *prefix, cJSON *item)
{
    close_item(s, out);
    s->block = s->n_blocks++;
    s->kind = kind;
    snprintf(s->item_id, sizeof s->item_id, "%s", str(item, "id") ? str(item, "id") : prefix);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(s->acc, "output"), cJSON_Duplicate(item, 1));
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "output_index", s->block);
    cJSON_AddItemToObject(d, "item", item);
    ev(s, out, "response.output_item.added", d);
    if (kind == IT_MESSAGE) {
        d = at_item(s);
        cJSON_AddNumberToObject(d, "content_index", 0);
        cJSON_AddItemToObject(d, "part", text_part(""));
        ev(s, out, "response.content_part.added", d);
    }
}

static void text_delta(struct serve_api_stream *s, struct strbuf *out, const char *type, const char *text)
{
    base_sb_puts(&s->cur, text);
    cJSON *d = at_item(s);
    if (strcmp(type, "response.function_call_arguments.delta")) cJSON_AddNumberToObject(d, "content_index", 0);
    cJSON_AddStringToObject(d, "delta", text);
    ev(s, out, type, d);
}

static void snapshot(struct serve_api_stream *s, struct strbuf *out, const char *type)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "response", cJSON_Duplicate(s->acc, 1));
    ev(s, out, type, d);
}

void serve_responses_stream_chunk(struct serve_api_stream *s, const cJSON *chunk, struct strbuf *out)
{
    if (!s->acc) {
        s->acc = response_object(chunk, s->model, cJSON_CreateArray(), NULL, s->n_prompt, 0);
        if (!s->acc) { out->failed = 1; return; }
        if (s->turn.prev[0]) cJSON_ReplaceItemInObject(s->acc, "previous_response_id", cJSON_CreateString(s->turn.prev));
        if (s->turn.conv && s->turn.store) cJSON_ReplaceItemInObject(s->acc, "store", cJSON_CreateTrue());
        snapshot(s, out, "response.created");
        snapshot(s, out, "response.in_progress");
    }
    if (!chunk) {
        close_item(s, out);
        const char *fin = s->finish[0] ? s->finish : "stop";
        int done = strcmp(fin, "length");
        cJSON_ReplaceItemInObject(s->acc, "status", cJSON_CreateString(done ? "completed" : "incomplete"));
        if (!done) {
            cJSON *det = cJSON_CreateObject();
            cJSON_AddStringToObject(det, "reason", "max_output_tokens");
            cJSON_ReplaceItemInObject(s->acc, "incomplete_details", det);
        }
        cJSON *u = cJSON_GetObjectItemCaseSensitive(s->acc, "usage");
        cJSON_ReplaceItemInObject(u, "output_tokens", cJSON_CreateNumber(s->out_tokens));
        cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(u, "input_tokens_details"), "cached_tokens",
                                  cJSON_CreateNumber(s->cached_tokens));
        cJSON_ReplaceItemInObject(u, "total_tokens", cJSON_CreateNumber(s->n_prompt + s->out_tokens));
        remember(s->acc, &s->turn);
        snapshot(s, out, done ? "response.completed" : "response.incomplete");
        return;
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(chunk, "error");
    if (err) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "message", str(err, "message") ? str(err, "message") : "error");
        cJSON_AddNullToObject(d, "code");
        cJSON_AddNullToObject(d, "param");
        ev(s, out, "error", d);
        s->failed = 1;
        return;
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(chunk, "usage");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
    if (cJSON_IsNumber(ct)) s->out_tokens = serve_api_count(ct);
    if (u) s->cached_tokens = cached_tokens(chunk);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
    if (str(ch, "finish_reason")) snprintf(s->finish, sizeof s->finish, "%s", str(ch, "finish_reason"));
    const char *r = str(d, "reasoning_content"), *c = str(d, "content");
    char id[64];
    if (r && r[0]) {
        if (s->kind != IT_REASONING) {
            id_from(chunk, "rs", s->n_blocks, id, sizeof id);
            cJSON *it = reasoning_item(id, "");
            cJSON_ReplaceItemInObject(it, "content", cJSON_CreateArray());
            open_item(s, out, IT_REASONING, "rs", it);
        }
        text_delta(s, out, "response.reasoning_text.delta", r);
    }
    if (c && c[0]) {
        if (s->kind != IT_MESSAGE) {
            id_from(chunk, "msg", s->n_blocks, id, sizeof id);
            open_item(s, out, IT_MESSAGE, "msg", message_item(id, NULL, "in_progress"));
        }
        text_delta(s, out, "response.output_text.delta", c);
    }
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(d, "tool_calls")) {
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(tc, "index"), *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        int k = serve_api_count(idx);
        if (s->kind != IT_CALL || s->tool_index != k) {
            id_from(chunk, "fc", s->n_blocks, id, sizeof id);
            open_item(s, out, IT_CALL, "fc", call_item(id, str(tc, "id") ? str(tc, "id") : "",
                                                        str(fn, "name") ? str(fn, "name") : "", "", "in_progress"));
            s->tool_index = k;
        }
        const char *args = str(fn, "arguments");
        if (args && args[0]) text_delta(s, out, "response.function_call_arguments.delta", args);
    }
}
