/* model/quant_config.c - quantization_config: the implemented encodings
 * accepted field by field, everything else refused by name (contract in
 * model/quant_config.h). */
#include "model/quant_config.h"

#include <cjson/cJSON.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"

#define QC "quantization_config"

static const cJSON *field(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A field that must be absent/null or the string want (want2 also accepted
 * when not NULL). */
static int want_str(const cJSON *o, const char *key, const char *want, const char *want2, const char *where,
                    const char *path, struct colibri_err *err)
{
    const cJSON *v = field(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v) && (!strcmp(v->valuestring, want) || (want2 && !strcmp(v->valuestring, want2)))) return 0;
    return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.%s %s%s%s is not implemented (colibri reads %s%s%s)", path,
                        where, key, cJSON_IsString(v) ? "'" : "", cJSON_IsString(v) ? v->valuestring : "(not a string)",
                        cJSON_IsString(v) ? "'" : "", want, want2 ? " or " : "", want2 ? want2 : "");
}

static int is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

static int parse_fp8(const cJSON *qc, const char *path, struct model_quant_config *out, struct colibri_err *err)
{
    const cJSON *bs = field(qc, "weight_block_size");
    if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(bs, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(bs, 1)) || cJSON_GetArrayItem(bs, 0)->valuedouble != 128 ||
        cJSON_GetArrayItem(bs, 1)->valuedouble != 128)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".weight_block_size must be [128, 128] for "
                            "quant_method 'fp8' (per-tensor or other block fp8 is not implemented)", path);
    int rc;
    if ((rc = want_str(qc, "fmt", "e4m3", NULL, QC, path, err)) ||
        (rc = want_str(qc, "activation_scheme", "dynamic", NULL, QC, path, err)) ||
        (rc = want_str(qc, "scale_fmt", "ue8m0", NULL, QC, path, err)))
        return rc;
    out->kind = MODEL_QUANT_FP8_BLOCK;
    return 0;
}

