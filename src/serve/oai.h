/* serve/oai.h - the OpenAI wire format: request bodies in, response bodies
 * and SSE chunks out.
 *
 * Parsing (oai_parse.c) validates every field it uses and names the field at
 * fault in the error; fields it does not know are ignored, as OpenAI clients
 * send many optional ones. Emitting (oai_emit.c) reads a job's events: the
 * caller holds job->mu while calling the oai_*_events / oai_response
 * functions. All strings returned are malloc'd, NUL-terminated; the caller
 * frees them. Thread-safe (pure functions of their inputs). */
#ifndef COLIBRI_SERVE_OAI_H
#define COLIBRI_SERVE_OAI_H

#include <stddef.h>

#include "colibri.h"
#include "serve/job.h"
#include "base/strbuf.h"

/* The server's defaults for fields a request leaves out (llama-server's
 * --temp, -n and --seed): has_* says whether the command line set each. */
struct oai_defaults {
    int has_temp, has_max_tokens, has_seed;
    float temp;
    int max_tokens;
    long long seed;
};

/* What the parser needs to know about the served model. */
struct oai_model {
    const char *id;             /* the model name clients must send (or omit) */
    const colibri_tokenizer *tok;
    int n_vocab;                /* the model's vocabulary (token-id prompts) */
    int n_ctx;                  /* tokens per slot */
    int n_ctx_model;            /* the model's context (max_position_embeddings) */
    long created;
    int reasoning_deepseek;     /* split <think>...</think> off into reasoning_content (--reasoning-format) */
    int n_slots, max_queue;     /* the scheduler's: a request's n choices take n slots (and queue places) */
    struct oai_defaults dflt;   /* the server's defaults for fields a request leaves out */
};

/* An error response: HTTP status and the OpenAI error object's fields. */
struct oai_error {
    int status;
    const char *type;           /* "invalid_request_error", ... */
    const char *code;           /* NULL or "model_not_found", ... */
    char param[64];             /* the field at fault, "" if none */
    char msg[512];
};

/* Parses a /v1/completions (JOB_COMPLETION) or /v1/chat/completions
 * (JOB_CHAT) body into a new job (one reference), tokenizing its prompt.
 * Returns NULL and fills *e on any problem. */
struct job *oai_parse(const struct oai_model *m, enum job_kind kind, const char *body, size_t len,
                      struct oai_error *e);

struct cJSON;
/* The sampling fields past OpenAI's core ones (oai_sampling.c): logit_bias,
 * top_k, min_p, repetition_penalty (or repeat_penalty); llama-server and vLLM
 * fields colibri lacks are refused by name. 0, or -1 with *e filled. */
int oai_parse_sampling(const struct oai_model *m, const struct cJSON *root, struct job_params *p,
                       struct oai_error *e);

/* Structured output (oai_format.c): response_format json_object /
 * json_schema, or a GBNF `grammar`, compiled into p->grammar. 0, or -1 with
 * *e filled (400 naming what colibri cannot compile). */
int oai_parse_format(const struct oai_model *m, const struct cJSON *root, struct job_params *p,
                     struct oai_error *e);

/* Tools (oai_tools.c). oai_render_chat renders msgs[0..n) (validated by the
 * parser) with the fields a struct colibri_chat_msg cannot carry, taken from
 * root's messages (tool_calls, tool_call_id, name, reasoning_content), and
 * root's tools (when tool_choice is auto), and root's chat_template_kwargs
 * (their text from body[0..body_len), root's source, so numbers reach the
 * template as the client wrote them), setting p->parse_tools. 0, or -1
 * with *e filled. oai_parse_tool_calls finds tool calls in a reply: their
 * count (then *calls is an OpenAI tool_calls array and *content the text
 * before them, both the caller's), or 0 when there are none or they do not
 * parse. A call's id is call_<index>, or Kimi's own functions.NAME:IDX (as
 * vLLM gives it), which Kimi's templates write back into the history.
 * DeepSeek-V4's DSML calls get the arguments DeepSeek's own parser builds
 * ({"K": V, ...}: a string="true" value as a JSON string, any other as the
 * model wrote it, which must then be JSON).
 * GLM's and Qwen3-Coder's calls write each argument as text (strings as they
 * are, other values as JSON): tools_json, the request's tools (or NULL),
 * keeps the parameters its schema types "string" as text; any other value
 * that parses as JSON takes that value. */
int oai_render_chat(const struct oai_model *m, const struct cJSON *root, const char *body, size_t body_len,
                    const struct colibri_chat_msg *msgs, int n, struct job_params *p, char **text, size_t *len,
                    struct oai_error *e);
int oai_parse_tool_calls(const char *text, const char *tools_json, struct cJSON **calls, char **content);
/* The same for a reply cut by max_tokens: the complete calls before the
 * first one that was cut (or does not parse), and the text before the
 * tool-call section as *content. When the reply has a section, *calls is
 * an array (possibly empty) and *content the text before it, both the
 * caller's, and the count is returned; without one, 0 and both NULL. The
 * section's markup never becomes content. */
int serve_oai_tool_calls_cut(const char *text, const char *tools_json, struct cJSON **calls, char **content);
/* Tool-call syntaxes (oai_tool_grammar.c), one of which the model's chat
 * template writes assistant tool calls in. */
