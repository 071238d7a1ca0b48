/* kern_neon.c — the integer matmul kernels of the NEON path built on the ARMv8.2 dot-product
 * instruction (SDOT). Compiled with -march=armv8.2-a+dotprod+fp16 (CMakeLists.txt,
 * scripts/test-neon.sh) and therefore called only when kern_neon_has_dotprod() said the CPU
 * has it; kern_neon_base.c holds everything that runs on a plain ARMv8.0 core.
 *
 * Read first: kern_neon.h, then kern_neon_impl.h (the kernels themselves). */
#include "kernels/kern_neon.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "kern_neon.c needs -march=armv8.2-a+dotprod (see CMakeLists.txt)"
#endif

#define KERN_DOTPROD 1
#include "kernels/kern_neon_impl.h"

kern_matmul_fn kern_neon_dot_matmul(int wtype) { return kn_int_matmul(wtype); }

#else
typedef int kern_neon_unused_on_this_target; /* ISO C wants a declaration in every file */
#endif
