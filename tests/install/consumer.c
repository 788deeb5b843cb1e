/* An outside consumer: compiled against the INSTALLED headers and library only. It touches
 * every dispatch table member, constant and struct of docs/ndk-rules.md [ABI-1], re-checks the x64
 * layouts on its own side, then drives the adapter through the dispatch tables. */
#include <ndk/ndkpi.h>
#include <ndk/softndk.h>
#include <net/if.h>
#include <stdio.h>

#define LAYOUT(cond) _Static_assert(cond, #cond)
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkQueryExtension) == 0x00);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkQueryAdapterInfo) == 0x08);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkCreateCq) == 0x10);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkCreatePd) == 0x18);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkCreateSharedEndpoint) == 0x20);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkCreateConnector) == 0x28);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkCreateListener) == 0x30);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkBuildLAM) == 0x38);
LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkReleaseLAM) == 0x40);
LAYOUT(sizeof(NDK_ADAPTER_DISPATCH) == 0x48);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkClosePd) == 0x00);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkCreateMr) == 0x10);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkCreateMw) == 0x18);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkCreateSrq) == 0x20);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkCreateQp) == 0x28);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkCreateQpWithSrq) == 0x30);
LAYOUT(offsetof(NDK_PD_DISPATCH, NdkGetPrivilegedMemoryRegionToken) == 0x38);
LAYOUT(sizeof(NDK_PD_DISPATCH) == 0x40);
LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkResizeCq) == 0x10);
LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkArmCq) == 0x18);
LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkGetCqResults) == 0x20);
LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkControlCqInterruptModeration) == 0x28);
LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkGetCqResultsEx) == 0x30);
LAYOUT(sizeof(NDK_CQ_DISPATCH) == 0x38);
LAYOUT(offsetof(NDK_MR_DISPATCH, NdkRegisterMr) == 0x10);
LAYOUT(offsetof(NDK_MR_DISPATCH, NdkDeregisterMr) == 0x18);
LAYOUT(offsetof(NDK_MR_DISPATCH, NdkInitializeFastRegisterMr) == 0x20);
LAYOUT(offsetof(NDK_MR_DISPATCH, NdkGetRemoteTokenFromMr) == 0x28);
LAYOUT(offsetof(NDK_MR_DISPATCH, NdkGetLocalTokenFromMr) == 0x30);
LAYOUT(sizeof(NDK_MR_DISPATCH) == 0x38);
LAYOUT(offsetof(NDK_MW_DISPATCH, NdkGetRemoteTokenFromMw) == 0x10);
LAYOUT(sizeof(NDK_MW_DISPATCH) == 0x18);
LAYOUT(offsetof(NDK_SRQ_DISPATCH, NdkModifySrq) == 0x10);
LAYOUT(offsetof(NDK_SRQ_DISPATCH, NdkSrqReceive) == 0x18);
LAYOUT(sizeof(NDK_SRQ_DISPATCH) == 0x20);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkFlush) == 0x10);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkSend) == 0x18);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkReceive) == 0x20);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkBind) == 0x28);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkFastRegister) == 0x30);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkInvalidate) == 0x38);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkRead) == 0x40);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkWrite) == 0x48);
LAYOUT(offsetof(NDK_QP_DISPATCH, NdkSendAndInvalidate) == 0x50);
LAYOUT(sizeof(NDK_QP_DISPATCH) == 0x58);
LAYOUT(offsetof(NDK_SHARED_ENDPOINT_DISPATCH, NdkGetLocalAddress) == 0x10);
LAYOUT(sizeof(NDK_SHARED_ENDPOINT_DISPATCH) == 0x18);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkConnect) == 0x10);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkConnectWithSharedEndpoint) == 0x18);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkCompleteConnect) == 0x20);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkAccept) == 0x28);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkReject) == 0x30);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkGetConnectionData) == 0x38);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkGetLocalAddress) == 0x40);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkGetPeerAddress) == 0x48);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkDisconnect) == 0x50);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkCompleteConnectEx) == 0x58);
LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkAcceptEx) == 0x60);
LAYOUT(sizeof(NDK_CONNECTOR_DISPATCH) == 0x68);
LAYOUT(offsetof(NDK_LISTENER_DISPATCH, NdkListen) == 0x10);
LAYOUT(offsetof(NDK_LISTENER_DISPATCH, NdkGetLocalAddress) == 0x18);
LAYOUT(offsetof(NDK_LISTENER_DISPATCH, NdkControlConnectEvents) == 0x20);
LAYOUT(sizeof(NDK_LISTENER_DISPATCH) == 0x28);
LAYOUT(sizeof(NDK_OBJECT_HEADER) == 0x28 && sizeof(NDK_QP) == 0x30);
LAYOUT(offsetof(NDK_QP, Dispatch) == 0x28);
LAYOUT(sizeof(NDK_RESULT) == 0x18 && sizeof(NDK_RESULT_EX) == 0x28 && sizeof(NDK_SGE) == 0x10);
LAYOUT(offsetof(NDK_RESULT_EX, ProviderErrorCode) == 0x1C);
LAYOUT(offsetof(NDK_RESULT_EX, TypeSpecificCompletionOutput) == 0x20);
LAYOUT(sizeof(NDK_ADAPTER_INFO) == 0x68 && offsetof(NDK_ADAPTER_INFO, RdmaTechnology) == 0x60);
LAYOUT(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) == 0x10);
LAYOUT(sizeof(ULONG) == 4 && sizeof(BOOLEAN) == 1 && sizeof(NTSTATUS) == 4);

