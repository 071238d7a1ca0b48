/* cli_par.c — data parallelism of tern train / tern distill under mpirun (Debian's Open MPI):
 * `mpirun -np N tern distill ...` runs N copies; each computes its share of every step's
 * micro-batches and MPI_Allreduce sums the gradients (tern_trainer_set_parallel, tern.h), so the
 * run follows the same loss curve as one process with the same global batch. Rank 0 alone
 * prints, validates, checkpoints and exports; the others read what it wrote.
 *
 * MPI is initialized only when the process was started by an MPI launcher (its environment
 * says so), so a plain `tern distill` never touches MPI. Built without MPI (no libopenmpi-dev
 * at configure time), a launch with more than one process is refused with that reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_train.h"

#ifdef TERN_HAVE_MPI
#include <mpi.h>
#endif

static int launched_size(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) >= 1) return atoi(v);
    }
    return 0;
}

static bool mpi_on;

int cli_par_init(const char *cmd, struct cli_par *p)
{
    p->rank = 0;
    p->size = 1;
    const int n = launched_size();
    if (n == 0) return CLI_EXIT_OK;
#ifdef TERN_HAVE_MPI
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "tern %s: MPI_Init failed\n", cmd);
        return CLI_EXIT_FAIL;
    }
    mpi_on = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p->size);
    return CLI_EXIT_OK;
#else
    if (n > 1) {
        fprintf(stderr, "tern %s: started as %d processes, but this tern was built without MPI "
                "(install libopenmpi-dev and rebuild)\n", cmd, n);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
#endif
}

void cli_par_finish(void)
{
#ifdef TERN_HAVE_MPI
    if (mpi_on) MPI_Finalize();
    mpi_on = false;
#endif
}

bool cli_par_allreduce(void *user, void *buf, size_t n, bool is_double)
{
    (void)user;
#ifdef TERN_HAVE_MPI
    /* in pieces: MPI counts are ints */
    const size_t piece = (size_t)1 << 28, w = is_double ? sizeof(double) : sizeof(float);
    for (size_t at = 0; at < n; at += piece) {
        const int m = (int)(n - at < piece ? n - at : piece);
        if (MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * w, m, is_double ? MPI_DOUBLE : MPI_FLOAT,
                          MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return false;
    }
    return true;
#else
    (void)buf, (void)n, (void)is_double;
    return false;
#endif
}

bool cli_par_all_ok(const struct cli_par *p, bool ok)
{
    if (p->size == 1) return ok;
    double bad = ok ? 0.0 : 1.0;
    return cli_par_allreduce(NULL, &bad, 1, true) && bad == 0.0;
}
