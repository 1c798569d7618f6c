/* tok/jinja.h - a Jinja2 interpreter for chat templates, written to render
 * byte for byte what transformers' apply_chat_template renders: its
 * environment is Jinja2 with trim_blocks and lstrip_blocks on, the
 * loopcontrols extension, the {% generation %} tag, a tojson that does not
 * HTML-escape and keeps non-ASCII (ensure_ascii=False), and the globals
 * raise_exception and strftime_now.
 *
 * The supported subset (anything else is refused by jinja_compile, naming
 * the construct and its line):
 *  - statements: if/elif/else, for (tuple targets, `if` filter, else,
 *    loop.index/index0/revindex/revindex0/first/last/length/previtem/
 *    nextitem/cycle), break/continue, set (names, namespace attributes,
 *    block set with filters), macro (positional and keyword parameters with
 *    defaults), filter blocks, generation blocks, comments, whitespace
 *    control (-, + and the two trim options above).
 *  - expressions: literals (strings, ints, floats, lists, tuples, dicts,
 *    true/false/none), names, .attr, [index], slices, calls, filters, tests,
 *    arithmetic (+ - * / // % **), ~, comparisons (chained), in / not in,
 *    and/or/not, conditional expressions.
 *  - filters, tests, string/dict methods and globals: the tables in
 *    jinja_builtin.c (the ones real templates use).
 * Values are Python's: strings are UTF-8 and indexed by code point, with
 * Python's Unicode case mapping (upper, lower, title, capitalize; the tables
 * of tok_unicase.h) and repr escapes; ints are
 * 64-bit (overflow is an error, not a bigint); str() of floats, lists and
 * dicts is Python's repr; what Jinja2 returns as a generator (select, map,
 * reverse, unique) is always true and has no length or JSON form; |safe
 * makes a Markup that HTML-escapes plain strings added to it. The context is JSON: a number parsed
 * by tok_jinja_json_parse is an int or a float as Python's json.loads makes
 * it ("2.0" a float, "2" an int); one built in C (no literal kept) is an
 * int when its value is integral.
 *
 * Hostile templates: parsing nests at most JINJA_MAX_NEST deep; a render
 * stops with an error past the limits in struct jinja_limits (steps, macro
 * depth, output bytes, working memory). Errors name the template line.
 *
 * A compiled template is read-only: any number of threads may render it at
 * once. A render allocates from its own arena, freed before it returns.
 */
#ifndef COLIBRI_TOK_JINJA_H
#define COLIBRI_TOK_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "colibri.h"

#define JINJA_MAX_NEST 200

struct jinja_tpl;

struct jinja_limits {
    size_t max_output;   /* bytes of rendered text */
    size_t max_memory;   /* bytes of values built while rendering */
    long   max_steps;    /* expression and statement evaluations */
    int    max_depth;    /* nested macro calls */
    /* Not a limit: the time strftime_now() formats, in unix seconds (local
     * time), 0 for the clock; tests pin it so a template that prints today's
     * date renders as its golden did. */
    int64_t now;
};
/* 16 MiB output, 256 MiB memory, 50M steps, depth 64, now 0 (the clock). */
struct jinja_limits jinja_default_limits(void);

/* Compiles src[0..len). Unsupported constructs and syntax errors are
 * COLIBRI_EUNSUPPORTED / COLIBRI_EFORMAT naming the line. Free with jinja_free(). */
int  jinja_compile(const char *src, size_t len, struct jinja_tpl **out, struct colibri_err *err);
void jinja_free(struct jinja_tpl *t);

/* Renders with the top-level variables of ctx (a JSON object; may be NULL)
 * into a new malloc'd NUL-terminated *out of *out_len bytes. lim may be NULL
 * (the defaults). A template's raise_exception(msg) is COLIBRI_EINVAL with
 * the message "template error: msg"; runtime type errors and limits are
 * COLIBRI_EINVAL naming the line. *out is untouched on failure. */
int jinja_render(const struct jinja_tpl *t, const cJSON *ctx, const struct jinja_limits *lim,
                 char **out, size_t *out_len, struct colibri_err *err);

/* cJSON_ParseWithLength of text[0..len) that also keeps what Python's
 * json.loads keeps and cJSON drops: each number node's valuestring holds its
 * literal ("2.0", "1e5", "9007199254740993"; cJSON_Delete frees it), so a
 * render sees 2.0 as a float and prints it "2.0". NULL when the text does
 * not begin with a JSON value, or when out of memory. */
cJSON *tok_jinja_json_parse(const char *text, size_t len);

#endif
