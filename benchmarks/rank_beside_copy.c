/* How much of its work a computing rank loses beside a flush's transfer threads, by buffer
 * size and thread count (issue 48, fifty-first round: the profile probe the fiftieth proposed).
 *     rank_beside_copy <core> <buffer MiB> <threads> <bound 0|1> <work 0|1|2> <outdir> <file>...
 * The rank, pinned to <core>, works for 1 s alone, then starts <threads> threads that copy the
 * files to <outdir> as AXL does (a buffer malloc'd for every file, read and written in
 * buffer-sized calls; each copy unlinked after it) and works until they are done. The threads
 * inherit every core (free) or the rank's alone (bound). Work: 0 memcpy of 4 MiB blocks (a
 * checkpoint's copy), 1 arithmetic, 2 none (sleeps: the copy alone). Prints the rank's work
 * rate alone and beside the threads (blocks a second), the copy's seconds and the seconds the
 * rank worked beside it. Run one per core at once, as the benchmark job's two fake nodes,
 * with benchmarks/slowpfs.c preloaded for the parallel directory's per-call cost. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "axl_copy.h"

#define WORK_BYTES (4 << 20)

static size_t buffer_bytes;
static char **files, *outdir;
static int file_count, next_file, work_kind;
static volatile int finished;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *work_from, *work_to;
static volatile double sink;

static void *copier(void *arg) {
    char target[512];
    for (;;) {
        pthread_mutex_lock(&lock);
        int index = next_file++;
        pthread_mutex_unlock(&lock);
        if (index >= file_count) break;
        snprintf(target, sizeof target, "%s/copy-%d-%ld-%d", outdir, (int)getpid(), (long)arg,
                 index);
        copy_as_axl(files[index], target, buffer_bytes);
        unlink(target);
        __sync_fetch_and_add(&finished, 1);
    }
    return NULL;
}

static long work_for(double seconds) {  /* blocks of work done in `seconds` */
    if (work_kind == 2) {
        struct timespec pause = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        nanosleep(&pause, NULL);
        return 1;
    }
    double end = now_s() + seconds;
    long blocks = 0;
    for (; now_s() < end; blocks++) {
        if (work_kind == 0) {
            memcpy(work_to, work_from, WORK_BYTES);
        } else {
            double x = 1.0;
            for (int i = 0; i < 200000; i++) x = x * 1.0000001 + 1e-9;
            sink = x;
        }
    }
    return blocks;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: %s core MiB threads bound work outdir file...\n", argv[0]);
        return 2;
    }
    int core = atoi(argv[1]), threads = atoi(argv[3]), bound = atoi(argv[4]);
    buffer_bytes = strtoull(argv[2], NULL, 10) << 20;
    work_kind = atoi(argv[5]);
    outdir = argv[6];
    files = argv + 7;
    file_count = argc - 7;
    if (threads < 1 || threads > 16) { fprintf(stderr, "threads: 1 to 16\n"); return 2; }
    work_from = malloc(WORK_BYTES);
    work_to = malloc(WORK_BYTES);
    memset(work_from, 1, WORK_BYTES);
    memset(work_to, 2, WORK_BYTES);
    cpu_set_t one, every;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    sched_getaffinity(0, sizeof every, &every);
    sched_setaffinity(0, sizeof one, &one);
    double started = now_s();
    long alone = work_for(1.0);
    double alone_rate = alone / (now_s() - started);
    if (!bound) sched_setaffinity(0, sizeof every, &every);  /* what the threads inherit */
    pthread_t ids[16];
    double copy_started = now_s();
    for (long k = 0; k < threads; k++) pthread_create(&ids[k], NULL, copier, (void *)k);
    sched_setaffinity(0, sizeof one, &one);
    long beside = 0;
    while (finished < file_count) beside += work_for(0.01);
    double beside_s = now_s() - copy_started;
    for (int k = 0; k < threads; k++) pthread_join(ids[k], NULL);
    printf("%.1f %.1f %.3f %.3f\n", alone_rate, beside / beside_s, now_s() - copy_started,
           beside_s);
    return 0;
}
