/* train_internal.h — the trainer's state, shared by the files of src/train/train_*.c.
 *
 * All weights live in one flat F32 array (w), with gradients (g) and AdamW moments (m, v) in
 * the same layout, so the optimizer, clipping, checkpoints and export are loops over one array;
 * train_tensor says where each tensor sits. Activations of one micro-batch (N = n_seq * n_ctx
 * rows) are allocated once in tern_trainer_create; nothing in a step allocates.
 *
 * Files: train_model.c (layout, forward, backward), train_ops.c (the ops), train_optim.c
 * (AdamW, schedule, clipping, the step), train_data.c (data file, packing, order),
 * train_ckpt.c (checkpoints), train_export.c (GGUF), train_config.c (JSON config). */
#ifndef TERN_TRAIN_INTERNAL_H
#define TERN_TRAIN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm_f32.h"
#include "tern_train.h"
#include "util/threadpool.h"

struct train_tensor {
    char name[48];
    size_t off;      /* floats into w */
    int64_t ne[2];   /* ne[0] = columns (GGUF order); ne[1] = rows (1 for vectors) */
    int n_dims;
    bool decay;      /* weight decay applies (matrices) */
};

struct train_layer {   /* offsets into w (and g, m, v); bq.. = SIZE_MAX when absent */
    size_t attn_norm, wq, wk, wv, bq, bk, bv, wo, ffn_norm, gate, up, down;
    /* LoRA (t->lora): attn_norm, bq, bk, bv, ffn_norm index the frozen vectors (fz->vec), the
     * matrices are fz's; the adapters' A (rank, n_in) and B (n_out, rank) sit in w (SIZE_MAX:
     * matrix not adapted), in TERN_LORA_* order */
    size_t lora_a[TERN_LORA_N_TARGETS], lora_b[TERN_LORA_N_TARGETS];
};

/* A frozen base matrix (LoRA): rows of `cols` elements of `type` (GGUF's bytes, mapped). */
struct train_qmat {
    int type;
    const unsigned char *data;
    size_t row_bytes;
    int rows, cols;
};

/* The frozen base of a LoRA run (train_lora.c). */
struct train_frozen {
    struct tern_gguf *g;        /* the base GGUF (its tensors' bytes stay mapped) */
    float *vec;                 /* norms and biases as F32, at train_layer's offsets */
    size_t n_vec;
    struct train_qmat embd, output; /* output = embd when tied */
    struct train_qmat *mat;     /* (L * TERN_LORA_N_TARGETS) */
};

struct train_layer_act {
    float *x;      /* (N, D) layer input (residual stream) */
    float *xn1;    /* (N, D) rmsnorm(x) * attn_norm */
    float *rstd1;  /* (N) */
    float *q;      /* (N, Dq) after RoPE */
    float *k, *v;  /* (N, Dkv), k after RoPE */
    float *o;      /* (N, Dq) attention output */
    float *lse;    /* (N, H) */
    float *xmid;   /* (N, D) x + o . Wo^T */
    float *xn2;    /* (N, D) */
    float *rstd2;  /* (N) */
    float *gate, *up, *h; /* (N, F) h = silu(gate) * up */
};

/* One micro-batch: n_seq packed sequences of n_ctx rows. */
struct train_batch {
    int32_t *tok;     /* (N) input token of each row */
    int32_t *pos;     /* (N) position within its document */
    int32_t *start;   /* (N) first row of its document, relative to its sequence */
    int32_t *target;  /* (N) next token of the same document (0 when none) */
    float *weight;    /* (N) 1 when the target is trained on, else 0 */
    int64_t *sig;     /* (N) the row's teacher-signal entry (distillation), or -1 */
    long long n_loss; /* rows with weight > 0 */
};

/* Where the data stream stands: what a checkpoint must hold to continue bit-identically. */
struct train_data_pos {
    uint64_t epoch;    /* completed passes over the data */
    uint64_t cursor;   /* next document in this epoch's order */
    uint64_t piece;    /* next n_ctx piece of that document (long documents) */
    uint64_t rng;      /* the order generator's state at the start of this epoch */
};

