#include "kv/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* Which entry set layer l's latent tier / RoPE precision: the entry's text
 * as [start, start + len) of the name, len 0 for none. */
struct set_by { int start, len; };

static int bad(struct colibri_err *err, const char *name, const char *fmt, const char *a, int alen)
{
    char what[160];
    snprintf(what, sizeof what, fmt, alen, a);
    return base_err_set(err, COLIBRI_EINVAL, "--kv %s: %s", name, what);
}

/* LAYERS at p: "N" or "N-M"; *end past it. */
static int parse_range(const char *p, const char **end, long *lo, long *hi)
{
    char *e;
    errno = 0;
    if (*p < '0' || *p > '9') return -1;
    *lo = strtol(p, &e, 10);
    *hi = *lo;
    if (*e == '-') {
        const char *q = e + 1;
        if (*q < '0' || *q > '9') return -1;
        *hi = strtol(q, &e, 10);
    }
    if (errno) return -1;
    *end = e;
    return 0;
}

static int set_once(struct set_by *by, int l, int start, int len, const char *what, const char *name,
                    struct colibri_err *err)
{
    if (by[l].len) {
        char msg[320];
        snprintf(msg, sizeof msg, "layer %d's %s is set twice (@%.*s and @%.*s)", l, what, by[l].len,
                 name + by[l].start, len, name + start);
        return base_err_set(err, COLIBRI_EINVAL, "--kv %s: %s", name, msg);
    }
    by[l] = (struct set_by){ start, len };
    return 0;
}

int kv_layout_parse(const char *name, enum kv_rope_prec rope, int n_layers, struct kv_layer_spec *spec,
                    struct colibri_err *err)
{
    char names[256];
    size_t base_len = strcspn(name, "@");
    char tname[32];
    snprintf(tname, sizeof tname, "%.*s", (int)(base_len < sizeof tname - 1 ? base_len : sizeof tname - 1), name);
    int base = base_len < sizeof tname ? kv_tier_from_name(tname) : -1;
    if (base < 0) {
        kv_tier_names(names, sizeof names, " ");
        if (!name[base_len])
            return base_err_set(err, COLIBRI_EINVAL, "--kv: unknown KV tier '%s' (%s)", name, names);
        return base_err_set(err, COLIBRI_EINVAL, "--kv %s: unknown KV tier '%.*s' (%s)", name, (int)base_len, name,
                            names);
    }
    int *tier = malloc((size_t)n_layers * sizeof *tier), *rp = malloc((size_t)n_layers * sizeof *rp);
    struct set_by *tby = calloc((size_t)n_layers, sizeof *tby), *rby = calloc((size_t)n_layers, sizeof *rby);
    int rc = 0;
    if (!tier || !rp || !tby || !rby) rc = base_err_set(err, COLIBRI_ENOMEM, "--kv %s: layer table", name);
    for (int l = 0; !rc && l < n_layers; l++) tier[l] = base, rp[l] = -1;
    for (const char *p = name + base_len; !rc && *p == '@';) {
        const char *entry = p + 1, *q;
        int elen = (int)strcspn(entry, "@");
        long lo, hi;
        if (parse_range(entry, &q, &lo, &hi) || *q != ':' || q == entry + elen - 1 || q + 1 > entry + elen) {
            rc = bad(err, name, "'@%.*s' is not LAYERS:SETTING (e.g. @1:rope=f32, @0-2:int8r)", entry, elen);
            break;
        }
        if (entry[elen - 1] == ':') {
            rc = bad(err, name, "'@%.*s' ends in ':' (a setting is missing)", entry, elen);
            break;
        }
        if (lo > hi) {
            rc = bad(err, name, "'@%.*s': the layer range is empty", entry, elen);
            break;
        }
        if (lo < 0 || hi >= n_layers) {
            char msg[200];
            snprintf(msg, sizeof msg, "'@%.*s': layer %ld is outside the model's layers 0-%d", elen, entry,
                     hi >= n_layers ? hi : lo, n_layers - 1);
            rc = base_err_set(err, COLIBRI_EINVAL, "--kv %s: %s", name, msg);
            break;
        }
        int set_tier = -1, set_rope = -1;
        for (const char *s = q + 1; !rc && s < entry + elen;) {
            int slen = (int)strcspn(s, ":@");
            char v[32];
            if (slen == 0 || slen >= (int)sizeof v) {
                rc = bad(err, name, "'@%.*s': an empty or overlong setting", entry, elen);
                break;
            }
            snprintf(v, sizeof v, "%.*s", slen, s);
            if (!strncmp(v, "rope=", 5)) {
                int x = kv_rope_from_name(v + 5);
                if (x < 0) {
                    kv_rope_names(names, sizeof names, " ");
                    char msg[320];
                    snprintf(msg, sizeof msg, "'@%.*s': unknown RoPE precision '%s' (%s)", elen, entry, v + 5, names);
                    rc = base_err_set(err, COLIBRI_EINVAL, "--kv %s: %s", name, msg);
                } else if (set_rope >= 0) {
                    rc = bad(err, name, "'@%.*s' sets the RoPE precision twice", entry, elen);
                }
                set_rope = x;
            } else {
                int x = kv_tier_from_name(v);
                if (x < 0) {
                    kv_tier_names(names, sizeof names, " ");
                    char msg[320];
                    snprintf(msg, sizeof msg, "'@%.*s': unknown KV tier '%s' (%s; a RoPE precision is rope=PREC)",
                             elen, entry, v, names);
                    rc = base_err_set(err, COLIBRI_EINVAL, "--kv %s: %s", name, msg);
                } else if (set_tier >= 0) {
                    rc = bad(err, name, "'@%.*s' sets the latent tier twice", entry, elen);
                }
                set_tier = x;
            }
            s += slen;
            if (*s == ':') s++;
        }
        for (long l = lo; !rc && l <= hi; l++) {
            if (set_tier >= 0 && !(rc = set_once(tby, (int)l, (int)(entry - name), elen, "latent tier", name, err)))
                tier[l] = set_tier;
            if (!rc && set_rope >= 0 && !(rc = set_once(rby, (int)l, (int)(entry - name), elen, "RoPE precision", name, err)))
                rp[l] = set_rope;
        }
        p = entry + elen;
    }
    for (int l = 0; !rc && l < n_layers; l++) {
        memset(&spec[l], 0, sizeof spec[l]);
        spec[l].tier = (enum kv_tier)tier[l];
        spec[l].rope = rp[l] >= 0 ? (enum kv_rope_prec)rp[l] : rope != KV_ROPE_DEFAULT ? rope : kv_rope_default(spec[l].tier);
    }
    free(tier);
    free(rp);
    free(tby);
    free(rby);
    return rc;
}

