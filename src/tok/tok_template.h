/* tok/tok_template.h - a model's own chat template (Jinja text from
 * tokenizer_config.json, chat_template.jinja or a file the user names), run
 * by the Jinja interpreter (tok/jinja.h) with the variables transformers'
 * apply_chat_template gives it:
 *   messages              the conversation (a JSON array of message objects,
 *                         passed through as they are: role, content,
 *                         tool_calls, tool_call_id, name, reasoning_content...)
 *   tools                 the tool list, or None
 *   documents             the caller's variable "documents", else None
 *   add_generation_prompt true when the assistant's turn is to follow
 *   bos_token, pad_token, the tokenizer's special tokens (tok_special_tokens:
 *   image_token...        every one transformers' special_tokens_map holds)
 *   ...                   any extra variables (chat_template_kwargs), over
 *                         the special tokens as transformers' kwargs are
 * A compiled template is read-only and may be rendered by many threads. */
#ifndef COLIBRI_TOK_TEMPLATE_H
#define COLIBRI_TOK_TEMPLATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "colibri.h"
#include "tok/tok.h"

struct tok_template;

/* Compiles src[0..len); origin names it in messages ("tokenizer_config.json",
 * a file path). Unsupported constructs: COLIBRI_EUNSUPPORTED naming origin,
 * construct and line. Free with tok_template_free(). */
int  tok_template_new(const char *src, size_t len, const char *origin, struct tok_template **out,
                      struct colibri_err *err);
void tok_template_free(struct tok_template *tt);
const char *tok_template_origin(const struct tok_template *tt);

/* Renders into a new malloc'd NUL-terminated *out (*out_len bytes). messages
 * must be an array; tools an array or NULL; kwargs an object or NULL (its
 * keys may not be messages, tools or add_generation_prompt; documents is
 * apply_chat_template's documents argument).
 * The template's own errors (raise_exception) are COLIBRI_EINVAL. */
int tok_template_render(const struct tok_template *tt, const struct tok *t, const cJSON *messages,
                        const cJSON *tools, const cJSON *kwargs, int add_gen, char **out, size_t *out_len,
                        struct colibri_err *err);

/* msgs[0..n) as a JSON array of {role, content} (NULL content: ""), or NULL
 * when out of memory. Free with cJSON_Delete(). */
cJSON *tok_chat_msgs_json(const struct colibri_chat_msg *msgs, size_t n);

#endif
