/* tok/tok_unicase.h - Python's str case mapping and character classes, for
 * the Jinja interpreter's upper(), lower(), title(), capitalize(),
 * isupper(), islower() and repr(): what CPython 3.11 (Unicode 14.0.0) gives,
 * read from its own str methods into tok_unicase_table.inc by
 * tools/make_unicase.py. Full mappings, multi-character ones included
 * ('ß' upper is "SS", 'İ' lower is "i̇"); the final-sigma rule of str.lower()
 * is the caller's (it needs the neighbours: tok_uc_props gives CASED and
 * CASE_IGNORABLE for it). Pure functions over const tables; thread-safe. */
#ifndef COLIBRI_TOK_UNICASE_H
#define COLIBRI_TOK_UNICASE_H

#include <stdint.h>

enum {
    TOK_UC_UPPER = 1,      /* c.isupper() */
    TOK_UC_LOWER = 2,      /* c.islower() */
    TOK_UC_TITLE = 4,      /* titlecase letter (c.istitle() and not c.isupper()) */
    TOK_UC_CASED = 8,      /* Unicode Cased */
    TOK_UC_IGNORABLE = 16, /* Unicode Case_Ignorable */
    TOK_UC_NONPRINT = 32,  /* not c.isprintable(): repr() escapes it */
};

enum tok_uc_case { TOK_UC_TO_UPPER, TOK_UC_TO_LOWER, TOK_UC_TO_TITLE };

/* The TOK_UC_* flags of cp (NONPRINT for surrogates and cp > 0x10FFFF). */
unsigned tok_uc_props(uint32_t cp);

/* Python's full mapping of cp (c.upper(), c.lower() or c.title()) into out:
 * returns the number of code points written, 1 to 3. */
int tok_uc_map(uint32_t cp, enum tok_uc_case which, uint32_t out[3]);

#endif
