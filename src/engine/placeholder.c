/* Placeholder until the engine layer lands; removed by it. */
extern int sndk_engine_placeholder;
