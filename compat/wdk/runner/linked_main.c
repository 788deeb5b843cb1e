/* main() for a driver linked into an executable instead of loaded by softndk-wdkrun: link
 * the driver's objects with this file and libsoftndk-wdk; same options, output and exit
 * status as softndk-wdkrun (without the DRIVER.so argument). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* getopt under -std=c11 */
#endif
#include "softndk_wdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    SOFTNDK_WDK_RUN run = {sizeof run, "driver", NULL, 0, FALSE};
    int c;
    while ((c = getopt(argc, argv, "n:r:t:q")) != -1) {
        switch (c) {
        case 'n': run.DriverName = optarg; break;
        case 'r': run.RegistryPath = optarg; break;
        case 't': run.TimeoutSeconds = (ULONG)strtoul(optarg, NULL, 10); break;
        case 'q': run.Quiet = TRUE; break;
        default:
            fprintf(stderr, "usage: %s [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q]\n", argv[0]);
            return 2;
        }
    }
    int rc = SoftNdkWdkRunDriver(DriverEntry, &run);
    printf("%s %s\n", rc == 0 ? "PASS" : "FAIL", run.DriverName);
    return rc;
}
