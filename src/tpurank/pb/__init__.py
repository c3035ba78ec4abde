"""Raw TpuGraphs protobufs (`ModuleTuningData`, `TuningData`) turned into the dataset's npz format."""
