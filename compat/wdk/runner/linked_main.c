/* main() for a driver linked into an executable instead of loaded by softndk-wdkrun: link
 * the driver's objects with this file and libsoftndk-wdk; same options, output and exit
 * status as softndk-wdkrun (without the DRIVER.so argument). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* getopt_long under -std=c11 */
#endif
#include "softndk_wdk.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The driver's entry point: the harness's headers declare none (Windows' do not either). */
DRIVER_INITIALIZE DriverEntry;

int main(int argc, char **argv)
{
    SOFTNDK_WDK_RUN run = {sizeof run, "driver", NULL, 0, FALSE};
    static const struct option longopts[] = {
        {"report", required_argument, NULL, 'R'},
        {"special-pool", optional_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    const char *report = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "n:r:t:q", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': run.DriverName = optarg; break;
        case 'r': run.RegistryPath = optarg; break;
        case 't': run.TimeoutSeconds = (ULONG)strtoul(optarg, NULL, 10); break;
        case 'q': run.Quiet = TRUE; break;
        case 'R': report = optarg; break;
        case 'S':
            if (SoftNdkWdkSetSpecialPool(optarg ? optarg : "all") != STATUS_SUCCESS)
                c = '?';
            break;
        default: break;
        }
        if (c == '?') {
            fprintf(stderr,
                    "usage: %s [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q] [--report FILE] "
                    "[--special-pool[=TAGS|all]]\n",
                    argv[0]);
            return 2;
        }
    }
    SoftNdkWdkInstallCrashReport(report);
    int rc = SoftNdkWdkRunDriver(DriverEntry, &run);
    printf("%s %s\n", rc == 0 ? "PASS" : "FAIL", run.DriverName);
    return rc;
}
