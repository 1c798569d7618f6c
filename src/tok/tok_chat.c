/* tok/tok_chat.c - chat template families as a traits table: how each is
 * recognised and how it renders (contract in tok_chat.h). Each render
 * function transcribes its model's Jinja; the comments quote the lines. */
#include "tok/tok_chat.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "tok/tok_chat_v4.h"
#include "tok/tok_template.h"

/* ------------------------------------------------------------ text */

static void sb_add(struct strbuf *b, const char *s) { base_sb_puts(b, s ? s : ""); }

static void sb_cat(struct strbuf *b, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) sb_add(b, va_arg(ap, const char *));
    va_end(ap);
}

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, ROLE_BAD };

static enum role role_of(const char *r)
{
    if (!r) return ROLE_BAD;
    if (!strcmp(r, "system")) return ROLE_SYSTEM;
    if (!strcmp(r, "user")) return ROLE_USER;
    if (!strcmp(r, "assistant")) return ROLE_ASSISTANT;
    if (!strcmp(r, "tool")) return ROLE_TOOL;
    return ROLE_BAD;
}

static const char *content_of(const struct colibri_chat_msg *m) { return m->content ? m->content : ""; }

/* Python's s.split(sep)[-1]: the text after the last sep (all of s if none). */
static const char *after_last(const char *s, const char *sep)
{
    const char *last = NULL, *p = s;
    while ((p = strstr(p, sep))) { last = p; p += strlen(sep); }
    return last ? last + strlen(sep) : s;
}

/* ------------------------------------------------------- DeepSeek-V3/R1 */

/* {{ bos_token }}{{ ns.system_prompt }}, then per message:
 *   user:      '<｜User｜>' + content                     (ns.is_tool = false)
 *   assistant: after tool outputs '<｜tool▁outputs▁end｜>' + content + eos,
 *              else '<｜Assistant｜>' + content + eos, content cut to
 *              content.split('</think>')[-1] in templates that say so
 *   tool:      first '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + c +
 *              '<｜tool▁output▁end｜>', later ones without the outputs-begin
 *              (R1: with a '\n' before '<｜tool▁output▁begin｜>')
 * then '<｜tool▁outputs▁end｜>' if the last turn was a tool, and the prompt
 * '<｜Assistant｜>' (R1: + '<think>\n') unless it was. The system prompt is
 * all system messages joined by '\n\n' (V3: ns.is_first_sp) or the last one
 * (R1). Each variant is recognised by the Jinja text that produces it. */