struct tern_trainer {
    struct tern_train_config c;
    int D, H, Hkv, hd, Dq, Dkv, F, V, T, L;
    int n_seq;                  /* sequences per micro-batch */
    int N;                      /* rows per micro-batch */
    bool neox, qkv_bias;
    struct train_tensor *tensors;
    int n_tensors;
    struct train_layer *layer;
    size_t tok_embd, output_norm, output; /* output == tok_embd when tied */
    size_t n_params;
    float *w, *g, *m, *v;       /* (n_params) each */
    int step;                   /* optimizer steps done */
    struct train_data_pos dpos;
    float *rope;                /* train_rope_table(T, hd, base) */
    struct train_layer_act *act;/* (L) */
    float *xL;                  /* (N, D) the last layer's output */
    float *xf, *rstdf;          /* (N, D), (N) final norm */
    int32_t *rows;              /* (N) rows that get logits */
    float *xc, *logits;         /* (N, D) gathered rows, (N, V) logits then their gradient */
    float *dx, *dxn, *dq, *dk, *dv, *dkh, *dvh, *dO, *dh, *dg, *du; /* backward scratch */
    float *partial;             /* (TRAIN_RED_CHUNKS, max(D, Dq)) column-sum partials */
    float *gws;                 /* per-thread GEMM + attention workspace */
    size_t gws_floats;          /* per thread */
    struct train_batch *batch;  /* (accum) micro-batches of the current step */
    /* length buckets (train_buckets.c; on when the recipe names buckets) */
    const struct tern_train_data *bk_d; /* the data bk_first/bk_docs index (NULL: none yet) */
    uint64_t bk_n_docs;
    uint64_t bk_first[9];       /* bucket i's documents: bk_docs[bk_first[i] .. bk_first[i + 1]) */
    uint64_t *bk_docs;
    uint64_t micro;             /* the next micro-batch's number: step x accum + i */
    int eval_bucket;            /* ordered fills (validation) take only this bucket's documents;
                                   -1: all */
    uint64_t *perm;             /* (n_docs) this epoch's document order */
    uint64_t perm_n, perm_epoch;/* perm is valid for (n_docs, epoch) when perm_n != 0 */
    /* LoRA (train_lora.c): w holds only the adapters; the base is frozen in fz */
    bool lora;
    struct train_frozen fz;
    float lora_scale;           /* alpha / rank */
    float **lora_u;             /* (L) per layer (N, rank) x 7: s * A dropout(x), saved for B's
                                   gradient */
    float *lora_xd;             /* (N, max n_in) dropout(x) / (1 - p) scratch */
    float *lora_du;             /* (N, rank) */
    float *qtile;               /* a dequantized tile of a frozen matrix (qtile_floats) */
    size_t qtile_floats;
    uint64_t lora_mb;           /* the micro-batch being trained (dropout's seed); */
    bool lora_train;            /* dropout on (training forward) */
    struct tp *pool;
    int n_threads;
    enum kern_gemm_path path;
    bool infer_numerics;        /* forward rounds q, k, v and probabilities to F16 as tern's
                                   inference does (train_forward_logits' parity check only) */
    struct tern_gguf *tok_gguf; /* the tokenizer GGUF (export copies its keys), or NULL */
    /* distillation (src/train/distill_*.c, distill.h) */
    bool distill;               /* tern_trainer_set_distill was called */
    struct tern_distill_recipe recipe;
    const struct tern_distill_cache *kd; /* set during a distillation step or evaluation */
    float *kd_scratch;          /* (n_threads, V) */
    const float *wf;            /* the weights forward and backward read: w, or wq in QAT steps */
    float *wq;                  /* (n_params) fake-quantized weights (QAT), or NULL */
    int *qtype;                 /* (n_tensors) the type each tensor rounds to in QAT */
    unsigned char *qbuf;        /* (n_threads, qbuf_bytes) one quantized row per thread */
    size_t qbuf_bytes;
    struct { const struct tern_distill_cache *kd; const struct tern_train_data *d; }
        kd_checked[2];          /* the last (cache, data) pairs tern_distill_cache_check passed */
    double kd_acc[3];           /* KL, CE, top-1 agreements summed by the forward (trained rows) */
    /* the latency-aware weights (distill_weights.c): a trained row's weight is row_w[mask byte of
     * its target] * doc_w[its document] in training batches (validation: 1) */
    float row_w[256];           /* [0] = 0; [1..255] = 1 unless the early tool-call loss is on */
    float *doc_w;               /* (doc_w_n) length-aware KD's document weights, or NULL (all 1) */
    uint64_t doc_w_n;
    double early_ramp;          /* the early tool-call loss's ramp at the last step (0..1) */
    double latency_scale;       /* the safety rail's scale of the weights' excess over 1 (1 = full) */
    double rail_best_ce;        /* the best validation CE the rail has seen (INFINITY: none) */
    /* data parallelism (tern_trainer_set_parallel): this process's share of the micro-batches */
    int par_rank, par_size;     /* 0, 1 without it */
    char **meta;                /* (2 n_meta) key, value pairs the export writes */
    int n_meta;
    tern_allreduce_fn allreduce;
    void *allreduce_user;
};

