/* One file copied as AXL v0.9.0's axl_file_copy copies it, for the benchmarks' C tools: a
 * buffer malloc'd for the file (glibc maps one of 32 MiB or more afresh), read and written in
 * buffer-sized calls, freed after it. Exits on an error: the tools measure, they do not recover. */
#ifndef SCRTUNE_AXL_COPY_H
#define SCRTUNE_AXL_COPY_H
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void copy_as_axl(const char *source, const char *target, size_t buffer_bytes) {
    char *buffer = malloc(buffer_bytes);
    int in = open(source, O_RDONLY);
    int out = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!buffer || in < 0 || out < 0) { perror("copy"); exit(1); }
    ssize_t count;
    while ((count = read(in, buffer, buffer_bytes)) > 0)
        if (write(out, buffer, (size_t)count) != count) { perror("write"); exit(1); }
    close(in);
    close(out);
    free(buffer);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
#endif
