/* cuda/devices.c - the drivers by name (cuda/devices.h). */
#include "cuda/devices.h"

#include <string.h>

#include "base/err.h"

/* Present only in binaries linked with the CUDA backend (make CUDA=1). */
extern const struct backend_ops backend_cuda_ops __attribute__((weak));

int cuda_device_ops(const char *name, const struct backend_ops **out, struct colibri_err *err)
{
    if (!strcmp(name, "host")) {
        *out = &cuda_replay_ops;
        return 0;
    }
    if (!strcmp(name, "cuda")) {
        if (!&backend_cuda_ops)
            return base_err_set(err, COLIBRI_EUNSUPPORTED, "--device cuda: this build has no CUDA backend "
                                "(make CUDA=1 cuda-forward builds build/cuda/colibri with it)");
        *out = &backend_cuda_ops;
        return 0;
    }
    return base_err_set(err, COLIBRI_EINVAL, "--device: unknown device '%s' (host, cuda)", name);
}
