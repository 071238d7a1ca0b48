/* srv_store.c — the responses the server keeps for the Responses API (previous_response_id, GET
 * and DELETE /v1/responses/{id}): a fixed table of SRV_STORE_MAX entries holding at most
 * SRV_STORE_BYTES, the least recently used evicted first. Memory only: a restart forgets them.
 *
 * Each entry is its API key's (the index of the key it was made with, -1 on a server without
 * keys): a lookup with another key misses exactly as an unknown id does, so one key cannot tell
 * whether another's response exists. Ids are the job's ("resp_" + 64 random-looking bits), and
 * lookups compare them whole. One lock: entries are copied out under it, never lent. */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

void srv_store_init(struct srv_store *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
}

static void entry_free(struct srv_stored *e)
{
    if (!e) return;
    free(e->response);
    cJSON_Delete(e->history);
    free(e);
}

void srv_store_free(struct srv_store *st)
{
    for (int i = 0; i < SRV_STORE_MAX; i++) entry_free(st->ent[i]);
    pthread_mutex_destroy(&st->mu);
    memset(st, 0, sizeof *st);
}

/* The slot of id for key, or -1. Under mu. */
static int find(const struct srv_store *st, const char *id, int key)
{
    for (int i = 0; i < SRV_STORE_MAX; i++)
        if (st->ent[i] && st->ent[i]->key == key && !strcmp(st->ent[i]->id, id)) return i;
    return -1;
}

/* The least recently used slot (an empty one first). Under mu. */
static int victim(const struct srv_store *st)
{
    int v = 0;
    for (int i = 0; i < SRV_STORE_MAX; i++) {
        if (!st->ent[i]) return i;
        if (st->ent[i]->used < st->ent[v]->used) v = i;
    }
    return v;
}

static void drop(struct srv_store *st, int i)
{
    st->bytes -= st->ent[i]->bytes;
    entry_free(st->ent[i]);
    st->ent[i] = NULL;
}

void srv_store_put(struct srv_store *st, const char *id, int key, const char *response, cJSON *history)
{
    struct srv_stored *e = calloc(1, sizeof *e);
    char *hist_txt = history ? cJSON_PrintUnformatted(history) : NULL;
    if (!e || !hist_txt || !(e->response = strdup(response)) || strlen(id) >= sizeof e->id) {
        /* out of memory: the response is not kept (a later previous_response_id gets the 404) */
        free(hist_txt);
        cJSON_Delete(history);
        entry_free(e);
        return;
    }
    snprintf(e->id, sizeof e->id, "%s", id);
    e->key = key;
    e->history = history;
    /* what it holds, roughly: both texts (the tree costs a few times its text; the bound is on
     * the order of magnitude, not the byte) */
    e->bytes = strlen(response) + 4 * strlen(hist_txt) + sizeof *e;
    free(hist_txt);
    pthread_mutex_lock(&st->mu);
    e->used = ++st->tick;
    while (st->bytes + e->bytes > SRV_STORE_BYTES) {
        int v = -1;
        for (int i = 0; i < SRV_STORE_MAX; i++)
            if (st->ent[i] && (v < 0 || st->ent[i]->used < st->ent[v]->used)) v = i;
        if (v < 0) break; /* empty: this one alone is over the budget, kept anyway */
        drop(st, v);
    }
    const int i = victim(st);
    if (st->ent[i]) drop(st, i);
    st->ent[i] = e;
    st->bytes += e->bytes;
    pthread_mutex_unlock(&st->mu);
}

cJSON *srv_store_history(struct srv_store *st, const char *id, int key)
{
    pthread_mutex_lock(&st->mu);
    const int i = find(st, id, key);
    cJSON *h = NULL;
    if (i >= 0) {
        st->ent[i]->used = ++st->tick;
        h = cJSON_Duplicate(st->ent[i]->history, true);
    }
    pthread_mutex_unlock(&st->mu);
    return h;
}

char *srv_store_response(struct srv_store *st, const char *id, int key)
{
    pthread_mutex_lock(&st->mu);
    const int i = find(st, id, key);
    char *r = NULL;
    if (i >= 0) {
        st->ent[i]->used = ++st->tick;
        r = strdup(st->ent[i]->response);
    }
    pthread_mutex_unlock(&st->mu);
    return r;
}

bool srv_store_delete(struct srv_store *st, const char *id, int key)
{
    pthread_mutex_lock(&st->mu);
    const int i = find(st, id, key);
    if (i >= 0) drop(st, i);
    pthread_mutex_unlock(&st->mu);
    return i >= 0;
}
