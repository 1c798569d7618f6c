#include "model/norm.h"

#include "base/par.h"
#include "model/linear.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>

void model_rmsnorm(float *y, const float *x, const float *weight, int n, int d, float eps)
{
    /* rows are independent: the threads change no bit */
    BASE_PAR_FOR(!omp_in_parallel() && (int64_t)n * d >= MODEL_PAR_MIN_ELEMS, for (int t = 0; t < n; t++) {
        const float *xr = x + (int64_t)t * d;
        float *yr = y + (int64_t)t * d;
        float ss = 0.0f;
        for (int i = 0; i < d; i++) ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int i = 0; i < d; i++) yr[i] = weight[i] * (xr[i] * inv);
    });
}
