"""The dataset as it comes: the npz format, discovery of graph files, official subsets, download, check."""
