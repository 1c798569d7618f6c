#include "quant/kernels.h"
const struct quant_isa_table quant_isa_avx2 = { .k = { [QUANT_F32] = { 0, 0 } } };
