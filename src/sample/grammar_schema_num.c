/* sample/grammar_schema_num.c - minimum, maximum, exclusiveMinimum and
 * exclusiveMaximum as GBNF (contract in grammar_schema_parts.h).
 *
 * An integer range [a, b] of non-negative numbers is split into runs that a
 * digit pattern covers exactly: first by digit count (no leading zeros),
 * then greedily into blocks "prefix [d1-d2] [0-9]{k}" (the classic
 * range-to-regex construction). Negative values are "-" and the range of
 * their magnitudes. A number (with a fraction) is an integer part and a
 * fraction: x >= a allows integer parts from a with any fraction, x > a
 * allows the integer part a only with a fraction that is not all zeros,
 * x <= b allows integer parts below b with any fraction and b itself with
 * a fraction of zeros only,
 * x < b integer parts below b. */
#include <math.h>
#include <stdio.h>

#include "sample/grammar_schema_parts.h"

#define MAX_ABS 1e15
#define MAX_DIGITS 16           /* the prelude's integers: [1-9] [0-9]{0,15} */

static long long pow10i(int k)
{
    long long p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

static int ndigits(long long v)
{
    int d = 1;
    while (v >= 10) { v /= 10; d++; }
    return d;
}

/* Alternatives for the integers in [a, b] (0 <= a <= b; b < 0: no upper
 * bound), each prefixed with " | " unless it is the first (*n counts them). */
static void uint_range(struct strbuf *o, long long a, long long b, int *n)
{
    int unbounded = b < 0;
    if (unbounded) b = pow10i(ndigits(a)) - 1;
    while (a <= b) {
        int d = ndigits(a);
        long long top = pow10i(d) - 1, hi = b < top ? b : top;
        while (a <= hi) {
            int k = 0;
            while (k + 1 < d && a % pow10i(k + 1) == 0 && a + pow10i(k + 1) - 1 <= hi) k++;
            long long step = pow10i(k), lead = a / step;
            int last = (int)(lead % 10), cnt = 1;
            while (last + cnt <= 9 && a + (cnt + 1) * step - 1 <= hi) cnt++;
            base_sb_puts(o, (*n)++ ? " | " : "");
            if (lead >= 10) base_sb_appendf(o, "\"%lld\" ", lead / 10);
            if (cnt == 1) base_sb_appendf(o, "\"%d\"", last);
            else base_sb_appendf(o, "[%d-%d]", last, last + cnt - 1);
            if (k) base_sb_appendf(o, " [0-9]{%d}", k);
            a += cnt * step;
        }
    }
    if (unbounded && ndigits(b) < MAX_DIGITS)
        base_sb_appendf(o, "%s[1-9] [0-9]{%d,%d}", (*n)++ ? " | " : "", ndigits(b), MAX_DIGITS - 1);
}

/* The non-negative numbers x with a <(=) x <(=) b (b < 0: unbounded),
 * a and b integers; fractions as the header says. */
static void unum_range(struct strbuf *o, long long a, int a_excl, long long b, int b_excl, int *n)
{
    static const char FRAC[] = " ( \".\" [0-9]+ )?", NZFRAC[] = " \".\" [0-9]* [1-9] [0-9]*";
    if (a_excl && (b < 0 || a < b)) base_sb_appendf(o, "%s\"%lld\"%s", (*n)++ ? " | " : "", a, NZFRAC);
    long long start = a_excl ? a + 1 : a;
    if (b < 0 || start <= b - 1) {
        base_sb_puts(o, (*n)++ ? " | ( " : "( ");
        int m = 0;
        uint_range(o, start, b < 0 ? -1 : b - 1, &m);
        base_sb_appendf(o, " )%s", FRAC);
    }
    if (b >= 0 && !b_excl && (b > a || !a_excl))
        base_sb_appendf(o, "%s\"%lld\" ( \".\" \"0\"+ )?", (*n)++ ? " | " : "", b);
}

int sample_schema_number_range(struct strbuf *o, int integer, struct schema_bound lo, struct schema_bound hi,
                               char *why, size_t why_n)
{
    if ((lo.has && fabs(lo.v) > MAX_ABS) || (hi.has && fabs(hi.v) > MAX_ABS)) {
        snprintf(why, why_n, "a bound beyond +-1e15");
        return -1;
    }
    int n = 0;
    base_sb_puts(o, "( ");
    if (integer) {      /* inclusive integer bounds */
        long long l = 0, h = 0;
        if (lo.has) l = lo.excl ? (long long)floor(lo.v) + 1 : (long long)ceil(lo.v);
        if (hi.has) h = hi.excl ? (long long)ceil(hi.v) - 1 : (long long)floor(hi.v);
        if (lo.has && hi.has && l > h) {
            snprintf(why, why_n, "no integer lies between the bounds");
            return -1;
        }
        if (!lo.has || l < 0) {     /* negatives: their magnitudes */
            long long m_lo = hi.has && h < 0 ? -h : 1, m_hi = lo.has ? -l : -1;
            base_sb_puts(o, "\"-\" ( ");
            int m = 0;
            uint_range(o, m_lo, m_hi, &m);
            base_sb_puts(o, " )");
            n++;
        }
        if (!hi.has || h >= 0) {
            base_sb_puts(o, n++ ? " | ( " : "( ");
            int m = 0;
            uint_range(o, lo.has && l > 0 ? l : 0, hi.has ? h : -1, &m);
            base_sb_puts(o, " )");
        }
        base_sb_puts(o, " )");
        return 0;
    }
    if ((lo.has && lo.v != floor(lo.v)) || (hi.has && hi.v != floor(hi.v))) {
        snprintf(why, why_n, "a bound that is not a whole number on a 'number' (whole bounds, or type 'integer')");
        return -1;
    }
    if (lo.has && hi.has && (lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl)))) {
        snprintf(why, why_n, "no number lies between the bounds");
        return -1;
    }
    long long l = (long long)lo.v, h = (long long)hi.v;
    if (!lo.has || l < 0) {     /* x < 0: its magnitude m > 0 (or >= -h when h < 0) */
        int m = 0;
        base_sb_puts(o, "\"-\" ( ");
        if (hi.has && h < 0) unum_range(o, -h, hi.excl, lo.has ? -l : -1, lo.excl, &m);
        else unum_range(o, 0, 1, lo.has ? -l : -1, lo.excl, &m);
        base_sb_puts(o, " )");
        n++;
    }
    if (!hi.has || h > 0 || (h == 0 && !hi.excl)) {
        int m = 0;
        base_sb_puts(o, n++ ? " | ( " : "( ");
        int pos = lo.has && l >= 0;
        unum_range(o, pos ? l : 0, pos ? lo.excl : 0, hi.has ? h : -1, hi.excl, &m);
        base_sb_puts(o, " )");
    }
    base_sb_puts(o, " )");
    return 0;
}
