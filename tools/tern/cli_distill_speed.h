/* cli_distill_speed.h — tern distill's speed proxies during validation (read
 * cli_distill_speed.c): the teacher measured once, the exported student at every validation. */
#ifndef TERN_CLI_DISTILL_SPEED_H
#define TERN_CLI_DISTILL_SPEED_H

#include <stdbool.h>

#include "tern.h"
#include "tern_train.h"

struct cli_distill_speed;
struct cli_distill_speed_params {
    const char *teacher;   /* the teacher's GGUF */
    const char *cases;     /* tern eval cases (JSON lines) */
    const char *suite;     /* tern bench --suite prompts */
    const char *profiles;  /* hardware profiles (the suite's report needs them) */
    const char *type;      /* the type both are measured at (tern quantize's names); NULL = q8_0 */
    const char *dir;       /* where the quantized copies are written (and removed) */
    int max_cases;         /* the first N cases; 0 = all */
    int threads;
    bool json;             /* JSON lines on stdout, else a line on stderr */
};
/* Load the cases and the suite, measure the teacher and print its line. */
TERN_NODISCARD tern_status cli_distill_speed_open(const struct cli_distill_speed_params *p, struct cli_distill_speed **out);
/* Export the student, quantize it, measure it and print its line (step = the trainer's step). */
TERN_NODISCARD tern_status cli_distill_speed_step(struct cli_distill_speed *s, struct tern_trainer *t, int step);
void cli_distill_speed_free(struct cli_distill_speed *s);

#endif
