/* tok/tok_unicase.c - lookups into the generated case tables (contract in
 * tok_unicase.h): binary searches over sorted const arrays. */
#include "tok/tok_unicase.h"

#include <stddef.h>

#define UC_SPECIAL 0x40000000   /* a mapping at or above: UC_SPECIAL + index into UC_MULTI */

struct uc_map { uint32_t cp; int32_t up, lo, ti; };   /* deltas (or UC_SPECIAL + index) */
struct uc_run { uint32_t cp; uint8_t flags; };

#include "tok/tok_unicase_table.inc"

unsigned tok_uc_props(uint32_t cp)
{
    if (cp > 0x10FFFF) return TOK_UC_NONPRINT;
    size_t lo = 0, hi = sizeof UC_RUNS / sizeof *UC_RUNS;   /* the last run starting at or before cp */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (UC_RUNS[mid].cp <= cp) lo = mid;
        else hi = mid;
    }
    return UC_RUNS[lo].flags;
}

int tok_uc_map(uint32_t cp, enum tok_uc_case which, uint32_t out[3])
{
    size_t lo = 0, hi = sizeof UC_MAP / sizeof *UC_MAP;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (UC_MAP[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == sizeof UC_MAP / sizeof *UC_MAP || UC_MAP[lo].cp != cp) { out[0] = cp; return 1; }
    const struct uc_map *e = &UC_MAP[lo];
    int32_t d = which == TOK_UC_TO_UPPER ? e->up : which == TOK_UC_TO_LOWER ? e->lo : e->ti;
    if (d < UC_SPECIAL) { out[0] = (uint32_t)((int32_t)cp + d); return 1; }
    const uint32_t *m = UC_MULTI[d - UC_SPECIAL];
    int n = 0;
    while (n < 3 && m[n]) { out[n] = m[n]; n++; }
    return n;
}
