/* kern_neon.h — the AArch64 NEON path of src/kernels: what kern_neon.c (integer kernels with
 * the ARMv8.2 dot-product instruction) and kern_neon_base.c (everything that runs on any
 * ARMv8.0 NEON core: float kernels, activation quantizers, integer kernels without dotprod, CPU
 * detection) provide to kern_dispatch.c.
 *
 * Read first: kernels.h (the kern_matmul contract) and kern_neon_impl.h (how the kernels are
 * shaped). Only meaningful on AArch64; on other targets these files compile to nothing and
 * nothing here may be called. Every function returns static data: nothing to free. */
#ifndef TERN_KERN_NEON_H
#define TERN_KERN_NEON_H

#include <stdbool.h>

#include "kernels/kernels.h"

/* Advanced SIMD present (architecturally always on AArch64; checked anyway on Linux). */
bool kern_neon_available(void);
/* The SDOT/UDOT instructions (FEAT_DotProd): getauxval(AT_HWCAP) & HWCAP_ASIMDDP on Linux,
 * sysctl hw.optional.arm.FEAT_DotProd on Apple. Detected once; thread-safe. */
bool kern_neon_has_dotprod(void);

/* The kernel the "neon" path uses for wtype: the dotprod integer kernels when the CPU has the
 * instruction, the ARMv8.0 ones otherwise; NULL when the path has none (scalar is used). */
kern_matmul_fn kern_neon_matmul(int wtype);
/* Which kernel kern_neon_matmul(wtype) is, for reports (tern bench --profile): "neon-dotprod"
 * or "neon"; NULL when the path has none for wtype. Static string. */
const char *kern_neon_matmul_name(int wtype);
/* Activation quantizer of the neon path (bit-identical to the scalar from_float), or NULL. */
kern_quant_fn kern_neon_quant(int act_type);

/* The two variants, callable directly so tests can cross-check both on a dotprod CPU.
 * kern_neon_dot_matmul must only be called when kern_neon_has_dotprod() (SIGILL otherwise). */
kern_matmul_fn kern_neon_dot_matmul(int wtype);  /* Q4_0, Q5_0/1, Q8_0, Q4/5/6_K; else NULL */
kern_matmul_fn kern_neon_base_matmul(int wtype); /* every weight format tern supports */

#endif
