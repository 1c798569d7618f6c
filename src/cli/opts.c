#include "cli/opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

/* Prints help with each list placeholder replaced by the names the library
 * accepts, so no list of formats or tiers is typed in the CLI. */
static void print_help(FILE *f, const char *help)
{
    static const struct { const char *key; size_t (*names)(char *buf, size_t n, const char *sep); } LISTS[] = {
        { OPTS_LIST_WEIGHT_FORMATS, colibri_weight_format_names },
        { OPTS_LIST_KV_TIERS, colibri_kv_tier_names },
        { OPTS_LIST_KV_ROPES, colibri_kv_rope_names },
    };
    for (const char *p = help; *p;) {
        size_t i = 0, n_lists = sizeof LISTS / sizeof LISTS[0];
        while (i < n_lists && strncmp(p, LISTS[i].key, strlen(LISTS[i].key))) i++;
        if (i == n_lists) {
            fputc(*p++, f);
            continue;
        }
        char names[256];
        LISTS[i].names(names, sizeof names, " ");
        fputs(names, f);
        p += strlen(LISTS[i].key);
    }
    fputc('\n', f);
}

void opts_usage(const struct opts_spec *spec, FILE *f)
{
    fprintf(f, "usage: %s\n\n%s\n\noptions:\n", spec->usage, spec->summary);
    for (int i = 0; i < spec->n_opts; i++) {
        const struct opt *o = &spec->opts[i];
        char left[64];
        const char *arg = o->type == OPT_INT ? " N" : o->type == OPT_FLOAT ? " X" : o->type == OPT_STR ? " S" : "";
        if (o->short_name) snprintf(left, sizeof left, "-%c, --%s%s", o->short_name, o->name, arg);
        else snprintf(left, sizeof left, "    --%s%s", o->name, arg);
        fprintf(f, "  %-26s ", left);
        print_help(f, o->help);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
}

static const struct opt *find(const struct opts_spec *spec, const char *arg)
{
    for (int i = 0; i < spec->n_opts; i++) {
        const struct opt *o = &spec->opts[i];
        if (arg[0] == '-' && arg[1] == '-' && !strcmp(arg + 2, o->name)) return o;
        if (arg[0] == '-' && arg[1] && !arg[2] && arg[1] == o->short_name && o->short_name) return o;
    }
    return NULL;
}

static int set_value(const struct opt *o, const char *v)
{
    char *end;
    errno = 0;
    if (o->type == OPT_STR) {
        *(const char **)o->dest = v;
        return 0;
    }
    double x = o->type == OPT_INT ? (double)strtoll(v, &end, 10) : strtod(v, &end);
    if (errno || end == v || *end) {
        fprintf(stderr, "colibri: --%s: '%s' is not %s\n", o->name, v, o->type == OPT_INT ? "an integer" : "a number");
        return -1;
    }
    if ((o->min != 0 || o->max != 0) && (x < o->min || x > o->max)) {
        fprintf(stderr, "colibri: --%s: %s is out of range [%g, %g]\n", o->name, v, o->min, o->max);
        return -1;
    }
    if (o->type == OPT_INT) *(int *)o->dest = (int)x;
    else *(float *)o->dest = (float)x;
    return 0;
}

int opts_parse(const struct opts_spec *spec, int argc, char **argv, char **pos, int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            opts_usage(spec, stdout);
            return 1;
        }
        if (a[0] == '-' && a[1] && strcmp(a, "-")) {
            const struct opt *o = find(spec, a);
            if (!o) {
                fprintf(stderr, "colibri: unknown option '%s' (see --help)\n", a);
                return -1;
            }
            if (o->type == OPT_FLAG) {
                *(int *)o->dest = 1;
                continue;
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "colibri: option '%s' needs a value\n", a);
                return -1;
            }
            if (set_value(o, argv[++i])) return -1;
            continue;
        }
        if (*n_pos >= max_pos) {
            fprintf(stderr, "colibri: unexpected argument '%s' (see --help)\n", a);
            return -1;
        }
        pos[(*n_pos)++] = argv[i];
    }
    return 0;
}

int opts_int_list(const char *name, const char *s, int *out, int max, int min, int max_value)
{
    int n = 0;
    for (const char *p = s;; p++) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || v < min || v > max_value) {
            fprintf(stderr, "colibri: --%s: '%.*s' in '%s' is not an integer in [%d, %d]\n", name,
                    (int)strcspn(p, ","), p, s, min, max_value);
            return -1;
        }
        if (n == max) {
            fprintf(stderr, "colibri: --%s: '%s' holds more than %d values\n", name, s, max);
            return -1;
        }
        out[n++] = (int)v;
        if (!*end) return n;
        p = end;
    }
}

const char *opts_env_kv_tier(void)
{
    static const char *const TQ[] = { "tq2", "tq3", "tq4" }, *const POLAR[] = { "polar2", "polar3", "polar4" };
    const char *tq = getenv("KV_TQ"), *polar = getenv("KV_TQ_POLAR"), *kv8 = getenv("KV8");
    int bits = 4;
    if (tq && *tq) {
        if (strlen(tq) != 1 || tq[0] < '2' || tq[0] > '4') {
            fprintf(stderr, "colibri: KV_TQ=%s ignored (2, 3 or 4)\n", tq);
            tq = NULL;
        } else {
            bits = tq[0] - '0';
        }
    }
    if (polar && !strcmp(polar, "1")) return POLAR[bits - 2];
    if (tq && *tq) return TQ[bits - 2];
    if (kv8 && !strcmp(kv8, "1")) return "fp8";
    return NULL;
}

const char *opts_env_api_key(void)
{
    const char *k = getenv("COLIBRI_API_KEY");
    return k && *k ? k : NULL;
}

int opts_env_omp_policy_chosen(void)
{
    return getenv("OMP_WAIT_POLICY") != NULL || getenv("GOMP_SPINCOUNT") != NULL;
}
