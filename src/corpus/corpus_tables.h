/* corpus_tables.h — the corpus's tables, generated at build time from data files. Read corpus.h
 * first.
 *
 * The word lists, value kinds and operation templates are data, not code: data/corpus/words.txt,
 * kinds.txt and templates.txt, one record per entry, edited and reviewed as text and checked by
 * a schema (tools/corpus_tables/corpus_tables.c; tests/test_corpus_data.c names file:line of any
 * error). CMake runs tools/corpus_tables on them at build time and compiles the C arrays it
 * writes (build/corpus_tables.c) into libtern, rather than having tern read the files at run
 * time: `tern corpus toolcalls` must work on a machine where only the binary was copied, a
 * corpus must not depend on which data directory a run happened to find, and a broken data file
 * fails the build, not a user's run. The arrays keep the files' order, which the corpus a seed
 * gives depends on (corpus_pool_build and the generators index into them).
 *
 * The generators' own small tables (currencies, languages, phrases, units, countries, street
 * names in corpus_values.c; frames of requests and answers in corpus_convo.c) stay in C beside
 * the code that reads them field by field. */
#ifndef TERN_CORPUS_CORPUS_TABLES_H
#define TERN_CORPUS_CORPUS_TABLES_H

#include "corpus/corpus.h"

struct corpus_word_list {
    const char *name;  /* "city": what kinds' arg and the generators ask for */
    const char *words; /* "Lyon|Paris|...": corpus_pick draws one */
};
extern const struct corpus_word_list corpus_word_lists[]; /* data/corpus/words.txt */
extern const int corpus_n_word_lists;
extern const struct corpus_kind corpus_kind_table[];      /* data/corpus/kinds.txt */
extern const int corpus_n_kind_table;
extern const struct corpus_tmpl corpus_tmpl_table[];      /* data/corpus/templates.txt */
extern const int corpus_n_tmpl_table;

#endif