/* distill_weights.c: row_w for the coming step (the early tool-call loss, ramped over the epochs
 * the data position has covered); a no-op outside distillation. */
void train_latency_weights(struct tern_trainer *t, const struct tern_train_data *d);

/* Fixed chunking of reductions over rows: results do not depend on the thread count. */
#define TRAIN_RED_CHUNKS 16

/* train_model.c */
TERN_NODISCARD tern_status train_layout(struct tern_trainer *t);
/* A trained tensor of cols x rows floats appended to w's layout; its offset. */
size_t train_add_tensor(struct tern_trainer *t, const char *name, int64_t cols, int64_t rows,
                        int n_dims);
void train_init_weights(struct tern_trainer *t);
/* Forward + backward of one micro-batch; gradients accumulate into t->g. Returns the summed
 * weighted loss; dlogits are scaled by `scale` (1 / masked tokens of the whole step). */
double train_forward_backward(struct tern_trainer *t, const struct train_batch *b, double scale);
/* Forward only: the summed weighted loss of b (no gradients; t->g untouched). */
double train_forward_loss(struct tern_trainer *t, const struct train_batch *b);
/* Forward only, logits of every row of sequence 0 into out (T, V): for the parity test. With
 * f16 the attention rounds q, k, v and the probabilities to F16 as tern's inference does (its
 * KV cache is F16), which isolates every other difference. */
void train_forward_logits(struct tern_trainer *t, const struct train_batch *b, float *out, bool f16);
/* Run fn over n_chunks chunks on the trainer's pool. */
void train_par(struct tern_trainer *t, tp_fn fn, void *arg, int n_chunks);

/* train_import.c: the shape keys of c (arch .. tied_output; n_ctx when < 2) from the GGUF at
 * path, refused naming what differs when the trainer cannot model it; role names it in
 * messages ("student", "lora.base"). */
TERN_NODISCARD tern_status train_shape_from_gguf(const char *path, const char *role, struct tern_train_config *c);

/* train_lora.c */
/* Open c.lora_base, check it against the config, lay out the frozen base and the adapters
 * (t->tensors, n_params), and allocate the LoRA scratch. Called by tern_trainer_create. */
TERN_NODISCARD tern_status train_lora_create(struct tern_trainer *t);
void train_lora_free(struct tern_trainer *t);
/* Adapter init: A ~ U(-1/sqrt(n_in), 1/sqrt(n_in)) seeded, B = 0 (PEFT's). */
void train_lora_init(struct tern_trainer *t);
/* The adapters as a llama.cpp LoRA GGUF (F32), with the run's metadata and chat template. */
TERN_NODISCARD tern_status train_lora_export(const struct tern_trainer *t, const char *path);
/* Y (n, out) (+)= X (n, in) . W^T for a frozen matrix (dequantized tile by tile). */
void train_qmat_fwd(struct tern_trainer *t, const struct train_qmat *W, const float *X, int n,
                    float *Y, bool acc);
