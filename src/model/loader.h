/* model/loader.h - what a layer's parts load their weights with (the
 * loader itself is model/weights.c's, alive during model_load only).
 *
 * Names are full checkpoint names. Every tensor a call finds is marked as
 * consumed: model_load refuses a checkpoint with tensors nothing consumed,
 * naming them. Each call returns 0 or a negative COLIBRI_E* whose message
 * names the file and the tensor (missing, wrong shape, dtype). */
#ifndef COLIBRI_MODEL_LOADER_H
#define COLIBRI_MODEL_LOADER_H

#include "colibri.h"
#include "model/mlp.h"
#include "quant/qtensor.h"

struct model;

/* Which --experts / --dense / --embed format a Linear weight takes. */
enum model_weight_role { MODEL_ROLE_DENSE, MODEL_ROLE_EXPERT, MODEL_ROLE_EMBED, MODEL_ROLE_F32 };

/* The loader as a table, so that parts depend on this header alone. */
struct model_loader {
    struct model *m;            /* the model being loaded (its config, its expert store) */
    void *ctx;
    /* 1 when the checkpoint has tensor `name` (marking it consumed). */
    int (*has)(void *ctx, const char *name);
    /* A Linear weight [rows, cols] in its role's format (as stored by default). */
    int (*mat)(void *ctx, const char *name, int rows, int cols, enum model_weight_role role, struct qtensor *w,
               struct colibri_err *err);
    /* A vector [n] widened to a new f32 array. */
    int (*vec)(void *ctx, const char *name, int n, float **out, struct colibri_err *err);
    /* prefix.{gate,up,down}_proj.weight of intermediate width inter. */
    int (*mlp)(void *ctx, const char *prefix, int inter, enum model_weight_role role, struct mlp_weights *mlp,
               struct colibri_err *err);
    /* Layer li's routed experts under prefix (`prefix.experts.E.*` per
     * expert, or transformers v5's fused `prefix.experts.gate_up_proj` /
     * `down_proj`) into the model's resident expert store. */
    int (*routed_experts)(void *ctx, const char *prefix, int li, struct colibri_err *err);
    /* An integer table [rows, cols] (I64 or I32 in the file) widened to a new int64 array. */
    int (*i64)(void *ctx, const char *name, int64_t rows, int64_t cols, int64_t **out, struct colibri_err *err);
};

static inline struct model *model_loader_model(const struct model_loader *L) { return L->m; }
static inline int model_loader_has(const struct model_loader *L, const char *name) { return L->has(L->ctx, name); }
static inline int model_loader_mat(const struct model_loader *L, const char *name, int rows, int cols,
                                   enum model_weight_role role, struct qtensor *w, struct colibri_err *err)
{
    return L->mat(L->ctx, name, rows, cols, role, w, err);
}
static inline int model_loader_vec(const struct model_loader *L, const char *name, int n, float **out,
                                   struct colibri_err *err)
{
    return L->vec(L->ctx, name, n, out, err);
}
static inline int model_loader_mlp(const struct model_loader *L, const char *prefix, int inter,
                                   enum model_weight_role role, struct mlp_weights *mlp, struct colibri_err *err)
{
    return L->mlp(L->ctx, prefix, inter, role, mlp, err);
}
static inline int model_loader_routed_experts(const struct model_loader *L, const char *prefix, int li,
                                              struct colibri_err *err)
{
    return L->routed_experts(L->ctx, prefix, li, err);
}

static inline int model_loader_i64(const struct model_loader *L, const char *name, int64_t rows, int64_t cols,
                                   int64_t **out, struct colibri_err *err)
{
    return L->i64(L->ctx, name, rows, cols, out, err);
}

#endif
