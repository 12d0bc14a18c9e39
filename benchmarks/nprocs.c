/* The processor count AXL sees, for benchmarks: LD_PRELOAD it with SCRTUNE_NPROCS=<n> and
 * get_nprocs() answers n. SCR v3.1.0's PTHREAD flush (AXL 0.9) starts min(get_nprocs(), 16,
 * files) transfer threads per rank and reads no parameter for it, so this is how a benchmark
 * on one machine varies the thread count. Unset or not a positive count: the real answer.
 * With SCRTUNE_NPROCS_LOG=<file>, each answer given is appended there, so a run can show that
 * SCR asked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

int get_nprocs(void) {
    const char *given = getenv("SCRTUNE_NPROCS");
    long count = given ? strtol(given, NULL, 10) : 0;
    if (count <= 0 || count > 4096) {
        int (*real)(void) = (int (*)(void))dlsym(RTLD_NEXT, "get_nprocs");
        return real ? real() : 1;
    }
    const char *log = getenv("SCRTUNE_NPROCS_LOG");
    if (log && *log) {
        FILE *out = fopen(log, "a");
        if (out) {
            fprintf(out, "%ld\n", count);
            fclose(out);
        }
    }
    return (int)count;
}
