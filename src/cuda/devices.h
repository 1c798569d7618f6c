/* cuda/devices.h - the drivers of model/backend.h by name, for the callers
 * that open a device (api/): "host", the CPU replay of the CUDA kernels
 * (cuda/replay_dev.c, in every build: a test device), and "cuda", the GPU
 * (cuda/backend_cuda.c, only in the binaries `make CUDA=1` links with it). */
#ifndef COLIBRI_CUDA_DEVICES_H
#define COLIBRI_CUDA_DEVICES_H

#include "colibri.h"
#include "model/backend.h"

/* The replay device (cuda/replay_dev.c). */
extern const struct backend_ops cuda_replay_ops;

/* The driver named `name`: its ops, or COLIBRI_EUNSUPPORTED ("cuda" in a
 * build without the backend) / COLIBRI_EINVAL (an unknown name), naming it. */
int cuda_device_ops(const char *name, const struct backend_ops **out, struct colibri_err *err);

#endif
