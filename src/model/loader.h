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

struct model_loader;
struct model;

/* Which --experts / --dense / --embed format a Linear weight takes. */
enum model_weight_role { MODEL_ROLE_DENSE, MODEL_ROLE_EXPERT, MODEL_ROLE_EMBED, MODEL_ROLE_F32 };

/* The model being loaded (its config; its expert store). */
struct model *model_loader_model(struct model_loader *L);
/* 1 when the checkpoint has tensor `name` (marking it consumed). */
int model_loader_has(struct model_loader *L, const char *name);
/* A Linear weight [rows, cols] in its role's format (as stored by default). */
int model_loader_mat(struct model_loader *L, const char *name, int rows, int cols, enum model_weight_role role,
                     struct qtensor *w, struct colibri_err *err);
/* A vector [n] widened to a new f32 array. */
int model_loader_vec(struct model_loader *L, const char *name, int n, float **out, struct colibri_err *err);
/* prefix.{gate,up,down}_proj.weight of intermediate width inter. */
int model_loader_mlp(struct model_loader *L, const char *prefix, int inter, enum model_weight_role role,
                     struct mlp_weights *mlp, struct colibri_err *err);
/* Layer li's routed experts under prefix (`prefix.experts.E.*` per expert,
 * or transformers v5's fused `prefix.experts.gate_up_proj`/`down_proj`)
 * into the model's resident expert store. */
int model_loader_routed_experts(struct model_loader *L, const char *prefix, int li, struct colibri_err *err);

#endif