static void render_deepseek(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n,
                            int add_gen, struct strbuf *b)
{
    const char *tpl = tok_chat_template(t);
    int strip_think = !tpl || strstr(tpl, "</think>") != NULL;
    int think_prompt = tpl && (strstr(tpl, "<｜Assistant｜><think>\\n") || strstr(tpl, "<｜Assistant｜><think>\n"));
    int join_system = !tpl || strstr(tpl, "is_first_sp") != NULL;
    int output_nl = tpl && strstr(tpl, "'\\n<｜tool▁output▁begin｜>'") != NULL;
    sb_add(b, tok_bos_text(t));
    int first_sp = 1;
    long last_sp = -1;
    for (size_t i = 0; i < n; i++) {
        if (role_of(msgs[i].role) != ROLE_SYSTEM) continue;
        last_sp = (long)i;
        if (!join_system) continue;
        if (!first_sp) sb_add(b, "\n\n");
        sb_add(b, content_of(&msgs[i]));
        first_sp = 0;
    }
    if (!join_system && last_sp >= 0) sb_add(b, content_of(&msgs[last_sp]));
    int is_tool = 0, output_first = 1;
    for (size_t i = 0; i < n; i++) {
        const char *c = content_of(&msgs[i]);
        switch (role_of(msgs[i].role)) {
        case ROLE_USER:
            is_tool = 0;
            sb_cat(b, 2, "<｜User｜>", c);
            break;
        case ROLE_ASSISTANT:
            if (is_tool) {
                sb_cat(b, 3, "<｜tool▁outputs▁end｜>", c, "<｜end▁of▁sentence｜>");
                is_tool = 0;
            } else {
                sb_cat(b, 3, "<｜Assistant｜>", strip_think ? after_last(c, "</think>") : c,
                       "<｜end▁of▁sentence｜>");
            }
            break;
        case ROLE_TOOL:
            is_tool = 1;
            sb_cat(b, 3, output_first ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                         : output_nl ? "\n<｜tool▁output▁begin｜>" : "<｜tool▁output▁begin｜>",
                   c, "<｜tool▁output▁end｜>");
            output_first = 0;
            break;
        default:
            break;
        }
    }
    if (is_tool) sb_add(b, "<｜tool▁outputs▁end｜>");
    if (add_gen && !is_tool) sb_add(b, think_prompt ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>");
}

/* ------------------------------------------------------------- Kimi K2 */

/* Unverified transcription: a default system turn when the first message is
 * not a system one, then '<|im_{role}|>{role}<|im_middle|>' + content +
 * '<|im_end|>' (tool results use the system tag with name "tool"), and the
 * prompt '<|im_assistant|>assistant<|im_middle|>'. */
static void render_kimi(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n,
                        int add_gen, struct strbuf *b)
{
    for (size_t i = 0; i < n; i++) {
        enum role r = role_of(msgs[i].role);
        if (i == 0 && r != ROLE_SYSTEM)
            sb_add(b, "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>");
        static const char *const tag[] = {
            [ROLE_SYSTEM] = "<|im_system|>system<|im_middle|>",
            [ROLE_USER] = "<|im_user|>user<|im_middle|>",
            [ROLE_ASSISTANT] = "<|im_assistant|>assistant<|im_middle|>",
            [ROLE_TOOL] = "<|im_system|>tool<|im_middle|>",
        };
        sb_cat(b, 3, tag[r], content_of(&msgs[i]), "<|im_end|>");
    }
    if (add_gen) sb_add(b, "<|im_assistant|>assistant<|im_middle|>");
}

/* ---------------------------------------------------------------- GLM */

/* The GLM-4.5 / 4.6 / 5 template (not checked against the shipped file; GLM-5.3,
 * model_type glm5_next, gets it from config.json, api/tokenizer_api.c):
 * '[gMASK]<sop>', then per message
 *   system:    '<|system|>\n' + content
 *   user:      '<|user|>\n' + content
 *   assistant: '<|assistant|>' + ('\n<think>' + reasoning.strip() + '</think>'
 *              for turns after the last user turn that carry reasoning, else
 *              '\n<think></think>') + ('\n' + content.strip() if non-empty),
 *              where reasoning = content.split('</think>')[0].rstrip('\n')
 *              .split('<think>')[-1].lstrip('\n') and the content is
 *              content.split('</think>')[-1].lstrip('\n') (when '</think>' occurs)
 *   tool:      '<|observation|>' (unless the previous message was a tool too)
 *              + '\n<tool_response>\n' + content + '\n</tool_response>'
 * and the prompt '<|assistant|>'. strip() here trims ASCII whitespace only. */
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void add_stripped(struct strbuf *b, const char *s, const char *e)
{
    while (s < e && is_space(*s)) s++;
    while (e > s && is_space(e[-1])) e--;
    base_sb_append(b, s, (size_t)(e - s));
}

static int blank(const char *s, const char *e)
{
    while (s < e && is_space(*s)) s++;
    return s == e;
}

static void render_glm(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n,
                       int add_gen, struct strbuf *b)
{
    long last_user = -1;
    for (size_t i = 0; i < n; i++)
        if (role_of(msgs[i].role) == ROLE_USER) last_user = (long)i;
    sb_add(b, "[gMASK]<sop>");
    for (size_t i = 0; i < n; i++) {
        const char *c = content_of(&msgs[i]);
        switch (role_of(msgs[i].role)) {
        case ROLE_SYSTEM: sb_cat(b, 2, "<|system|>\n", c); break;
        case ROLE_USER: sb_cat(b, 2, "<|user|>\n", c); break;
        case ROLE_TOOL:
            if (i == 0 || role_of(msgs[i - 1].role) != ROLE_TOOL) sb_add(b, "<|observation|>");
            sb_cat(b, 3, "\n<tool_response>\n", c, "\n</tool_response>");
            break;
        case ROLE_ASSISTANT: {
            const char *vis = c, *r0 = c, *r1 = c;   /* visible text; reasoning in [r0, r1) */
            const char *end_think = strstr(c, "</think>");
            if (end_think) {
                r1 = end_think;
                while (r1 > c && r1[-1] == '\n') r1--;
                for (const char *p = c; (p = strstr(p, "<think>")) && p < r1; p += 7) r0 = p + 7;
                if (r0 > r1) r0 = r1;
                while (r0 < r1 && *r0 == '\n') r0++;
                vis = after_last(c, "</think>");
                while (*vis == '\n') vis++;
            }
            sb_add(b, "<|assistant|>");
            if ((long)i > last_user && end_think && !blank(r0, r1)) {
                sb_add(b, "\n<think>");
                add_stripped(b, r0, r1);
                sb_add(b, "</think>");
            } else {
                sb_add(b, "\n<think></think>");
            }
            if (!blank(vis, vis + strlen(vis))) {
                sb_add(b, "\n");
                add_stripped(b, vis, vis + strlen(vis));
            }
            break;
        }
        default: break;
        }
    }
    if (add_gen) sb_add(b, "<|assistant|>");
}

/* -------------------------------------------------------------- table */

struct chat_traits {
    const char *name;
    const char *marker;         /* found in the template text or as a token */
    void (*render)(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n, int add_gen,
                   struct strbuf *b);
};

static const struct chat_traits CHAT[TOK_CHAT_COUNT] = {
    [TOK_CHAT_NONE] = { .name = "none" },
    [TOK_CHAT_DEEPSEEK_V3] = { .name = "deepseek_v3", .marker = "<｜Assistant｜>", .render = render_deepseek },
    [TOK_CHAT_KIMI_K2] = { .name = "kimi_k2", .marker = "<|im_middle|>", .render = render_kimi },
    [TOK_CHAT_GLM] = { .name = "glm", .marker = "[gMASK]", .render = render_glm },
    [TOK_CHAT_DEEPSEEK_V4] = { .name = "deepseek_v4" },   /* tok_chat_v4.c; chosen from config.json */
};

const char *tok_chat_name(enum tok_chat_kind k)
{
    return k > TOK_CHAT_NONE && k < TOK_CHAT_COUNT ? CHAT[k].name : CHAT[TOK_CHAT_NONE].name;
}

enum tok_chat_kind tok_chat_detect(const struct tok *t)
{
    const char *tpl = tok_chat_template(t);
    for (int k = TOK_CHAT_NONE + 1; k < TOK_CHAT_COUNT; k++)
        if (!CHAT[k].marker) continue;
        else if (tpl ? strstr(tpl, CHAT[k].marker) != NULL
                : tok_token_id(t, CHAT[k].marker, strlen(CHAT[k].marker)) >= 0)
            return (enum tok_chat_kind)k;
    return TOK_CHAT_NONE;
}

int tok_chat_render(const struct tok *t, enum tok_chat_kind k, const struct colibri_chat_msg *msgs,
                    size_t n, int add_gen, char **out, size_t *out_len, struct colibri_err *err)
{
    if (k <= TOK_CHAT_NONE || k >= TOK_CHAT_COUNT)
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "chat: the model's files name no known chat template (deepseek_v3, kimi_k2, glm)");
    for (size_t i = 0; i < n; i++)
        if (role_of(msgs[i].role) == ROLE_BAD)
            return base_err_set(err, COLIBRI_EINVAL, "chat: message %zu has role '%s' (expected system, user, "
                           "assistant or tool)", i, msgs[i].role ? msgs[i].role : "(null)");
    if (k == TOK_CHAT_DEEPSEEK_V4) {
        cJSON *arr = tok_chat_msgs_json(msgs, n);
        if (!arr) return base_err_set(err, COLIBRI_ENOMEM, "chat: rendering %zu messages", n);
        int rc = tok_chat_v4_render(arr, NULL, NULL, add_gen, out, out_len, err);
        cJSON_Delete(arr);
        return rc;
    }
    struct strbuf b = { 0 };
    sb_add(&b, "");
    CHAT[k].render(t, msgs, n, add_gen, &b);
    if (b.failed) {
        base_sb_free(&b);
        return base_err_set(err, COLIBRI_ENOMEM, "chat: rendering %zu messages", n);
    }
    *out = b.s;
    *out_len = b.n;
    return 0;
}
