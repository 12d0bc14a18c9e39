/* A parallel file system whose every write call costs a fixed time, for benchmarks on one
 * machine: LD_PRELOAD it with SCRTUNE_SLOW_PREFIX=<directory> and SCRTUNE_SLOW_CALL_US=<us>,
 * and each write(), pwrite() and pwrite64() to a file under that directory sleeps that long
 * before it runs. A stand-in for the per-call round trip of a file system reached over a
 * network (a Lustre or GPFS client whose calls each wait on a server), which a local disk
 * with a page cache does not have: it is what makes SCR_FILE_BUF_SIZE matter. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const char *prefix;
static size_t prefix_len;
static long call_us;

static void setup(void) __attribute__((constructor));
static void setup(void) {
    prefix = getenv("SCRTUNE_SLOW_PREFIX");
    prefix_len = prefix ? strlen(prefix) : 0;
    const char *us = getenv("SCRTUNE_SLOW_CALL_US");
    call_us = us ? atol(us) : 0;
}

static void slow(int fd) {
    if (!prefix_len || call_us <= 0) return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < (ssize_t)prefix_len || strncmp(path, prefix, prefix_len) != 0) return;
    struct timespec pause = {call_us / 1000000, (call_us % 1000000) * 1000};
    while (nanosleep(&pause, &pause) != 0) {}
}

ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = dlsym(RTLD_NEXT, "write");
    slow(fd);
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = dlsym(RTLD_NEXT, "pwrite");
    slow(fd);
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = dlsym(RTLD_NEXT, "pwrite64");
    slow(fd);
    return real(fd, buf, count, offset);
}