/* Every constant with its documented value. */
LAYOUT(NDK_OP_FLAG_SILENT_SUCCESS == 0x1 && NDK_OP_FLAG_READ_FENCE == 0x2);
LAYOUT(NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT == 0x4 && NDK_OP_FLAG_ALLOW_REMOTE_READ == 0x8);
LAYOUT(NDK_OP_FLAG_ALLOW_LOCAL_WRITE == 0x10 && NDK_OP_FLAG_ALLOW_REMOTE_WRITE == 0x30);
LAYOUT(NDK_OP_FLAG_INLINE == 0x40 && NDK_OP_FLAG_RDMA_READ_SINK == 0x80);
LAYOUT(NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE == 0x100 && NDK_OP_FLAG_DEFER == 0x200);
LAYOUT(NDK_MR_FLAG_ALLOW_LOCAL_READ == 0 && NDK_MR_FLAG_ALLOW_LOCAL_WRITE == 1);
LAYOUT(NDK_MR_FLAG_ALLOW_REMOTE_READ == 2 && NDK_MR_FLAG_ALLOW_REMOTE_WRITE == 5);
LAYOUT(NDK_MR_FLAG_RDMA_READ_SINK == 8);
LAYOUT(NDK_CQ_NOTIFY_ERRORS == 0 && NDK_CQ_NOTIFY_ANY == 1 && NDK_CQ_NOTIFY_SOLICITED == 2);
LAYOUT(NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED == 0x1);
LAYOUT(NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED == 0x2);
LAYOUT(NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED == 0x4);
LAYOUT(NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED == 0x8);
LAYOUT(NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED == 0x10);
LAYOUT(NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED == 0x100);
LAYOUT(NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED == 0x10000);
LAYOUT(NdkOperationTypeReceive == 1 && NdkOperationTypeReceiveAndInvalidate == 0x8001);
LAYOUT(NdkOperationTypeSend == 2 && NdkOperationTypeFastRegister == 4);
LAYOUT(NdkOperationTypeBind == 8 && NdkOperationTypeInvalidate == 16);
LAYOUT(NdkOperationTypeRead == 32 && NdkOperationTypeWrite == 64);
LAYOUT(NdkObjectTypeAdapter == 1 && NdkObjectTypeQp == 2 && NdkObjectTypeCq == 3);
LAYOUT(NdkObjectTypeMr == 4 && NdkObjectTypeMw == 5 && NdkObjectTypePd == 6);
LAYOUT(NdkObjectTypeSharedEndpoint == 7 && NdkObjectTypeConnector == 8);
LAYOUT(NdkObjectTypeListener == 9 && NdkObjectTypeSrq == 10 && NdkObjectTypeMax == 11);
LAYOUT(NdkiWarp == 1 && NdkInfiniBand == 2 && NdkRoCE == 3 && NdkRoCEv2 == 4);
LAYOUT(STATUS_PENDING == 0x103 && STATUS_CONNECTION_INVALID == (NTSTATUS)0xC000023A);
LAYOUT(STATUS_BUFFER_OVERFLOW == (NTSTATUS)0x80000005 && STATUS_CANCELLED == (NTSTATUS)0xC0000120);

