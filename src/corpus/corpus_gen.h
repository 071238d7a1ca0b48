/* corpus_gen.h — helpers shared by the value generators (corpus_values.c), the kind table
 * (corpus_kinds.c) and the conversation writer (corpus_convo.c). Read corpus.h first. */
#ifndef TERN_CORPUS_CORPUS_GEN_H
#define TERN_CORPUS_CORPUS_GEN_H

#include "corpus/corpus.h"

struct corpus_gen_entry {
    const char *name;
    void (*fn)(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v);
};
extern const struct corpus_gen_entry corpus_gens[]; /* ends with {NULL, NULL} */

/* Copy s into a CORPUS_SAY buffer. */
void corpus_put(char *dst, const char *s);
/* v->json = the string s, v->bare = s. */
void corpus_val_str(struct corpus_val *v, const char *s);
/* Field i of a "a:b:c" generator argument ("" / def when absent). */
const char *corpus_arg_field(const char *arg, int i, char *out, size_t cap);
int corpus_arg_int(const char *arg, int i, int def);
/* An integer as a user says it: "12", "twelve", "1,200". out: CORPUS_SAY bytes. */
void corpus_say_int(struct corpus_ctx *c, int n, char *out);
/* "$25.50", "¥3,000", "45.00 CHF" into a CORPUS_SAY buffer. */
void corpus_money_show(double x, const char *code, char *out);
/* Illustrative exchange rate (units of `to` per unit of `from`). */
double corpus_fx_rate(const char *from, const char *to);
/* "Saturday, March 15" (+ year when not this year) into a CORPUS_SAY buffer. */
void corpus_date_show(const struct corpus_ctx *c, struct corpus_date d, char *out);
/* The i-th language code of the language kinds (phrase_langs: the six with translations), or
 * NULL past the end: the schema's enum. Same for units. */
const char *corpus_lang_code(bool phrase_langs, int i);
const char *corpus_unit_code(int i);
double corpus_unit_convert(double x, const char *from, const char *to);
/* The value drawn for kind_key in the call being answered, or NULL. */
const struct corpus_val *corpus_call_val(const struct corpus_ctx *c, const char *kind_key);

#endif
