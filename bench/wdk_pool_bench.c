/* wdk_pool_bench: the cost of the WDK harness's pool (docs/wdk.md, "Special pool"): N
 * allocations of SIZE bytes with one tag, each written, then freed, in rounds of LIVE blocks
 * alive at once, with ordinary pool and with special pool for the tag. Prints the time per
 * allocate+free pair and the process's mappings and resident size at the peak.
 *   wdk_pool_bench [N [SIZE [LIVE]]]   (default 100000 256 1000) */
#include "softndk_wdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Lines of /proc/self/maps and VmRSS in KiB. */
static void footprint(unsigned *maps, unsigned long *rss_kib)
{
    *maps = 0;
    *rss_kib = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        (*maps)++;
    if (f)
        fclose(f);
    f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            *rss_kib = strtoul(line + 6, NULL, 10);
    if (f)
        fclose(f);
}

static void run(const char *label, unsigned n, size_t size, unsigned live)
{
    void **blocks = calloc(live, sizeof *blocks);
    if (!blocks)
        return;
    unsigned maps = 0, peak_maps = 0;
    unsigned long rss = 0, peak_rss = 0;
    double t0 = now_s();
    for (unsigned done = 0; done < n; done += live) {
        for (unsigned i = 0; i < live; i++) {
            blocks[i] = ExAllocatePool2(POOL_FLAG_NON_PAGED, size, 'hcnB');
            if (blocks[i])
                memset(blocks[i], 0x5a, size);
        }
        if (done == 0) {
            footprint(&maps, &rss);
            peak_maps = maps, peak_rss = rss;
        }
        for (unsigned i = 0; i < live; i++)
            if (blocks[i])
                ExFreePoolWithTag(blocks[i], 'hcnB');
    }
    double t = now_s() - t0;
    footprint(&maps, &rss);
    printf("%-14s %8.2f us per allocate+free; %u live: %u mappings, %lu KiB resident; after: %u "
           "mappings, %lu KiB\n",
           label, t / n * 1e6, live, peak_maps, peak_rss, maps, rss);
    SoftNdkWdkCheckFreedPool(TRUE);
    free(blocks);
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 100000;
    size_t size = argc > 2 ? (size_t)strtoul(argv[2], NULL, 0) : 256;
    unsigned live = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 1000;
    if (!n || !live)
        return 2;
    printf("%u blocks of %zu bytes, %u alive at once\n", n, size, live);
    run("ordinary pool", n, size, live);
    SoftNdkWdkSetSpecialPool("Bnch");
    run("special pool", n, size, live);
    return 0;
}
