/* corpus_words.c — drawing from the word lists (data/corpus/words.txt, compiled in through
 * corpus_tables.h). Each list is one "a|b|c" string; corpus_word() draws from it. */
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_tables.h"

const char *corpus_word_list(const char *list)
{
    for (int i = 0; i < corpus_n_word_lists; i++)
        if (!strcmp(corpus_word_lists[i].name, list)) return corpus_word_lists[i].words;
    return NULL;
}

const char *corpus_word(struct corpus_ctx *c, const char *list, char *out, size_t cap)
{
    const char *words = corpus_word_list(list);
    if (!words) {
        out[0] = '\0';
        return out;
    }
    return corpus_pick(&c->rng, words, out, cap);
}
