/* What this machine charges for the two things every recorded event pays
 * that instruction counts do not show: reading a clock, and the trace
 * file's fresh pages.
 *
 *     cc -O2 -o /tmp/machine_costs crates/mtrace-python/bench/machine_costs.c && /tmp/machine_costs
 *
 * Clocks: 2e7 back-to-back reads each of rdtsc (mtrace's event clock),
 * rdtscp, clock_gettime(CLOCK_MONOTONIC) through the vDSO (cProfile's
 * perf_counter clock) and CLOCK_MONOTONIC_COARSE. Pages: a 64 MiB file
 * reserved with posix_fallocate, mapped shared and populated with
 * madvise(MADV_POPULATE_WRITE) a MiB at a time, as the recorder's
 * provisioner prepares chunk slots (crates/mtrace/src/provision.rs); shown
 * per page and per 16-byte event. Three rounds of each, in a file under
 * TMPDIR (default /tmp). A benchmark: it prints numbers and exits 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    const int n = 20000000;
    volatile uint64_t sink = 0;
    unsigned aux;
    struct timespec ts;
    for (int round = 0; round < 3; round++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) sink += __rdtsc();
        double t1 = now_ns();
        for (int i = 0; i < n; i++) sink += __rdtscp(&aux);
        double t2 = now_ns();
        for (int i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }
        double t3 = now_ns();
        for (int i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); sink += ts.tv_nsec; }
        double t4 = now_ns();
        printf("ns per read: rdtsc %.2f, rdtscp %.2f, clock_gettime(MONOTONIC) %.2f, "
               "MONOTONIC_COARSE %.2f\n",
               (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n, (t4 - t3) / n);
    }
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/machine_costs.%d.bin", dir, (int)getpid());
    const size_t size = 64 << 20, step = 1 << 20;
    for (int round = 0; round < 3; round++) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || posix_fallocate(fd, 0, size) != 0) { perror(path); return 1; }
        char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) { perror("mmap"); return 1; }
        double t0 = now_ns();
        for (size_t at = 0; at < size; at += step)
            if (madvise(map + at, step, MADV_POPULATE_WRITE) != 0) { perror("madvise"); return 1; }
        double t1 = now_ns();
        printf("populating fresh pages of a fallocated shared file: %.0f ns per 4 KiB page, "
               "%.2f ns per 16-byte event\n",
               (t1 - t0) / (size / 4096), (t1 - t0) / (size / 16));
        munmap(map, size);
        close(fd);
        unlink(path);
    }
    return 0;
}
