/* SoftNdkStatusName: filled in with the public headers. */
extern int sndk_status_placeholder;
