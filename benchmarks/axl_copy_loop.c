/* AXL's flush copy outside SCR (axl_file_copy in AXL v0.9.0): for every file, malloc a buffer,
 * read and write the file in buffer-sized calls, free the buffer; `threads` threads started
 * anew for each of 5 flushes (as a PTHREAD flush starts them), taking files in turn.
 *     axl_copy_loop <buffer MiB> <threads> <file>...
 * prints the seconds and the minor page faults of the 5 flushes. glibc maps a request of
 * 32 MiB or more afresh each time (its mmap threshold follows freed blocks only up to
 * 32 MiB), so such a buffer's pages are faulted in anew for every file. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "axl_copy.h"

static size_t buffer_bytes;
static char **files;
static int file_count, next_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *copier(void *arg) {
    char target[96];
    snprintf(target, sizeof target, "/dev/shm/scrtune-copy-%d-out%ld", (int)getppid(),
             (long)arg);
    for (;;) {
        pthread_mutex_lock(&lock);
        int index = next_file++;
        pthread_mutex_unlock(&lock);
        if (index >= file_count) break;
        copy_as_axl(files[index], target, buffer_bytes);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MiB threads file...\n", argv[0]); return 2; }
    buffer_bytes = strtoull(argv[1], NULL, 10) << 20;
    int threads = atoi(argv[2]);
    if (threads < 1 || threads > 16) { fprintf(stderr, "threads: 1 to 16\n"); return 2; }
    files = argv + 3;
    file_count = argc - 3;
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double start = now_s();
    for (int flush = 0; flush < 5; flush++) {
        pthread_t ids[16];
        next_file = 0;
        for (long k = 0; k < threads; k++) pthread_create(&ids[k], NULL, copier, (void *)k);
        for (int k = 0; k < threads; k++) pthread_join(ids[k], NULL);
    }
    double seconds = now_s() - start;
    getrusage(RUSAGE_SELF, &after);
    printf("%.3f %ld\n", seconds, after.ru_minflt - before.ru_minflt);
    return 0;
}
