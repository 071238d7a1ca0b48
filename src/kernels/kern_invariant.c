/* kern_invariant.c — kern_batch_invariant: the list of weight types whose kernels, on each
 * path, sum in an order that does not depend on the batch (see kern_invariant.h). Keep it in
 * step with the kernels: tests/test_batch_invariance.c checks every type it claims. */
#include "kernels/kern_invariant.h"

#include <string.h>

#include "kernels/kernels.h"
#include "tern.h"

bool kern_batch_invariant(int wtype)
{
    const char *isa = kern_isa_name();
    if (strcmp(isa, "scalar") == 0) return wtype >= 0 && wtype < TERN_TYPE_COUNT_;
    if (strcmp(isa, "avx512") == 0)
        return wtype == TERN_TYPE_Q4_0 || wtype == TERN_TYPE_Q8_0;
    return false;
}