enum oai_tool_syntax {
    OAI_TOOLS_DEEPSEEK_V3 = 0,  /* <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n``` */
    OAI_TOOLS_DEEPSEEK_V31 = 1, /* <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS */
    OAI_TOOLS_KIMI = 2,         /* <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
    OAI_TOOLS_HERMES = 3,       /* <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call> */
    OAI_TOOLS_GLM = 4,          /* <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
                                 * (GLM-4.5 and GLM-4.7 leave out some of the newlines) */
    OAI_TOOLS_QWEN3_CODER = 5,  /* <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call> */
    OAI_TOOLS_DEEPSEEK_V4 = 6,  /* \n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="NAME">\n
                                 * <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>\n
                                 * </｜DSML｜invoke>\n</｜DSML｜tool_calls> (DeepSeek-V4's DSML) */
    OAI_TOOLS_COUNT
};
/* A grammar for a reply that is nothing but tool calls in the model's
 * syntax: of the function named `only` (NULL: any of tools, an array that
 * oai_render_chat validated), one call or (parallel) several, arguments
 * matching each tool's parameters schema; after a reasoning block when
 * think_open. In GLM's, Qwen3-Coder's and DeepSeek-V4's syntax, where each
 * argument is a tagged key and value, a call holds its tool's properties in
 * the schema's order, the required ones always and the others optionally; a
 * value the schema types "string" is raw text (without the closing tags,
 * and in DSML (string="true") without "</｜"; without '<' when
 * minLength/maxLength bound it), any other one JSON matching the property's
 * schema (in DSML string="false"). 0 and *out (the caller's), or -1 with *e filled (400 naming the
 * tool whose schema colibri cannot compile). */
int serve_oai_tool_grammar(const struct oai_model *m, const struct cJSON *tools, const char *only, int parallel,
                           int think_open, colibri_grammar **out, struct oai_error *e);
/* The same grammar's GBNF text (malloc'd, the caller's), uncompiled. */
int serve_oai_tool_gbnf(const struct oai_model *m, const struct cJSON *tools, const char *only, int parallel,
                        int think_open, char **out, struct oai_error *e);

/* Streamed tool calls (oai_reply.c): how far the content of a reply,
 * s[0..n) (NUL-terminated), has come. Bytes [0, text_end) are text that
 * stays text whatever follows (held back: a tail that may start a tool-call
 * section, and blanks before one); call[0..n) the calls whose name is
 * complete, each with the part of its arguments that is final, a prefix of
 * what later views give. A complete call is exactly what
 * oai_parse_tool_calls gives (tools_json as there); Hermes, GLM,
 * Qwen3-Coder and DeepSeek-V4 (DSML) calls appear only when complete (their
 * arguments are re-serialized or built). final: the reply is complete, nothing is held
 * back. 0, or COLIBRI_ENOMEM; free with serve_oai_tool_view_free(). */
struct oai_tool_view_call { char *name, *args; size_t args_len; char *id; /* NULL: call_<index> */ };
struct oai_tool_view { size_t text_end; int n; struct oai_tool_view_call *call; };
int  serve_oai_tool_view(const char *s, size_t n, int final, const char *tools_json, struct oai_tool_view *v);
void serve_oai_tool_view_free(struct oai_tool_view *v);

/* DeepSeek's reasoning format: a reply that starts with <think> (or whose
 * prompt opened one) is split at </think> into *reasoning and *content (both
 * malloc'd, the caller's; a reply cut off before </think> is all reasoning).
 * 1 when split, 0 when the reply has no reasoning. Streams split the same
 * way as they go (oai_emit.c), unless logprobs were asked for. */
int oai_split_reasoning(const char *text, int think_open, char **reasoning, char **content);

/* Parses body as one JSON object with the checks oai_parse makes (nothing
 * after the value, no NUL or raw control character in a string). NULL with
 * *e filled (400) on any problem; free the result with cJSON_Delete(). */
struct cJSON *serve_oai_parse_object(const char *body, size_t len, struct oai_error *e);

/* Fills *e (printf-style message). Returns e->status. */
int oai_error_set(struct oai_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* {"error": {...}} for e. */
char *oai_error_json(const struct oai_error *e);

/* The non-streaming response of a finished job (caller holds j->mu), a
 * group's with a choice per choice job and the usage summed. It (n = 1) and
 * the stream's finish chunks carry llama-server's "timings" object. */
char *oai_response(const struct oai_model *m, const struct job *j);

/* Streaming: appends "data: {...}\n\n" chunks, each for choice j->index.
 * oai_stream_start adds the chat role chunk (nothing for completions);
 * oai_stream_events one chunk per event in [from, to); serve_oai_stream_finish
 * what was held back and the finish chunk; oai_stream_end the finish chunk
 * (not for a group: each choice sends its own with serve_oai_stream_finish), the
 * usage chunk when asked for, and "data: [DONE]" (caller holds j->mu for the
 * last three; a group's choices have all ended). OpenAI interleaves the
 * choices' chunks, each naming its index; so do a group's streams. */
void oai_stream_start(struct strbuf *out, const struct oai_model *m, const struct job *j);
void oai_stream_events(struct strbuf *out, const struct oai_model *m, const struct job *j, int from, int to,
                       size_t *text_chars);
void serve_oai_stream_finish(struct strbuf *out, const struct oai_model *m, const struct job *j);
void oai_stream_end(struct strbuf *out, const struct oai_model *m, const struct job *j);
/* An error after the stream has started: a data chunk holding {"error":...}, then [DONE]. */
void oai_stream_error(struct strbuf *out, const struct oai_error *e);

#endif
