/* check.h — invariants that must hold, checked where a broken one would corrupt memory.
 *
 * Modelled on SQLite's assert()/ALWAYS()/NEVER(). Every macro here is for tern's own bugs,
 * never for bad input: bad input gets a tern_status and a message (error.h), whatever the build.
 *
 *   TERN_ASSERT(cond)            cond holds whenever the code is right;
 *   TERN_ASSERT(cond, "why")     the same, with a short message printed on failure.
 *   TERN_ALWAYS(cond)            an expression: a condition believed always true, whose false case
 *   TERN_NEVER(cond)             (or true case, for NEVER) the code still handles defensively, e.g.
 *                                `if (TERN_NEVER(depth >= cap)) return tern_fail(...)`. Checked
 *                                builds abort there; unchecked builds take the defensive branch.
 *   TERN_ASSERT_SLOW(cond)       whole-structure checkers (O(table) walks): only in TERN_CHECKS.
 *
 * Two build switches (CMakeLists.txt): TERN_ASSERTS (CMake option, default ON in every build
 * type, so `make test` runs with them) compiles in the first three; TERN_CHECKS (debug,
 * RelWithDebInfo and sanitizer builds, hence `make test-asan`) adds TERN_ASSERT_SLOW. Checks stay
 * cheap by placement: in hot code they sit at function entry on shapes and counts, never inside
 * a per-element loop. With TERN_ASSERTS off the conditions are still type-checked (sizeof) but
 * not evaluated, so they must have no side effects. A failed check prints file:line, the
 * condition and the message (tern_assert_fail, check.c) and aborts: continuing would write
 * through a broken link or past an array. */
#ifndef TERN_UTIL_CHECK_H
#define TERN_UTIL_CHECK_H

/* Print "<file>:<line>: tern internal check failed: <expr> (<msg>)" on stderr and abort(). */
__attribute__((noreturn, cold)) void tern_assert_fail(const char *file, int line, const char *expr,
                                                      const char *msg);

/* TERN_ASSERT takes one or two arguments: pick the form by counting them. */
#define TERN_ASSERT_PICK_(a, b, NAME, ...) NAME
#define TERN_ASSERT(...) TERN_ASSERT_PICK_(__VA_ARGS__, TERN_ASSERT2_, TERN_ASSERT1_, _)(__VA_ARGS__)

#ifdef TERN_ASSERTS
#define TERN_ASSERT2_(cond, msg)                                                               \
    do {                                                                                       \
        if (__builtin_expect(!(cond), 0)) tern_assert_fail(__FILE__, __LINE__, #cond, msg);    \
    } while (0)
#define TERN_ALWAYS(cond)                                                                      \
    (__builtin_expect(!!(cond), 1) ? 1 : (tern_assert_fail(__FILE__, __LINE__, #cond, "ALWAYS"), 0))
#define TERN_NEVER(cond)                                                                       \
    (__builtin_expect(!!(cond), 0) ? (tern_assert_fail(__FILE__, __LINE__, "!(" #cond ")", "NEVER"), 1) : 0)
#else
#define TERN_ASSERT2_(cond, msg) ((void)sizeof(!(cond)), (void)sizeof(msg))
#define TERN_ALWAYS(cond) (!!(cond))
#define TERN_NEVER(cond) (!!(cond))
#endif
#define TERN_ASSERT1_(cond) TERN_ASSERT2_(cond, "")

#if defined(TERN_ASSERTS) && defined(TERN_CHECKS)
#define TERN_ASSERT_SLOW(cond) TERN_ASSERT2_(cond, "whole-structure check")
#else
#define TERN_ASSERT_SLOW(cond) ((void)sizeof(!(cond)))
#endif

#endif
