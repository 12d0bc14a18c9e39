#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* cwrite DIR FILES WRITES SIZE [PAUSE_MS]: FILES files of WRITES writes of SIZE bytes each,
   PAUSE_MS between files (tests/test_dftracer_zmq.py: a program traced by DFTracer's
   LD_PRELOAD library) */
int main(int argc, char **argv) {
  int files = atoi(argv[2]), writes = atoi(argv[3]); size_t size = atol(argv[4]);
  char *block = calloc(1, size), path[4096];
  for (int f = 0; f < files; f++) {
    snprintf(path, sizeof path, "%s/f%d.dat", argv[1], f);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int w = 0; w < writes; w++) if (write(fd, block, size) != (ssize_t)size) return 1;
    close(fd);
    if (argc > 5) usleep(atoi(argv[5]) * 1000);
  }
  return 0;
}