/* snprintf that keeps counting past the end of buf. */
static size_t put(char *buf, size_t n, size_t at, const char *fmt, const char *a, const char *b)
{
    int k = snprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, fmt, a, b);
    return at + (k > 0 ? (size_t)k : 0);
}

size_t kv_layout_options(const enum kv_tier *tier, const enum kv_rope_prec *rope, int n_layers, char *buf, size_t n)
{
    if (n) buf[0] = 0;
    /* the base: the most common (tier, rope), the first on ties */
    int best = 0, best_count = 0;
    for (int l = 0; l < n_layers; l++) {
        int count = 0;
        for (int k = 0; k < n_layers; k++) count += tier[k] == tier[l] && rope[k] == rope[l];
        if (count > best_count) best = l, best_count = count;
    }
    if (n_layers <= 0) return 0;
    enum kv_tier bt = tier[best];
    enum kv_rope_prec br = rope[best];
    int global_rope = br != kv_rope_default(bt);
    size_t at = put(buf, n, 0, "--kv %s%s", kv_tier_name(bt), "");
    for (int l = 0; l < n_layers;) {
        if (tier[l] == bt && rope[l] == br) {
            l++;
            continue;
        }
        int e = l;
        while (e + 1 < n_layers && tier[e + 1] == tier[l] && rope[e + 1] == rope[l]) e++;
        char range[32];
        if (e > l) snprintf(range, sizeof range, "@%d-%d", l, e);
        else snprintf(range, sizeof range, "@%d", l);
        at = put(buf, n, at, "%s%s", range, "");
        if (tier[l] != bt) at = put(buf, n, at, ":%s%s", kv_tier_name(tier[l]), "");
        enum kv_rope_prec implied = global_rope ? br : kv_rope_default(tier[l]);
        if (rope[l] != implied) at = put(buf, n, at, ":rope=%s%s", kv_rope_name(rope[l]), "");
        l = e + 1;
    }
    if (global_rope) at = put(buf, n, at, " --kv-rope %s%s", kv_rope_name(br), "");
    return at;
}

size_t kv_layout_options_of(const struct kv_cache *c, char *buf, size_t n)
{
    enum kv_tier *t = malloc((size_t)c->n_layers * sizeof *t);
    enum kv_rope_prec *r = malloc((size_t)c->n_layers * sizeof *r);
    size_t len = 0;
    if (t && r) {
        for (int l = 0; l < c->n_layers; l++) t[l] = c->layer[l].tier, r[l] = c->layer[l].rope;
        len = kv_layout_options(t, r, c->n_layers, buf, n);
    } else if (n) {
        snprintf(buf, n, "--kv ?");
    }
    free(t);
    free(r);
    return len;
}
