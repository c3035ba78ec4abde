"""The networks and the inputs they read, the ground floor of the GNN rankers: the `Batch` a
network scores, shared layers, the tile-aware inputs, node-feature standardisation, the tpurank
network (`gnn_ranker.GnnRanker`) and the official baseline's (`early_join.EarlyJoinSAGE`) on
one base (`ranker_net.RankerNet`).
Nothing here knows about files, training or the config."""
