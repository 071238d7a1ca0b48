/* srv_grammars.c — compiled grammars shared by the requests that ask for the same one.
 *
 * Read server.h first (threads). An agent sends the same tools with every request, and a grammar
 * compiled anew for each one starts cold: its token classifications (filled on each grammar
 * position's first visit: up to 4 ms a position with Qwen's 151,936-token vocabulary) are redone
 * per request, and a batcher slot cannot keep its matcher (gen_grammar_begin keeps it for the
 * same grammar only). So the connection threads look a grammar up here by a key naming
 * everything it was compiled from (kind, options, the tools or schema text), compiling it on a
 * miss outside the lock. Grammars are shared across threads by design (classifications are
 * published atomically; each sequence has its own matcher). A grammar lives while the cache or
 * a job holds it (refs); the least recently used of SRV_GRAMMARS is let go when a new one comes. */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "util/error.h"

void srv_grammars_init(struct srv_grammars *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

static void drop(struct srv_grammar *e) /* under mu, or alone */
{
    if (--e->refs > 0) return;
    tern_grammar_free(e->g);
    free(e->key);
    free(e);
}

void srv_grammars_free(struct srv_grammars *c)
{
    for (int i = 0; i < SRV_GRAMMARS; i++)
        if (c->ent[i]) drop(c->ent[i]);
    pthread_mutex_destroy(&c->mu);
}

/* The cached entry for key, a reference taken; NULL if none. Under mu. */
static struct srv_grammar *find(struct srv_grammars *c, const char *key, size_t len)
{
    for (int i = 0; i < SRV_GRAMMARS; i++) {
        struct srv_grammar *e = c->ent[i];
        if (e && e->key_len == len && memcmp(e->key, key, len) == 0) {
            e->refs++;
            e->used = ++c->tick;
            return e;
        }
    }
    return NULL;
}

tern_status srv_grammar_get(struct srv_grammars *c, const char *key, size_t len,
                            tern_status (*compile)(void *user, struct tern_grammar **out), void *user,
                            struct srv_grammar **out)
{
    pthread_mutex_lock(&c->mu);
    struct srv_grammar *e = find(c, key, len);
    if (e) c->hits++;
    pthread_mutex_unlock(&c->mu);
    if (e) {
        *out = e;
        return TERN_OK;
    }
    struct tern_grammar *g = NULL;
    tern_status st = compile(user, &g); /* outside the lock: compiling can take milliseconds */
    if (st) return st;
    e = calloc(1, sizeof *e);
    char *k = malloc(len ? len : 1);
    if (!e || !k) {
        free(e);
        free(k);
        tern_grammar_free(g);
        return tern_fail(TERN_ERR_NOMEM, "grammar cache: out of memory");
    }
    memcpy(k, key, len);
    *e = (struct srv_grammar){.g = g, .key = k, .key_len = len, .refs = 2}; /* the cache's and ours */
    pthread_mutex_lock(&c->mu);
    struct srv_grammar *other = find(c, key, len); /* another thread compiled it meanwhile */
    if (other) {
        pthread_mutex_unlock(&c->mu);
        e->refs = 1;
        drop(e);
        *out = other;
        return TERN_OK;
    }
    c->misses++;
    int slot = 0; /* a free one, else the least recently used */
    for (int i = 0; i < SRV_GRAMMARS; i++) {
        if (!c->ent[i]) {
            slot = i;
            break;
        }
        if (c->ent[i]->used < c->ent[slot]->used) slot = i;
    }
    if (c->ent[slot]) drop(c->ent[slot]); /* jobs still holding it keep it alive */
    e->used = ++c->tick;
    c->ent[slot] = e;
    pthread_mutex_unlock(&c->mu);
    *out = e;
    return TERN_OK;
}

void srv_grammar_put(struct srv_grammars *c, struct srv_grammar *e)
{
    if (!e) return;
    pthread_mutex_lock(&c->mu);
    drop(e);
    pthread_mutex_unlock(&c->mu);
}
