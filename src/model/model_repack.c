/* model_repack.c — at load, the matrices the forward pass multiplies are copied once into the
 * kernels' packed layout (kern_packed.h), so no prefill or batched decode step repacks them.
 *
 * Read model.h first (struct model_weight::packed) and kern_packed.h (what a packed copy is;
 * the kernels room owns its layout, this file decides what is packed and when). Packed: per
 * layer wq wk wv wo ffn_gate ffn_up ffn_down, and the output matrix (also when tied to the
 * token embedding, whose rows the embedding lookup keeps reading from the file mapping). Only the
 * formats and the kernel paths that have a layout (today: Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K on avx512
 * and avx2); the rest keep reading the mapping. The copies share one buffer the model owns (model->packed_buf), in
 * transparent huge pages where the kernel gives them (fewer TLB misses when decode streams the
 * whole copy), and are reported in tern_model_info.repacked_bytes (0 also when the buffer or
 * the packing threads could not be had: the model then simply runs mmap-only).
 *
 * When the kernel path reads the copy for every batch size (kern_packed_replaces), the matmuls
 * never read the original rows again, so their pages are handed back (madvise MADV_DONTNEED on
 * the read-only file mapping: they stay in the page cache and are faulted back in on demand —
 * the rows of a tied embedding as tokens are met, everything if another kernel path is forced
 * later) and the copy costs no extra resident memory. A quantized copy of a loaded model
 * (model_copy.c) is packed here too: the matrices it converted get copies of their own. */
#include "model/model.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/kern_packed.h"
#include "util/error.h"
#include "util/huge.h"
#include "util/threadpool.h"

/* The matrices to consider, in a fixed order; returns the count (room for
 * MODEL_LAYER_MAX_MATRICES * (n_layer + 1) + 4). Absent ones (a shared-KV layer's k and v, the
 * attention of a DeltaNet layer) are left out, and so is a v that is k's matrix (it gets k's
 * packed copy afterwards). */
static int repack_targets(struct tern_model *m, struct model_weight **w)
{
    int n = 0;
    for (int l = 0; l < m->info.n_layer; l++) n += model_layer_matrices(&m->layers[l], w + n);
    if (m->ple_model_proj.data) w[n++] = &m->ple_model_proj;
    w[n++] = &m->output;
    if (m->mtp.il >= 0) { /* the MTP layer; a q or output it shares is packed where it belongs */
        struct model_layer *L = &m->layers[m->mtp.il];
        struct model_weight *lw[MODEL_LAYER_MAX_MATRICES];
        const int nl = model_layer_matrices(L, lw);
        for (int i = 0; i < nl; i++)
            if (lw[i] != &L->wq || m->mtp.q_from < 0) w[n++] = lw[i];
        if (m->mtp.eh_proj.data) w[n++] = &m->mtp.eh_proj;
        if (m->mtp.output.data != m->output.data) w[n++] = &m->mtp.output;
    }
    return n;
}

struct pack_job {
    struct model_weight *const *w;
    void *const *dst;
    int n;
    int64_t total_panels;
};

/* Chunks split the panels of all matrices evenly; a chunk packs its share of each matrix. */
static void pack_chunk(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct pack_job *j = arg;
    long long lo, hi;
    tp_split(j->total_panels, chunk, n_chunks, 1, &lo, &hi);
    long long base = 0;
    for (int i = 0; i < j->n && base < hi; i++) {
        const struct model_weight *w = j->w[i];
        const long long np = (w->rows + 15) / 16;
        const long long a = lo > base ? lo - base : 0, b = hi - base < np ? hi - base : np;
        if (a < b) {
            const int64_t r1 = b * 16 < w->rows ? b * 16 : w->rows;
            kern_pack(w->type, w->data, w->row_bytes, w->rows, w->cols, a * 16, r1, j->dst[i]);
        }
        base += np;
    }
}

/* Hand back the whole pages inside [p, p + n) of the read-only file mapping. */
static void release_pages(const void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

tern_status model_repack(struct tern_model *m, bool file_mapped)
{
    const int max_w = MODEL_LAYER_MAX_MATRICES * (m->info.n_layer + 1) + 4;
    struct model_weight **w = malloc((size_t)max_w * sizeof *w);
    void **dst = malloc((size_t)max_w * sizeof *dst);
    struct model_weight **todo = malloc((size_t)max_w * sizeof *todo);
    if (!w || !dst || !todo) {
        free(w);
        free(dst);
        free(todo);
        return tern_fail(TERN_ERR_NOMEM, "out of memory");
    }
    const int nw = repack_targets(m, w);
    size_t total = 0;
    int n = 0;
    int64_t panels = 0;
    for (int i = 0; i < nw; i++) {
        /* a weight that has a copy already (a converted model's unconverted matrix shares its
         * source's) keeps it */
        const size_t b = w[i]->packed ? 0 : kern_packed_size(w[i]->type, w[i]->rows, w[i]->cols);
        if (!b) continue;
        todo[n] = w[i];
        dst[n++] = (void *)(uintptr_t)total; /* offsets until the buffer exists */
        total += (b + 63) & ~(size_t)63;
        panels += (w[i]->rows + 15) / 16;
    }
    tern_status st = TERN_OK;
    if (n > 0) {
        void *buf = util_alloc_huge(total);
        if (!buf) {
            /* not fatal: the model runs mmap-only, and repacked_bytes = 0 says so */
        } else {
            for (int i = 0; i < n; i++) dst[i] = (char *)buf + (uintptr_t)dst[i];
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            struct tp *pool = NULL;
            if (tp_create(cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus, &pool) != TERN_OK) {
                free(buf); /* likewise: mmap-only */
            } else {
                struct pack_job job = {.w = todo, .dst = dst, .n = n, .total_panels = panels};
                tp_run(pool, pack_chunk, &job, (int)(panels < 64 ? panels : 64));
                tp_free(pool);
                m->packed_buf = buf;
                m->info.repacked_bytes = total;
                for (int i = 0; i < n; i++) {
                    todo[i]->packed = dst[i];
                    /* A tied output's rows are also the token embedding: released as well,
                     * the lookup faults back in the pages of the tokens it meets (from the
                     * page cache) instead of keeping the whole vocabulary resident twice. */
                    if (file_mapped && kern_packed_replaces(todo[i]->type)) {
                        release_pages(todo[i]->data, todo[i]->row_bytes * (size_t)todo[i]->rows);
                        m->info.released_bytes += todo[i]->row_bytes * (uint64_t)todo[i]->rows;
                    }
                }
            }
        }
    }
    for (int l = 0; l < m->info.n_layer; l++)
        if (m->layers[l].v_is_k) m->layers[l].wv.packed = m->layers[l].wk.packed;
    model_mtp_share(m);
    free(w);
    free(dst);
    free(todo);
    return st;
}
