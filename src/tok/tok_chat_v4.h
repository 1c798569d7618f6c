/* tok/tok_chat_v4.h - DeepSeek-V4's prompt format, built in. The V4
 * checkpoints ship no Jinja chat template: DeepSeek publishes the format as a
 * Python encoder (encoding/encoding_dsv4.py beside the weights), and this is
 * a transcription of its encode_messages, byte for byte on what it renders
 * (tests/tok/chat/deepseek_v4.json, made by tools/make_v4_text_golden.py):
 *
 *   BOS, then per message
 *     system     content, + "\n\n" + the tool block when it holds the tools
 *     user       <｜User｜> + its parts joined by "\n\n": consecutive user and
 *                tool messages are one turn, each tool result
 *                <tool_result>RESULT</tool_result>, results ordered as the
 *                calls of the last assistant turn with calls
 *     assistant  (thinking: its reasoning_content + </think>, unless dropped)
 *                content, then "\n\n<｜DSML｜tool_calls>\n" + one invoke per
 *                call + "\n</｜DSML｜tool_calls>", then <｜end▁of▁sentence｜>
 *   and after a user turn that ends the conversation or that an assistant
 *   turn follows: <｜Assistant｜> + <think> (thinking) or </think> (chat).
 *   A call is <｜DSML｜invoke name="NAME">\n, its arguments (a JSON object)
 *   one per line as <｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>
 *   for strings (raw) and string="false" with Python's json.dumps of any
 *   other value, then \n</｜DSML｜invoke>; arguments that are not JSON become
 *   one string parameter named "arguments", as DeepSeek's encoder does.
 *
 * The request's side (what transformers' apply_chat_template would pass):
 *   messages   roles system, user, assistant, tool; fields role, content
 *              (a string or null), reasoning_content, tool_calls (OpenAI's:
 *              function.name, function.arguments a JSON string, id),
 *              tool_call_id, name (not rendered); anything else is refused
 *              by name
 *   tools      OpenAI tool objects: their "function" objects go, as JSON,
 *              on the first message when it is a system one, else on an
 *              empty system message put first (as SGLang does)
 *   variables  thinking or enable_thinking (bool: thinking mode, default
 *              chat mode), reasoning_effort ("high", "max" or null: "max"
 *              prepends DeepSeek's maximum-effort instruction in thinking
 *              mode), drop_thinking (bool, default true: reasoning of turns
 *              before the last user turn is left out; never with tools)
 * The encoder always opens the assistant's turn after a final user turn, so
 * add_gen = 0 there is refused; after a final assistant turn it changes
 * nothing. Where DeepSeek's encoder fails (arguments that are JSON but not
 * an object) or renders Python's None (a null tool result) this refuses,
 * naming the message; a null user content renders as "" (the encoder fails
 * on it). A missing content is "" everywhere, as there.
 * Pure; thread-safe. */
#ifndef COLIBRI_TOK_CHAT_V4_H
#define COLIBRI_TOK_CHAT_V4_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "colibri.h"

/* messages: an array; tools: an array or NULL; vars: an object or NULL.
 * Numbers keep their literal when parsed by tok_jinja_json_parse (2.0 stays
 * a float). *out: a new malloc'd NUL-terminated string of *out_len bytes.
 * Bad input: COLIBRI_EINVAL (or COLIBRI_EUNSUPPORTED for a field or variable
 * the format has no place for), naming the message, field or variable. */
int tok_chat_v4_render(const cJSON *messages, const cJSON *tools, const cJSON *vars, int add_gen, char **out,
                       size_t *out_len, struct colibri_err *err);

/* Python's json.dumps(v, ensure_ascii=False) of v (as json.loads would have
 * read it: literals kept by tok_jinja_json_parse, a repeated key's last
 * value in its first place), appended to b. */
struct strbuf;
void tok_chat_v4_json(struct strbuf *b, const cJSON *v);

#endif
