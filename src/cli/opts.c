#include "cli/opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

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

/* Spellings llama.cpp and vLLM users type, accepted for a command's own
 * option of the canonical name when the command has one. */
static const struct { const char *alias, *name; } ALIASES[] = {
    { "--ctx-size", "ctx" },   { "--temperature", "temp" }, { "--parallel", "slots" }, { "-np", "slots" },
    { "--n-predict", "gen" },  { "--max-tokens", "n-predict" }, { "--threads-batch", "threads" },
    { "--repeat_penalty", "repeat-penalty" },
};

/* llama-server habits a pasted command line brings: switches for what
 * colibri always does (accepted with a one-line note, their value too where
 * llama.cpp takes one), and ones with no counterpart (refused, naming what
 * to use instead). Return: 1 handled (*skip: how many values it took), -1
 * refused, 0 not one of them. */
static int habit(const char *a, size_t len, const char *next, int *skip)
{
    static const struct { const char *name; int value; int refuse; const char *note; } H[] = {
        { "--jinja", 0, 0, "colibri always runs the model's own Jinja chat template" },
        { "-fa", 2, 0, "colibri's attention is always fused (there is no flash-attention switch)" },
        { "--flash-attn", 2, 0, "colibri's attention is always fused (there is no flash-attention switch)" },
        { "-cb", 0, 0, "colibri batches requests continuously, always" },
        { "--cont-batching", 0, 0, "colibri batches requests continuously, always" },
        { "--metrics", 0, 0, "colibri serve always answers /metrics" },
        { "--no-mmap", 0, 0, "colibri maps the weights read-only and pages them in as needed; bound their memory "
                             "with --ram" },
        { "-ngl", 1, 1, "colibri offloads no count of layers: decode runs on a device with --device cuda (a CUDA "
                        "build, make CUDA=1), else on the CPU" },
        { "--n-gpu-layers", 1, 1, "colibri offloads no count of layers: decode runs on a device with --device cuda "
                                  "(a CUDA build, make CUDA=1), else on the CPU" },
        { "--gpu-layers", 1, 1, "colibri offloads no count of layers: decode runs on a device with --device cuda (a "
                                "CUDA build, make CUDA=1), else on the CPU" },
    };
    for (size_t i = 0; i < sizeof H / sizeof *H; i++) {
        if (strlen(H[i].name) != len || strncmp(a, H[i].name, len)) continue;
        if (H[i].refuse) {
            fprintf(stderr, "colibri: option '%s' is not taken: %s\n", H[i].name, H[i].note);
            return -1;
        }
        /* value 2: llama.cpp's newer on|off|auto, taken when it is there */
        *skip = H[i].value == 1 || (H[i].value == 2 && next && (!strcmp(next, "on") || !strcmp(next, "off") ||
                                                                  !strcmp(next, "auto")));
        fprintf(stderr, "colibri: note: %s ignored: %s\n", H[i].name, H[i].note);
        return 1;
    }
    if (len == 7 && !strncmp(a, "--mlock", 7)) {
        /* lock every page, the model's mapping included, as it is touched */
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur != RLIM_INFINITY) {
            fprintf(stderr, "colibri: --mlock: the locked-memory limit is %llu KiB (ulimit -l); raise it to "
                            "unlimited to lock the weights in RAM\n", (unsigned long long)rl.rlim_cur / 1024);
            return -1;
        }
        if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
            fprintf(stderr, "colibri: --mlock: mlockall failed: %s\n", strerror(errno));
            return -1;
        }
        *skip = 0;
        return 1;
    }
    return 0;
}

/* Options colibri once took, with what to do instead, so an old script
 * gets an error it can act on. */
static const char *retired(const char *a, size_t len)
{
    static const struct { const char *name, *why; } gone[] = {
        { "--no-kv-b-f32", "kv_b rows are dequantized as they are read by default now (as fast, no copy); "
                           "--kv-b-f32 keeps the f32 copy" },
    };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (strlen(gone[i].name) == len && !strncmp(a, gone[i].name, len)) return gone[i].why;
    return NULL;
}

/* arg is "-x", "--name" or an alias, with any "=value" cut off: name_len chars. */
static const struct opt *find(const struct opts_spec *spec, const char *arg, size_t len)
{
    for (int i = 0; i < spec->n_opts; i++) {
        const struct opt *o = &spec->opts[i];
        if (len > 2 && arg[0] == '-' && arg[1] == '-' && strlen(o->name) == len - 2 && !strncmp(arg + 2, o->name, len - 2))
            return o;
        if (len == 2 && arg[0] == '-' && arg[1] == o->short_name && o->short_name) return o;
    }
    for (size_t a = 0; a < sizeof ALIASES / sizeof ALIASES[0]; a++)
        if (strlen(ALIASES[a].alias) == len && !strncmp(arg, ALIASES[a].alias, len))
            for (int i = 0; i < spec->n_opts; i++)
                if (!strcmp(spec->opts[i].name, ALIASES[a].name)) return &spec->opts[i];
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
        if (o->type == OPT_INT)
            fprintf(stderr, "colibri: --%s: %s is out of range [%.0f, %.0f]\n", o->name, v, o->min, o->max);
        else
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
            /* --name=value, as argparse and llama.cpp accept */
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const struct opt *o = find(spec, a, len);
            int skip = 0, h = o ? 0 : habit(a, len, eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL, &skip);
            if (h < 0) return -1;
            if (h > 0) {
                if (!eq) i += skip;
                continue;
            }
            if (!o) {
                const char *why = retired(a, len);
                if (why) fprintf(stderr, "colibri: option '%.*s' is no longer taken: %s\n", (int)len, a, why);
                else fprintf(stderr, "colibri: unknown option '%.*s' (see --help)\n", (int)len, a);
                return -1;
            }
            if (o->type == OPT_FLAG) {
                if (eq) {
                    fprintf(stderr, "colibri: option '--%s' takes no value\n", o->name);
                    return -1;
                }
                *(int *)o->dest = 1;
                continue;
            }
            if (eq) {
                if (set_value(o, eq + 1)) return -1;
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

int opts_mtp(const char *mode, int n_draft, int n_mtp_layers, int *n_draft_out, int *auto_out)
{
    *n_draft_out = 0;
    *auto_out = 0;
    if (!mode || !strcmp(mode, "off")) return 0;
    int on = !strcmp(mode, "on"), au = !strcmp(mode, "auto");
    if (!on && !au) {
        fprintf(stderr, "colibri: --mtp: '%s' is not on, off or auto\n", mode);
        return -1;
    }
    if (au && n_mtp_layers <= 0) return 0;
    *n_draft_out = n_draft > 0 ? n_draft : 2;
    *auto_out = au;
    return 0;
}