static int parse_weights(const cJSON *w, const char *where, const char *path, struct colibri_err *err)
{
    if (!cJSON_IsObject(w))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights is missing (no weight quantization is not "
                            "implemented)", path, where);
    const cJSON *bits = field(w, "num_bits"), *gs = field(w, "group_size"), *sym = field(w, "symmetric");
    int rc;
    if ((rc = want_str(w, "type", "int", NULL, where, path, err)) ||
        (rc = want_str(w, "strategy", "group", NULL, where, path, err)))
        return rc;
    if (!cJSON_IsString(field(w, "type")) || !cJSON_IsString(field(w, "strategy")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights needs type 'int' and strategy 'group'", path,
                            where);
    if (!cJSON_IsNumber(bits) || bits->valuedouble != 4)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.num_bits %g is not implemented (colibri reads "
                            "4)", path, where, cJSON_IsNumber(bits) ? bits->valuedouble : -1.0);
    if (!cJSON_IsNumber(gs) || gs->valuedouble != 32)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.group_size %g is not implemented (colibri "
                            "reads 32)", path, where, cJSON_IsNumber(gs) ? gs->valuedouble : -1.0);
    if (!cJSON_IsTrue(sym))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.symmetric is not true: asymmetric (zero-point) "
                            "int4 is not implemented", path, where);
    if (cJSON_IsTrue(field(w, "dynamic")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.dynamic is true: not implemented", path, where);
    const cJSON *ao = field(w, "actorder");
    if (!is_null(ao) && !cJSON_IsFalse(ao))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.actorder %s is not implemented", path, where,
                            cJSON_IsString(ao) ? ao->valuestring : "(set)");
    if (!is_null(field(w, "block_structure")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.weights.block_structure is not implemented", path, where);
    return 0;
}

static int add_ignore(struct model_quant_config *out, const char *s, const char *path, struct colibri_err *err)
{
    size_t used = 0;
    for (int i = 0; i < out->n_ignore; i++) used += strlen(out->ignore + used) + 1;
    size_t n = strlen(s) + 1;
    if (used + n > sizeof out->ignore)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".ignore is longer than %zu bytes", path,
                            sizeof out->ignore);
    memcpy(out->ignore + used, s, n);
    out->n_ignore++;
    return 0;
}

static int parse_ct(const cJSON *qc, const char *path, struct model_quant_config *out, struct colibri_err *err)
{
    int rc;
    const cJSON *fmt = field(qc, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "pack-quantized"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".format %s%s%s is not implemented for "
                            "compressed-tensors (colibri reads 'pack-quantized')", path, cJSON_IsString(fmt) ? "'" : "",
                            cJSON_IsString(fmt) ? fmt->valuestring : "(missing)", cJSON_IsString(fmt) ? "'" : "");
    if ((rc = want_str(qc, "quantization_status", "compressed", NULL, QC, path, err))) return rc;
    if (!is_null(field(qc, "kv_cache_scheme")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".kv_cache_scheme is not implemented", path);
    if (!is_null(field(qc, "sparsity_config")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".sparsity_config is not implemented", path);
    const cJSON *groups = field(qc, "config_groups");
    if (!cJSON_IsObject(groups) || cJSON_GetArraySize(groups) != 1)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".config_groups must hold exactly one group (has "
                            "%d)", path, cJSON_IsObject(groups) ? cJSON_GetArraySize(groups) : 0);
    const cJSON *g = groups->child;
    char where[160];
    snprintf(where, sizeof where, QC ".config_groups.%s", g->string ? g->string : "?");
    if (!cJSON_IsObject(g)) return base_err_set(err, COLIBRI_EFORMAT, "%s: %s is not an object", path, where);
    if (!is_null(field(g, "input_activations")) || !is_null(field(g, "output_activations")))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s quantizes activations: not implemented (weight-only "
                            "int4 is)", path, where);
    if ((rc = want_str(g, "format", "pack-quantized", NULL, where, path, err))) return rc;
    const cJSON *targets = field(g, "targets");
    if (!cJSON_IsArray(targets) || cJSON_GetArraySize(targets) != 1 ||
        !cJSON_IsString(cJSON_GetArrayItem(targets, 0)) || strcmp(cJSON_GetArrayItem(targets, 0)->valuestring, "Linear"))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: %s.targets must be [\"Linear\"]", path, where);
    if ((rc = parse_weights(field(g, "weights"), where, path, err))) return rc;
    const cJSON *ig = field(qc, "ignore");
    if (!is_null(ig) && !cJSON_IsArray(ig))
        return base_err_set(err, COLIBRI_EFORMAT, "%s: " QC ".ignore is not a list", path);
    for (const cJSON *e = ig ? ig->child : NULL; e; e = e->next) {
        if (!cJSON_IsString(e)) return base_err_set(err, COLIBRI_EFORMAT, "%s: " QC ".ignore holds a non-string", path);
        if ((rc = add_ignore(out, e->valuestring, path, err))) return rc;
    }
    out->kind = MODEL_QUANT_CT_INT4;
    out->group_size = 32;
    /* every regex compiles, so a bad one is refused at config time */
    return model_quant_ignored(out, "", err) < 0 ? base_err_prefix(err, COLIBRI_EFORMAT, "%s", path) : 0;
}

int model_quant_config_parse(const cJSON *qc, const char *path, struct model_quant_config *out,
                             struct colibri_err *err)
{
    memset(out, 0, sizeof *out);
    if (is_null(qc)) return 0;
    if (!cJSON_IsObject(qc)) return base_err_set(err, COLIBRI_EFORMAT, "%s: " QC " is not an object", path);
    const cJSON *m = field(qc, "quant_method");
    if (!cJSON_IsString(m))
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC " without a quant_method string is not implemented",
                            path);
    if (!strcmp(m->valuestring, "fp8")) return parse_fp8(qc, path, out, err);
    if (!strcmp(m->valuestring, "compressed-tensors")) return parse_ct(qc, path, out, err);
    return base_err_set(err, COLIBRI_EUNSUPPORTED, "%s: " QC ".quant_method '%s' is not implemented (colibri reads "
                        "'fp8' with 128x128 blocks and 'compressed-tensors' pack-quantized int4 group 32)", path,
                        m->valuestring);
}

/* Python's \d as POSIX [0-9]; the rest is left to regcomp. */
static int compile(const char *pat, regex_t *re)
{
    char buf[1024];
    size_t o = 0;
    o += (size_t)snprintf(buf, sizeof buf, "^(");
    for (const char *p = pat; *p && o + 8 < sizeof buf; p++) {
        if (p[0] == '\\' && p[1] == 'd') {
            memcpy(buf + o, "[0-9]", 5);
            o += 5;
            p++;
        } else {
            buf[o++] = *p;
        }
    }
    if (o + 3 > sizeof buf) return -1;
    buf[o++] = ')';
    buf[o] = 0;
    return regcomp(re, buf, REG_EXTENDED | REG_NOSUB) ? -1 : 0;
}

int model_quant_ignored(const struct model_quant_config *q, const char *module, struct colibri_err *err)
{
    const char *p = q->ignore;
    for (int i = 0; i < q->n_ignore; i++, p += strlen(p) + 1) {
        if (strncmp(p, "re:", 3)) {
            if (!strcmp(p, module)) return 1;
            continue;
        }
        regex_t re;
        if (compile(p + 3, &re))
            return base_err_set(err, COLIBRI_EFORMAT, QC ".ignore entry '%s' is not a regex colibri can read", p);
        int hit = regexec(&re, module, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit) return 1;
    }
    return 0;
}
