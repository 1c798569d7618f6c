/* sample/grammar_schema_parts.h - the pieces of JSON Schema to GBNF that
 * are their own small languages: numeric ranges (grammar_schema_num.c) and
 * string patterns (grammar_regex.c); and the merge of allOf's object
 * schemas (grammar_schema_allof.c). Not a public interface: used by
 * grammar_schema.c. The first two append one GBNF expression (a parenthesised set of
 * alternatives) to b, or return -1 with why[0..why_n) saying what cannot be
 * compiled; they use only the rule `char` of grammar_schema.c's prelude. */
#ifndef COLIBRI_SAMPLE_GRAMMAR_SCHEMA_PARTS_H
#define COLIBRI_SAMPLE_GRAMMAR_SCHEMA_PARTS_H

#include <stddef.h>

#include "base/strbuf.h"

/* A bound of a range: absent, or the value and whether it is exclusive. */
struct schema_bound { int has, excl; double v; };

/* The decimal JSON numbers (integer: no fraction; else with an optional
 * fraction, never an exponent) within lo and hi. Bounds must be integral
 * for numbers (any value for integers, which round them inward) and within
 * +-1e15; an empty range is refused. */
int sample_schema_number_range(struct strbuf *b, int integer, struct schema_bound lo, struct schema_bound hi,
                               char *why, size_t why_n);

/* The JSON text of the strings (between the quotes, escaped as JSON
 * escapes them) that the ECMA-262 regular expression re matches anywhere
 * (JSON Schema's `pattern` is unanchored unless ^ and $ say otherwise).
 * The subset: literals, escapes \d \D \w \W \s \S \n \t \r \f \v \xHH
 * \uHHHH and escaped punctuation, classes [...] and [^...] with ranges,
 * `.`, groups (...) and (?:...), alternation, the quantifiers * + ? {n}
 * {n,} {n,m} (lazy forms match the same strings), ^ at the start and $ at
 * the end. Refused by name: lookaround, backreferences, named groups,
 * word boundaries, anchors elsewhere, and any other construct. */
int sample_regex_to_gbnf(struct strbuf *b, const char *re, char *why, size_t why_n);

/* allOf of object schemas as one object schema (a new cJSON object, the
 * caller's): s holds allOf, whose members (each an object schema, or a
 * $ref into root's $defs / definitions) and s's own properties, required
 * and additionalProperties (true or false) are merged as
 * grammar_schema_allof.c says. NULL with why[0..why_n) naming what cannot be
 * merged (another keyword, two different schemas for one property, a
 * required property a closed member rejects). */
struct cJSON;
struct cJSON *sample_schema_merge_allof(const struct cJSON *root, const struct cJSON *s, char *why, size_t why_n);

#endif
