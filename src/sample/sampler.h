/* sampler.h — what the sample room offers the rooms above it beyond tern.h (not public): the
 * sampler's RNG stream and its effective parameters, which speculative decoding (src/gen/spec_*.c)
 * needs to accept or reject drafted tokens with the sampler's own draws. */
#ifndef TERN_SAMPLE_SAMPLER_H
#define TERN_SAMPLE_SAMPLER_H

#include "tern.h"

/* The next uniform double in [0, 1) of the sampler's seeded RNG (the stream its draws use). */
double sample_uniform(struct tern_sampler *s);
/* The parameters in effect (top_p 0 and repeat_penalty 0 already turned into 1). */
void sample_get_params(const struct tern_sampler *s, struct tern_sampler_params *out);

#endif
