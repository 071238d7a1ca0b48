/* gen_hook.h — plugging a per-token constraint (a grammar matcher) into the generator.
 *
 * Read spec.h ("verifier") for struct gen_token_hook and the promise the generator keeps: the
 * hook masks the logits of every position before the target's choice there (plain steps and
 * speculative verification alike) and hears about every token the output keeps, in order, and
 * never about a drafted token the target rejected, so the matcher needs no rollback for
 * speculation. Grammars do not go through this hook (tern_gen_params.grammar, gen_grammar.c: they
 * also force tokens and end generation); it stays for other per-token checks and tests. */
#ifndef TERN_GEN_GEN_HOOK_H
#define TERN_GEN_GEN_HOOK_H

#include "gen/spec.h"

/* Copy *h into g (NULL or an empty hook: none). Allocates the n_vocab mask scratch once. */
TERN_NODISCARD tern_status gen_generator_set_hook(struct tern_generator *g, const struct gen_token_hook *h);

#endif