/* dX (n, in) (+)= dY (n, out) . W */
void train_qmat_bwd(struct tern_trainer *t, const struct train_qmat *W, const float *dY, int n,
                    float *dX, bool acc);
/* Row `row` of a frozen matrix as F32 (the embedding lookup). */
void train_qmat_row(const struct train_qmat *W, int row, float *out);
/* Layer l's matrix m (TERN_LORA_*): Y (N, out) (+)= X . W^T + the adapter's delta. */
void train_lora_mat_fwd(struct tern_trainer *t, int l, int m, const float *X, float *Y, bool acc);
/* The backward of the same: dX (N, in) (+)= dY . (W + s B A) (dropout's mask on the adapter's
 * path), the adapter's gradients += into t->g. */
void train_lora_mat_bwd(struct tern_trainer *t, int l, int m, const float *X, const float *dY,
                        float *dX, bool acc);

/* train_config.c: one key of a config object (cJSON item) onto c; unknown keys fail naming it */
struct cJSON;
TERN_NODISCARD tern_status train_config_set_key(struct tern_train_config *c, const struct cJSON *it);

/* train_data.c */
/* The arrays of d (read only): documents' offsets (n_docs + 1), tokens and masks (n_tok). */
void train_data_view(const struct tern_train_data *d, uint64_t *n_docs, uint64_t *n_tok,
                     const uint64_t **off, const int32_t **tok, const uint8_t **mask);
TERN_NODISCARD tern_status train_batch_alloc(struct train_batch *b, int N);
void train_batch_free(struct train_batch *b);
/* Fill b with the next n_seq sequences of the data stream from *pos (advanced). */
/* train_data.c, for both training samplers: lay the n tokens of document doc from token `first`
 * at rows [row, row + n) of the sequence at row s0 (a token outside the vocabulary is an error
 * naming it), weighted by the early tool-call and document weights; pad a sequence's rest. */
TERN_NODISCARD tern_status train_lay_piece(const struct tern_trainer *t, const struct tern_train_data *d,
                            struct train_batch *b, int s0, int row, uint64_t doc, uint64_t first,
                            int n);
void train_pad_rows(struct train_batch *b, int s0, int row, int T);
/* train_buckets.c: length buckets. */
bool train_buckets_on(const struct tern_trainer *t);
int train_bucket_of(const struct tern_trainer *t, uint64_t len);
/* This step's bucket weights (a Dirichlet draw around the recipe's, seeded by the step). */
void train_bucket_weights(const struct tern_trainer *t, int step, double w[8]);
/* Micro-batch number t->micro (then advanced) in bucket mode into b; with b NULL, nothing is
 * filled or advanced: the documents the micro-batches from t->micro on will draw go to
 * out[0..n) (*n_out written). */
TERN_NODISCARD tern_status train_bucket_fill(struct tern_trainer *t, const struct tern_train_data *d,
                              struct train_batch *b, uint64_t *out, uint64_t n, uint64_t *n_out);
TERN_NODISCARD tern_status train_batch_fill(struct tern_trainer *t, const struct tern_train_data *d,
                             struct train_batch *b);
/* Every token id of d below V, or TERN_ERR_FORMAT naming the first that is not. */
TERN_NODISCARD tern_status train_data_check_vocab(const struct tern_train_data *d, int V);
/* Fill b with the next n_seq sequences of d in file order from document *doc, piece *piece
 * (advanced); false when d is exhausted and b holds nothing (evaluation). */
bool train_batch_fill_ordered(struct tern_trainer *t, const struct tern_train_data *d,
                              struct train_batch *b, uint64_t *doc, uint64_t *piece);
/* Pack the documents given as one sequence set (tests): tokens/masks of n docs. */
void train_batch_from_docs(struct train_batch *b, int T, const int32_t *const *tok,
                           const uint8_t *const *mask, const int *len, int n_docs);

#endif
