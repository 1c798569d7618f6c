/* tok/tok_chat.c - chat template families as a traits table: how each is
 * recognised and how it renders (contract in tok_chat.h). Each render
 * function transcribes its model's Jinja; the comments quote the lines. */
#include "tok/tok_chat.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* ------------------------------------------------------------ strbuf */

struct sb { char *p; size_t n, cap; int oom; };

static void sb_addn(struct sb *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->n + n + 1) ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_add(struct sb *b, const char *s) { sb_addn(b, s ? s : "", s ? strlen(s) : 0); }

static void sb_cat(struct sb *b, int count, ...)
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

/* {{ bos_token }}{{ ns.system_prompt }} where system prompts are joined by
 * '\n\n'; then per message:
 *   user:      '<｜User｜>' + content                     (ns.is_tool = false)
 *   assistant: after tool outputs '<｜tool▁outputs▁end｜>' + content + eos,
 *              else '<｜Assistant｜>' + content.split('</think>')[-1] + eos
 *   tool:      first '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + c +
 *              '<｜tool▁output▁end｜>', later ones without the outputs-begin
 * then '<｜tool▁outputs▁end｜>' if the last turn was a tool, and the prompt
 * '<｜Assistant｜>' (R1: + '<think>\n') unless it was. */
static void render_deepseek(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n,
                            int add_gen, struct sb *b)
{
    const char *tpl = tok_chat_template(t);
    int strip_think = !tpl || strstr(tpl, "</think>") != NULL;
    int think_prompt = tpl && (strstr(tpl, "<｜Assistant｜><think>\\n") || strstr(tpl, "<｜Assistant｜><think>\n"));
    sb_add(b, tok_bos_text(t));
    int first_sp = 1;
    for (size_t i = 0; i < n; i++) {
        if (role_of(msgs[i].role) != ROLE_SYSTEM) continue;
        if (!first_sp) sb_add(b, "\n\n");
        sb_add(b, content_of(&msgs[i]));
        first_sp = 0;
    }
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
            sb_cat(b, 4, output_first ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" : "<｜tool▁output▁begin｜>",
                   c, "<｜tool▁output▁end｜>", "");
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
                        int add_gen, struct sb *b)
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

static void add_stripped(struct sb *b, const char *s)
{
    const char *e = s + strlen(s);
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    while (e > s && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r'))) e--;
    sb_addn(b, s, (size_t)(e - s));
}

/* Unverified transcription of the GLM-4.5-style template: '[gMASK]<sop>',
 * '<|system|>\n' + content, '<|user|>\n' + content, and for the assistant
 * '<|assistant|>\n<think></think>' + ('\n' + visible content stripped, when
 * non-empty), the visible content being what follows the last '</think>';
 * the prompt is '<|assistant|>'. */
static void render_glm(const struct tok *t, const struct colibri_chat_msg *msgs, size_t n,
                       int add_gen, struct sb *b)
{
    sb_add(b, "[gMASK]<sop>");
    for (size_t i = 0; i < n; i++) {
        const char *c = content_of(&msgs[i]);
        switch (role_of(msgs[i].role)) {
        case ROLE_SYSTEM: sb_cat(b, 2, "<|system|>\n", c); break;
        case ROLE_USER: sb_cat(b, 2, "<|user|>\n", c); break;
        case ROLE_TOOL: sb_cat(b, 3, "<|observation|>\n<tool_response>\n", c, "\n</tool_response>"); break;
        case ROLE_ASSISTANT: {
            const char *vis = after_last(c, "</think>");
            while (*vis == '\n') vis++;
            sb_add(b, "<|assistant|>\n<think></think>");
            const char *p = vis;
            while (*p == ' ' || (*p >= '\t' && *p <= '\r')) p++;
            if (*p) {
                sb_add(b, "\n");
                add_stripped(b, vis);
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
                   struct sb *b);
};

static const struct chat_traits CHAT[TOK_CHAT_COUNT] = {
    [TOK_CHAT_NONE] = { .name = "none" },
    [TOK_CHAT_DEEPSEEK_V3] = { .name = "deepseek_v3", .marker = "<｜Assistant｜>", .render = render_deepseek },
    [TOK_CHAT_KIMI_K2] = { .name = "kimi_k2", .marker = "<|im_middle|>", .render = render_kimi },
    [TOK_CHAT_GLM] = { .name = "glm", .marker = "[gMASK]", .render = render_glm },
};

const char *tok_chat_name(enum tok_chat_kind k)
{
    return k > TOK_CHAT_NONE && k < TOK_CHAT_COUNT ? CHAT[k].name : CHAT[TOK_CHAT_NONE].name;
}

enum tok_chat_kind tok_chat_detect(const struct tok *t)
{
    const char *tpl = tok_chat_template(t);
    for (int k = TOK_CHAT_NONE + 1; k < TOK_CHAT_COUNT; k++)
        if (tpl ? strstr(tpl, CHAT[k].marker) != NULL
                : tok_token_id(t, CHAT[k].marker, strlen(CHAT[k].marker)) >= 0)
            return (enum tok_chat_kind)k;
    return TOK_CHAT_NONE;
}

int tok_chat_render(const struct tok *t, enum tok_chat_kind k, const struct colibri_chat_msg *msgs,
                    size_t n, int add_gen, char **out, size_t *out_len, struct colibri_err *err)
{
    if (k <= TOK_CHAT_NONE || k >= TOK_CHAT_COUNT)
        return err_set(err, COLIBRI_EUNSUPPORTED,
                       "chat: the model's files name no known chat template (deepseek_v3, kimi_k2, glm)");
    for (size_t i = 0; i < n; i++)
        if (role_of(msgs[i].role) == ROLE_BAD)
            return err_set(err, COLIBRI_EINVAL, "chat: message %zu has role '%s' (expected system, user, "
                           "assistant or tool)", i, msgs[i].role ? msgs[i].role : "(null)");
    struct sb b = { 0 };
    sb_add(&b, "");
    CHAT[k].render(t, msgs, n, add_gen, &b);
    if (b.oom) {
        free(b.p);
        return err_set(err, COLIBRI_ENOMEM, "chat: rendering %zu messages", n);
    }
    *out = b.p;
    *out_len = b.n;
    return 0;
}
