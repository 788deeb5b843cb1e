/* softndk-wdkrun — load an NDK consumer driver built as a shared object and run it as Windows
 * would: DriverEntry, then DriverUnload, then a leak report (SoftNdkWdkRunDriver).
 *
 *   softndk-wdkrun [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q] DRIVER.so
 *
 * Exit status: 0 = loaded, unloaded, nothing leaked; 1 = DriverEntry failed, something leaked,
 * or a timeout; 2 = usage or load error. The last line on stdout says PASS or FAIL. */
#include "softndk_wdk.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    fprintf(stderr, "usage: softndk-wdkrun [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q] "
                    "DRIVER.so\n"
                    "  -n NAME           driver name (default: the file name, without lib and .so)\n"
                    "  -r REGISTRY_PATH  the RegistryPath passed to DriverEntry\n"
                    "  -t SECONDS        fail if DriverEntry or DriverUnload hangs this long\n"
                    "  -q                report problems only\n");
}

int main(int argc, char **argv)
{
    SOFTNDK_WDK_RUN run = {sizeof run, NULL, NULL, 0, FALSE};
    int c;
    while ((c = getopt(argc, argv, "n:r:t:qh")) != -1) {
        switch (c) {
        case 'n': run.DriverName = optarg; break;
        case 'r': run.RegistryPath = optarg; break;
        case 't': run.TimeoutSeconds = (ULONG)strtoul(optarg, NULL, 10); break;
        case 'q': run.Quiet = TRUE; break;
        default: usage(); return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1) {
        usage();
        return 2;
    }
    const char *path = argv[optind];
    char name[256];
    if (!run.DriverName) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (strncmp(base, "lib", 3) == 0)
            base += 3;
        snprintf(name, sizeof name, "%s", base);
        char *dot = strchr(name, '.');
        if (dot)
            *dot = 0;
        run.DriverName = name;
    }
    /* RTLD_NOW: an unresolved kernel routine fails the load, as an import would on Windows. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "wdkrun: cannot load %s: %s\n", path, dlerror());
        printf("FAIL %s: not loadable\n", run.DriverName);
        return 2;
    }
    PDRIVER_INITIALIZE entry;
    /* POSIX: a function pointer travels through void * from dlsym. */
    *(void **)&entry = dlsym(h, "DriverEntry");
    if (!entry) {
        fprintf(stderr, "wdkrun: %s exports no DriverEntry\n", path);
        printf("FAIL %s: no DriverEntry\n", run.DriverName);
        return 2;
    }
    int rc = SoftNdkWdkRunDriver(entry, &run);
    /* Unmap only a driver that left nothing behind that could still call into it. */
    if (rc == 0)
        dlclose(h);
    printf("%s %s\n", rc == 0 ? "PASS" : "FAIL", run.DriverName);
    fflush(stdout);
    return rc;
}
