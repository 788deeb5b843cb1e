/* Placeholder until the iwarp layer lands; removed by it. */
extern int sndk_iwarp_placeholder;
