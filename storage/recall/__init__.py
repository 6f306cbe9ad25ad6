"""The read path: query understanding, one module per lane, fusion, and the pipeline that fits a budget."""
