"""vLLM engines: in-process (`engine`, with `worker`'s weight-sync extension) and as servers in
processes of their own (`server`, driven by `servers`; started by `launch` or placed by Ray through
`ray_launch`; weights pushed through `transport`). Importing this package imports no vLLM.
"""