/* Every callback type, as a consumer implements it. */
static VOID on_close(PVOID ctx) { (void)ctx; }
static VOID on_request(PVOID ctx, NTSTATUS s) { (void)ctx, (void)s; }
static VOID on_create(PVOID ctx, NTSTATUS s, NDK_OBJECT_HEADER *h) { (void)ctx, (void)s, (void)h; }
static VOID on_cq(PVOID ctx, NTSTATUS s) { (void)ctx, (void)s; }
static VOID on_srq(PVOID ctx, NTSTATUS s) { (void)ctx, (void)s; }
static VOID on_connect(PVOID ctx, NDK_CONNECTOR *c) { (void)ctx, (void)c; }
static VOID on_disconnect(PVOID ctx) { (void)ctx; }
static VOID on_disconnect_ex(PVOID ctx, ULONG reason) { (void)ctx, (void)reason; }

static NDK_FN_CLOSE_COMPLETION f1 = on_close;
static NDK_FN_REQUEST_COMPLETION f2 = on_request;
static NDK_FN_CREATE_COMPLETION f3 = on_create;
static NDK_FN_CQ_NOTIFICATION_CALLBACK f4 = on_cq;
static NDK_FN_SRQ_NOTIFICATION_CALLBACK f5 = on_srq;
static NDK_FN_CONNECT_EVENT_CALLBACK f6 = on_connect;
static NDK_FN_DISCONNECT_EVENT_CALLBACK f7 = on_disconnect;
static NDK_FN_DISCONNECT_EVENT_CALLBACK_EX f8 = on_disconnect_ex;

int main(void)
{
    (void)f1, (void)f2, (void)f3, (void)f5, (void)f6, (void)f7, (void)f8;
    NDK_VERSION v = {1, 0};
    NDK_ADAPTER *adapter;
    NTSTATUS st = SoftNdkOpenAdapter(if_nametoindex("lo"), v, NULL, &adapter);
    if (st != STATUS_SUCCESS) {
        printf("open: %s\n", SoftNdkStatusName(st));
        return 1;
    }
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    st = adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size);
    if (st != STATUS_SUCCESS || info.Version.Major != 1 || info.Version.Minor != 2) {
        printf("query: %s\n", SoftNdkStatusName(st));
        return 1;
    }
    NDK_CQ *cq;
    NDK_PD *pd;
    if (adapter->Dispatch->NdkCreateCq(adapter, 16, f4, NULL, NULL, on_create, NULL, &cq) !=
            STATUS_SUCCESS ||
        adapter->Dispatch->NdkCreatePd(adapter, on_create, NULL, &pd) != STATUS_SUCCESS) {
        printf("create failed\n");
        return 1;
    }
    if (pd->Dispatch->NdkClosePd(&pd->Header, on_close, NULL) != STATUS_SUCCESS ||
        cq->Dispatch->NdkCloseCq(&cq->Header, on_close, NULL) != STATUS_SUCCESS) {
        printf("close failed\n");
        return 1;
    }
    SoftNdkCloseAdapter(adapter);
    printf("consumer: softndk %s, NDKPI %u.%u, MaxCqDepth %u: ok\n", SoftNdkVersionString(),
           info.Version.Major, info.Version.Minor, info.MaxCqDepth);
    return 0;
}
