/* corpus_domains.c — the operation templates of every domain (read corpus.h first): one record
 * per operation in data/corpus/templates.txt (its opening comment explains the fields), compiled
 * in through corpus_tables.h. Adding a record adds a family of tools. */
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_tables.h"

int corpus_n_tmpls(void) { return corpus_n_tmpl_table; }
const struct corpus_tmpl *corpus_tmpl_at(int i) { return &corpus_tmpl_table[i]; }

int corpus_domains(const char **out, int cap)
{
    int n = 0;
    for (int i = 0; i < corpus_n_tmpl_table; i++) {
        int j = 0;
        while (j < n && strcmp(out[j], corpus_tmpl_table[i].domain)) j++;
        if (j == n && n < cap) out[n++] = corpus_tmpl_table[i].domain;
    }
    return n;
}
