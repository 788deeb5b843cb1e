/* ndkinfo: open an NDK adapter through the public interface and print what it offers.
 *
 *   ndkinfo [-d IFNAME] [-V MAJOR.MINOR] [--json]
 *
 * The default interface is the loopback ("lo"); -d any opens the adapter over every local
 * address. Exit status 0 on success, 1 with a one-line reason otherwise. */
#include <getopt.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndk/softndk.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: ndkinfo [-d IFNAME|any] [-V MAJOR.MINOR] [--json]\n"
               "  Opens a softndk adapter and prints its NDK_ADAPTER_INFO.\n"
               "  -d, --ib-dev IFNAME   network interface (default lo; 'any' = every address)\n"
               "  -V, --version M.m     NDKPI version the consumer asks for (default 2.0)\n"
               "      --json            print JSON instead of a table\n");
}

struct flag_name {
    ULONG flag;
    const char *name;
};

static const struct flag_name flags[] = {
    {NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED, "IN_ORDER_DMA_SUPPORTED"},
    {NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, "RDMA_READ_SINK_NOT_REQUIRED"},
    {NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, "CQ_INTERRUPT_MODERATION_SUPPORTED"},
    {NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED, "MULTI_ENGINE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED, "RDMA_READ_LOCAL_INVALIDATE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, "CQ_RESIZE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, "LOOPBACK_CONNECTIONS_SUPPORTED"},
};

struct row {
    const char *name;
    unsigned long long value;
};

int main(int argc, char **argv)
{
    const char *ifname = "lo";
    NDK_VERSION version = {2, 0};
    int json = 0;
    static const struct option longopts[] = {
        {"ib-dev", required_argument, NULL, 'd'}, {"version", required_argument, NULL, 'V'},
        {"json", no_argument, NULL, 'j'},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "d:V:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            ifname = optarg;
            break;
        case 'V': {
            unsigned major, minor;
            if (sscanf(optarg, "%u.%u", &major, &minor) != 2 || major > 0xFFFF || minor > 0xFFFF) {
                fprintf(stderr, "ndkinfo: -V wants MAJOR.MINOR, not '%s'\n", optarg);
                return 1;
            }
            version.Major = (USHORT)major;
            version.Minor = (USHORT)minor;
            break;
        }
        case 'j':
            json = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    ULONG ifindex = 0;
    if (strcmp(ifname, "any") != 0) {
        ifindex = if_nametoindex(ifname);
        if (ifindex == 0) {
            fprintf(stderr, "ndkinfo: no network interface named '%s'\n", ifname);
            return 1;
        }
    }
    NDK_ADAPTER *adapter;
    NTSTATUS st = SoftNdkOpenAdapter(ifindex, version, NULL, &adapter);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "ndkinfo: SoftNdkOpenAdapter(%s, %u.%u): %s\n", ifname, version.Major,
                version.Minor, SoftNdkStatusName(st));
        return 1;
    }
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    st = adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "ndkinfo: NdkQueryAdapterInfo: %s\n", SoftNdkStatusName(st));
        SoftNdkCloseAdapter(adapter);
        return 1;
    }
    const struct row rows[] = {
        {"VendorId", info.VendorId},
        {"DeviceId", info.DeviceId},
        {"MaxRegistrationSize", info.MaxRegistrationSize},
        {"MaxWindowSize", info.MaxWindowSize},
        {"FRMRPageCount", info.FRMRPageCount},
        {"MaxInitiatorRequestSge", info.MaxInitiatorRequestSge},
        {"MaxReceiveRequestSge", info.MaxReceiveRequestSge},
        {"MaxReadRequestSge", info.MaxReadRequestSge},
        {"MaxTransferLength", info.MaxTransferLength},
        {"MaxInlineDataSize", info.MaxInlineDataSize},
        {"MaxInboundReadLimit", info.MaxInboundReadLimit},
        {"MaxOutboundReadLimit", info.MaxOutboundReadLimit},
        {"MaxReceiveQueueDepth", info.MaxReceiveQueueDepth},
        {"MaxInitiatorQueueDepth", info.MaxInitiatorQueueDepth},
        {"MaxSrqDepth", info.MaxSrqDepth},
        {"MaxCqDepth", info.MaxCqDepth},
        {"LargeRequestThreshold", info.LargeRequestThreshold},
        {"MaxCallerData", info.MaxCallerData},
        {"MaxCalleeData", info.MaxCalleeData},
        {"AdapterFlags", info.AdapterFlags},
    };
    SOFTNDK_SEMANTICS sem = {.Size = sizeof sem};
    st = SoftNdkQuerySemantics(adapter, &sem);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "ndkinfo: SoftNdkQuerySemantics: %s\n", SoftNdkStatusName(st));
        SoftNdkCloseAdapter(adapter);
        return 1;
    }
    const char *tech = info.RdmaTechnology == NdkiWarp ? "iWARP" : "other";
    /* not an adapter field: the process's CRC32c kernel (a library older than the field: "?") */
    const char *crc_kernel =
        sem.Size > offsetof(SOFTNDK_SEMANTICS, CrcKernel) && sem.CrcKernel ? sem.CrcKernel : "?";
    const char *crc_why =
        sem.Size > offsetof(SOFTNDK_SEMANTICS, CrcKernelReason) && sem.CrcKernelReason
            ? sem.CrcKernelReason
            : "";
    /* the process's way with a same-host peer's large payloads (a library older: "?") */
    const char *shm_copy =
        sem.Size > offsetof(SOFTNDK_SEMANTICS, SameHostCopy) && sem.SameHostCopy ? sem.SameHostCopy
                                                                                  : "?";
    const char *shm_why =
        sem.Size > offsetof(SOFTNDK_SEMANTICS, SameHostCopyReason) && sem.SameHostCopyReason
            ? sem.SameHostCopyReason
            : "";
    const char *wc = sem.WriteCompletion == SoftNdkWriteCompletionPlaced ? "placed" : "handed";
    size_t nrows = sizeof rows / sizeof rows[0];
    if (json) {
        printf("{\"provider\":\"softndk %s\",\"interface\":\"%s\",\"ifindex\":%u,"
               "\"version\":\"%u.%u\",\"RdmaTechnology\":\"%s\",\"Profile\":\"%s\","
               "\"RnrWaitMs\":%u,\"WriteCompletion\":\"%s\",\"crc_kernel\":\"%s\","
               "\"same_host_copy\":\"%s\"",
               SoftNdkVersionString(), ifname, ifindex, info.Version.Major, info.Version.Minor,
               tech, sem.Profile, sem.RnrWaitMs, wc, crc_kernel, shm_copy);
        for (size_t i = 0; i < nrows; i++)
            printf(",\"%s\":%llu", rows[i].name, rows[i].value);
        printf(",\"flags\":[");
        int first = 1;
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            if (info.AdapterFlags & flags[i].flag) {
                printf("%s\"%s\"", first ? "" : ",", flags[i].name);
                first = 0;
            }
        printf("]}\n");
    } else {
        printf("softndk %s adapter on %s (ifindex %u)\n", SoftNdkVersionString(), ifname, ifindex);
        printf(" %-28s %s\n", "field", "value");
        printf(" %-28s %u.%u (asked %u.%u)\n", "Version", info.Version.Major, info.Version.Minor,
               version.Major, version.Minor);
        printf(" %-28s %s\n", "RdmaTechnology", tech);
        printf(" %-28s %s (%s)\n", "Profile", sem.Profile, sem.Family);
        printf(" %-28s %u\n", "RnrWaitMs", sem.RnrWaitMs);
        printf(" %-28s %s\n", "WriteCompletion", wc);
        printf(" %-28s %s (%s)\n", "CRC32c kernel", crc_kernel, crc_why);
        printf(" %-28s %s (%s)\n", "Same-host copy", shm_copy, shm_why);
        for (size_t i = 0; i < nrows; i++) {
            if (strcmp(rows[i].name, "AdapterFlags") == 0 || strcmp(rows[i].name, "DeviceId") == 0)
                printf(" %-28s 0x%llx\n", rows[i].name, rows[i].value);
            else
                printf(" %-28s %llu\n", rows[i].name, rows[i].value);
        }
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            if (info.AdapterFlags & flags[i].flag)
                printf(" %-28s NDK_ADAPTER_FLAG_%s\n", "", flags[i].name);
    }
    SoftNdkCloseAdapter(adapter);
    return 0;
}
